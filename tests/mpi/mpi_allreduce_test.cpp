// Allreduce on real MPI ranks: every algorithm x type x op on random integer-valued inputs
// against an exact reference, results compared bitwise across ranks; in-place, spans,
// nonblocking, errors, COLLX_CHECK and COLLX_TIMEOUT.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "config_override.hpp"
#include "exact_data.hpp"
#include "mpi_test_util.hpp"
#include "random_cases.hpp"

namespace {

using collx::Algorithm;
using collx::DataType;
using collx::ReduceOp;
using collx::testing::all_ranks;
using collx::testing::Case;
using collx::testing::identical_on_all_ranks;
using collx::testing::make_case;

// hierarchical and multi_leader split by the communicator's node layout: under
// COLLX_NODE_LAYOUT (tests/mpi/CMakeLists.txt) or on real nodes (tests/cluster) they run their
// node-aware schedules, on one node the flat allreduce they fall back to.
const Algorithm kAlgorithms[] = {Algorithm::ring,         Algorithm::recursive_doubling,
                                 Algorithm::rabenseifner, Algorithm::hierarchical,
                                 Algorithm::multi_leader, Algorithm::automatic};

std::string describe(Algorithm a, DataType t, ReduceOp o, std::size_t count, bool in_place) {
  return std::string(collx::to_string(a)) + " " + std::string(collx::to_string(t)) + " " +
         std::string(collx::to_string(o)) + " count=" + std::to_string(count) +
         (in_place ? " in-place" : "");
}

class MpiAllreduce : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
};

// The checks run once per algorithm, type and op (over its ten calls) rather than after every
// call: each check is a collective on MPI_COMM_WORLD, and at 5 oversubscribed ranks on MPICH
// they were most of this test's time. A rank with a wrong result names the call in its own
// failure line; the results' hashes are compared across ranks.
TEST_F(MpiAllreduce, EveryAlgorithmTypeAndOpIsExactAndIdenticalOnAllRanks) {
  const int p = comm.size();
  const std::size_t counts[] = {0, 1, static_cast<std::size_t>(p + 1), 1031, 70001};
  std::uint64_t seed = 1;
  for (Algorithm algorithm : kAlgorithms) {
    for (int t = 0; t < collx::kDataTypeCount; ++t) {
      for (int o = 0; o < collx::kReduceOpCount; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (!collx::is_supported(type, op)) continue;
        const std::string name = std::string(collx::to_string(algorithm)) + " " +
                                 std::string(collx::to_string(type)) + " " +
                                 std::string(collx::to_string(op));
        std::string wrong;  // the calls wrong on this rank
        std::vector<std::uint64_t> hashes;
        for (std::size_t count : counts) {
          for (bool in_place : {false, true}) {
            const Case c = make_case(type, op, count, comm.rank(), p, seed++);
            std::vector<std::byte> out(c.input.size(), std::byte{0x5A});
            collx::Options options;
            options.algorithm = algorithm;
            if (in_place) {
              out = c.input;
              comm.allreduce(collx::in_place, out.data(), count, type, op, options);
            } else {
              comm.allreduce(c.input.data(), out.data(), count, type, op, options);
            }
            if (out != c.expected)
              wrong += " [" + describe(algorithm, type, op, count, in_place) + "]";
            std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the result
            for (std::byte b : out)
              h = (h ^ static_cast<std::uint64_t>(b)) * 0x100000001b3ull;
            hashes.push_back(h);
          }
        }
        ASSERT_TRUE(all_ranks(wrong.empty()))
            << name
            << (wrong.empty() ? ": wrong on another rank" : ": wrong on this rank:" + wrong);
        ASSERT_TRUE(identical_on_all_ranks(hashes.data(), hashes.size() * sizeof(std::uint64_t)))
            << name << ": results differ between ranks";
      }
    }
  }
}

TEST_F(MpiAllreduce, RandomRealFloatsGiveBitwiseIdenticalResults) {
  std::mt19937 rng(static_cast<unsigned>(comm.rank()) * 7919u + 3u);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (Algorithm algorithm : kAlgorithms) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      std::vector<float> f(100003);
      std::vector<double> d(100003);
      for (auto& v : f)
        v = static_cast<float>(dist(rng));
      for (auto& v : d)
        v = dist(rng);
      collx::Options options;
      options.algorithm = algorithm;
      comm.allreduce<float>(std::span<float>(f), op, options);
      comm.allreduce<double>(std::span<double>(d), op, options);
      EXPECT_TRUE(identical_on_all_ranks(f.data(), f.size() * sizeof(float)))
          << collx::to_string(algorithm);
      EXPECT_TRUE(identical_on_all_ranks(d.data(), d.size() * sizeof(double)))
          << collx::to_string(algorithm);
    }
  }
}

// The node-aware allreduces' pipelined forms (nodes a power of two): segments of 1 KiB cut
// 70001 elements into several node segments, whose exchanges across the nodes are in flight while
// the nodes work on the neighbouring ones. Exact against the reference, and random real floats
// bitwise identical on every rank. Elsewhere (one node, 3 nodes) it checks the other forms.
TEST_F(MpiAllreduce, NodeAwareInChunksIsExactAndIdentical) {
  const int p = comm.size();
  std::uint64_t seed = 77;
  std::mt19937 rng(static_cast<unsigned>(comm.rank()) * 31u + 5u);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (Algorithm algorithm : {Algorithm::multi_leader, Algorithm::hierarchical}) {
    collx::Options options;
    options.algorithm = algorithm;
    options.segment_bytes = 1024;
    for (DataType type :
         {DataType::float32, DataType::float64, DataType::int32, DataType::bfloat16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::max}) {
        if (!collx::is_supported(type, op)) continue;
        for (bool in_place : {false, true}) {
          const std::size_t count = 70001;
          const Case c = make_case(type, op, count, comm.rank(), p, seed++);
          std::vector<std::byte> out(c.input.size(), std::byte{0x5A});
          if (in_place) {
            out = c.input;
            comm.allreduce(collx::in_place, out.data(), count, type, op, options);
          } else {
            comm.allreduce(c.input.data(), out.data(), count, type, op, options);
          }
          EXPECT_TRUE(all_ranks(out == c.expected))
              << describe(algorithm, type, op, count, in_place) << " segments of 1 KiB";
        }
      }
    }
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      std::vector<double> d(70001);
      for (auto& v : d)
        v = dist(rng);
      comm.allreduce<double>(std::span<double>(d), op, options);
      EXPECT_TRUE(identical_on_all_ranks(d.data(), d.size() * sizeof(double)))
          << collx::to_string(algorithm) << " float64 " << collx::to_string(op)
          << " segments of 1 KiB";
    }
  }
}

TEST_F(MpiAllreduce, SpanOverloads) {
  std::vector<std::int32_t> send(17, comm.rank() + 1);
  std::vector<std::int32_t> recv(17, 0);
  comm.allreduce(std::span<const std::int32_t>(send), std::span<std::int32_t>(recv), ReduceOp::sum);
  const int p = comm.size();
  for (auto v : recv)
    EXPECT_EQ(v, p * (p + 1) / 2);
  EXPECT_THROW(comm.allreduce(std::span<const std::int32_t>(send),
                              std::span<std::int32_t>(recv.data(), 3), ReduceOp::sum),
               collx::Error);
}

TEST_F(MpiAllreduce, NonblockingOperationsCompleteInAnyOrder) {
  const int p = comm.size();
  constexpr int kInFlight = 6;
  std::vector<std::vector<double>> buffers(kInFlight);
  std::vector<collx::Request> requests;
  for (int k = 0; k < kInFlight; ++k) {
    buffers[k].assign(static_cast<std::size_t>(1000 * (k + 1) + (k % 2 ? 200000 : 0)),
                      static_cast<double>(comm.rank() + k));
    collx::Options options;
    options.algorithm = kAlgorithms[k % 5];
    requests.push_back(comm.iallreduce(buffers[k].data(), buffers[k].data(), buffers[k].size(),
                                       DataType::float64, ReduceOp::sum, options));
  }
  // Wait in reverse order, testing the others meanwhile.
  for (int k = kInFlight - 1; k >= 0; --k) {
    for (int j = 0; j < k; ++j)
      requests[j].test();
    requests[k].wait();
    EXPECT_FALSE(requests[k].valid());
  }
  for (int k = 0; k < kInFlight; ++k) {
    const double expected = p * (p - 1) / 2.0 + static_cast<double>(p * k);
    for (double v : buffers[k])
      ASSERT_EQ(v, expected) << "operation " << k;
  }
}

// A blocking call runs in place when nothing else is in flight and through the engine
// otherwise; ranks taking different paths in the same call must still match.
TEST_F(MpiAllreduce, InPlaceAndEnginePathsInteroperate) {
  collx::Communicator other(MPI_COMM_WORLD);
  const bool early = comm.rank() % 2 == 0;
  for (std::size_t count : {std::size_t{1}, std::size_t{100}, std::size_t{256}}) {
    std::vector<float> pending(5000, 1.0f);
    collx::Request request;
    if (early)
      request = other.iallreduce(pending.data(), pending.data(), pending.size(), DataType::float32,
                                 ReduceOp::sum);
    std::vector<float> small(count, static_cast<float>(comm.rank()));
    collx::Options options;
    options.algorithm = Algorithm::recursive_doubling;
    comm.allreduce(collx::in_place, small.data(), count, DataType::float32, ReduceOp::max, options);
    if (!early)
      request = other.iallreduce(pending.data(), pending.data(), pending.size(), DataType::float32,
                                 ReduceOp::sum);
    request.wait();
    for (float v : small)
      ASSERT_EQ(v, static_cast<float>(comm.size() - 1));
    for (float v : pending)
      ASSERT_EQ(v, static_cast<float>(comm.size()));
  }
}

TEST_F(MpiAllreduce, BadArgumentsAreRejectedBeforeAnyMessageAndTheCommunicatorStaysUsable) {
  std::vector<float> a(8, 1.0f), b(8);
  auto expect_error = [&](auto&& call, collx::ErrorCode code, const char* needle) {
    try {
      call();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(e.collective(), "allreduce");
      EXPECT_EQ(e.rank(), comm.rank());
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { comm.allreduce(nullptr, b.data(), 8, DataType::float32, ReduceOp::sum); },
               collx::ErrorCode::invalid_argument, "sendbuf");
  expect_error([&] { comm.allreduce(a.data(), nullptr, 8, DataType::float32, ReduceOp::sum); },
               collx::ErrorCode::invalid_argument, "recvbuf");
  expect_error([&] { comm.allreduce(a.data(), b.data(), 8, DataType::int32, ReduceOp::avg); },
               collx::ErrorCode::unsupported, "avg");
  expect_error([&] { comm.allreduce(a.data(), a.data() + 2, 4, DataType::float32, ReduceOp::sum); },
               collx::ErrorCode::invalid_argument, "overlap");
  expect_error(
      [&] { comm.allreduce(a.data(), b.data(), 8, static_cast<DataType>(42), ReduceOp::sum); },
      collx::ErrorCode::invalid_argument, "DataType");
  expect_error(
      [&] {
        collx::Options options;
        options.algorithm = Algorithm::bruck;
        comm.allreduce(a.data(), b.data(), 8, DataType::float32, ReduceOp::sum, options);
      },
      collx::ErrorCode::unsupported, "bruck");
  expect_error(
      [&] {
        collx::Options options;
        options.pipeline_depth = -1;
        comm.allreduce(a.data(), b.data(), 8, DataType::float32, ReduceOp::sum, options);
      },
      collx::ErrorCode::invalid_argument, "pipeline_depth");
  // A null buffer with count 0 is fine.
  comm.allreduce(nullptr, nullptr, 0, DataType::float32, ReduceOp::sum);
  // Still usable, and still in step across ranks.
  comm.allreduce(a.data(), b.data(), 8, DataType::float32, ReduceOp::max);
  EXPECT_EQ(b[0], 1.0f);
}

// A communicator freed right after a call every rank rejected, its notices of it not all taken:
// a later communicator (whose MPI duplicate may reuse the freed one's context) must not take them
// as its own. They used to arrive there as a notice of a call #3 it never failed, and revoke it
// once it passed call #3 (at its next rejected call, where deferred notices are judged).
TEST(MpiCommunicator, ARejectedCallsNoticesStayWithItsCommunicator) {
  const int rounds = 5;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::int32_t> a(8, 1), b(8);
    {
      collx::Communicator first(MPI_COMM_WORLD);
      for (int call = 0; call < 3; ++call)
        first.allreduce(a.data(), b.data(), 8, DataType::int32, ReduceOp::sum);
      EXPECT_THROW(first.allreduce(a.data(), nullptr, 8, DataType::int32, ReduceOp::sum),
                   collx::Error);
    }
    collx::Communicator second(MPI_COMM_WORLD);
    for (int call = 0; call < 6; ++call)
      second.allreduce(a.data(), b.data(), 8, DataType::int32, ReduceOp::sum);
    EXPECT_THROW(second.allreduce(a.data(), nullptr, 8, DataType::int32, ReduceOp::sum),
                 collx::Error);
    for (int call = 0; call < 3; ++call) {
      b.assign(8, 0);
      try {
        second.allreduce(a.data(), b.data(), 8, DataType::int32, ReduceOp::sum);
      } catch (const collx::Error& e) {
        ADD_FAILURE() << "round " << round << ": " << e.what();
      }
      EXPECT_EQ(b[0], second.size()) << "round " << round;
    }
  }
}

// An argument error only one rank sees (its null recvbuf) while the others start the call: the
// others' waits end with ErrorCode::revoked naming that rank and its reason, every later call
// on every rank fails the same way, and a new communicator works. With one rank, the only rank
// failed: the communicator stays usable.
TEST(MpiRevoke, OneRanksArgumentErrorRevokesTheCommunicatorOnEveryRank) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const int last = comm.size() - 1;
  const std::size_t n = std::size_t{1} << 16;  // 256 KiB: the others wait for the failed rank
  std::vector<float> a(n, 1.0f), b(n);
  auto expect_revoked_by_last = [&](const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::revoked) << e.what();
    const std::string who = comm.rank() == last ? "this rank" : "rank " + std::to_string(last);
    EXPECT_NE(std::string(e.what()).find(who + " failed in allreduce #0: invalid argument"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("recvbuf"), std::string::npos) << e.what();
  };
  if (comm.rank() == last) {
    try {
      comm.iallreduce(a.data(), nullptr, n, DataType::float32, ReduceOp::sum).wait();
      ADD_FAILURE() << "a null recvbuf was accepted";
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument) << e.what();
    }
  } else {
    try {
      comm.iallreduce(a.data(), b.data(), n, DataType::float32, ReduceOp::sum).wait();
      ADD_FAILURE() << "the allreduce completed without rank " << last;
    } catch (const collx::Error& e) {
      expect_revoked_by_last(e);
    }
  }
  for (int call = 0; call < 2; ++call) {
    float one = 1.0f;
    if (comm.size() == 1) {
      comm.allreduce(collx::in_place, &one, 1, DataType::float32, ReduceOp::sum);
      EXPECT_EQ(one, 1.0f);
      continue;
    }
    try {
      comm.allreduce(collx::in_place, &one, 1, DataType::float32, ReduceOp::sum);
      ADD_FAILURE() << "a call on a revoked communicator completed";
    } catch (const collx::Error& e) {
      expect_revoked_by_last(e);
    }
  }
  collx::Communicator fresh(MPI_COMM_WORLD);
  fresh.allreduce(a.data(), b.data(), n, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(b[n - 1], static_cast<float>(comm.size()));
}

// After a revoke the failed operation's sends are released unfinished; where the peer never
// takes them and never progresses the transport again (here: its next collective goes through
// the shared arena, then it leaves), closing the communicators must not wait for them. Under
// COLLX_TRANSPORT=ucx (ucx_allreduce_np*) the endpoints' flush waited forever before.
TEST(MpiRevoke, ClosingAfterARevokeDoesNotWaitForUnfinishedSends) {
  {
    collx::Communicator comm(MPI_COMM_WORLD);
    if (comm.size() == 1) GTEST_SKIP() << "needs a peer";
    const int last = comm.size() - 1;
    const std::size_t n = std::size_t{1} << 16;  // 256 KiB: a rendezvous send
    std::vector<float> a(n, 1.0f), b(n);
    collx::Options exchange;
    exchange.algorithm = Algorithm::recursive_doubling;
    EXPECT_THROW(comm.iallreduce(a.data(), comm.rank() == last ? nullptr : b.data(), n,
                                 DataType::float32, ReduceOp::sum, exchange)
                     .wait(),
                 collx::Error);
    collx::Communicator fresh(MPI_COMM_WORLD);
    collx::Options arena;
    arena.algorithm = fresh.shared_memory() ? Algorithm::shared_memory : Algorithm::ring;
    fresh.allreduce(a.data(), b.data(), n, DataType::float32, ReduceOp::sum, arena);
    EXPECT_EQ(b[n - 1], static_cast<float>(comm.size()));
  }
  // Every rank got here: nothing waited for the other.
  int one = 1, ranks = 0, size = 0;
  MPI_Allreduce(&one, &ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(ranks, size);
}

// Ranks that run one call with different algorithms (what mismatched calls of different sizes
// can make auto choose; forced here): one rank in the shared arena, the others in messages. The
// arena's wait sees the peers' messages for its own call and fails; the revoke reaches the
// others. Every rank gets an error in time instead of waiting for the others for ever.
TEST(MpiMismatch, ArenaAgainstMessagesFailsOnEveryRank) {
  {
    collx::Communicator comm(MPI_COMM_WORLD);
    if (comm.size() == 1 || !comm.shared_memory()) GTEST_SKIP() << "needs peers in the arena";
    const std::size_t n = 100000;
    std::vector<std::int32_t> a(n, comm.rank() + 1), b(n, 0);
    collx::Options options;
    options.algorithm = comm.rank() == 0 ? Algorithm::shared_memory : Algorithm::ring;
    EXPECT_THROW(comm.allreduce(a.data(), b.data(), n, DataType::int32, ReduceOp::sum, options),
                 collx::Error);
  }
  collx::Communicator fresh(MPI_COMM_WORLD);
  std::int32_t one = 1;
  fresh.allreduce(collx::in_place, &one, 1, DataType::int32, ReduceOp::sum);
  EXPECT_EQ(one, fresh.size());
}

// Counts whose gathered or reduced total no buffer can hold are argument errors (not a
// division by zero in a schedule, nor a misleading "overlap"), and nothing is sent.
TEST_F(MpiAllreduce, CountsWhoseTotalOverflowsAreInvalidArguments) {
  std::vector<float> a(8, 1.0f), b(8);
  const std::size_t huge = SIZE_MAX / 8;
  auto expect_invalid = [&](auto&& call, const char* collective) {
    try {
      call();
      ADD_FAILURE() << "no error for " << collective;
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument) << e.what();
      EXPECT_EQ(e.collective(), collective) << e.what();
      EXPECT_NE(std::string(e.what()).find("largest possible buffer"), std::string::npos)
          << e.what();
    }
  };
  if (comm.size() > 1) {
    expect_invalid(
        [&] { comm.reduce_scatter(a.data(), b.data(), huge, DataType::float32, ReduceOp::sum); },
        "reduce_scatter");
    expect_invalid([&] { comm.allgather(a.data(), b.data(), huge, DataType::float32); },
                   "allgather");
    expect_invalid([&] { comm.alltoall(a.data(), b.data(), huge, DataType::float32); }, "alltoall");
    expect_invalid([&] { comm.gather(a.data(), b.data(), huge, DataType::float32, 0); }, "gather");
    std::vector<std::size_t> counts(static_cast<std::size_t>(comm.size()), SIZE_MAX / 2);
    expect_invalid(
        [&] {
          comm.reduce_scatter_v(a.data(), b.data(), counts, DataType::float32, ReduceOp::sum);
        },
        "reduce_scatter_v");
  }
  expect_invalid(
      [&] { comm.allreduce(a.data(), b.data(), huge * 2, DataType::float32, ReduceOp::sum); },
      "allreduce");
  // Still usable, and still in step across ranks.
  comm.allreduce(a.data(), b.data(), 8, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(b[0], static_cast<float>(comm.size()));
}

TEST(MpiCommunicator, FreedCommunicatorIsAnError) {
  collx::Communicator comm(MPI_COMM_WORLD);
  EXPECT_FALSE(comm.is_freed());
  comm.free();
  EXPECT_TRUE(comm.is_freed());
  int x = 1;
  try {
    comm.allreduce(&x, &x, 1, DataType::int32, ReduceOp::sum);
    ADD_FAILURE() << "allreduce on a freed communicator";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::communicator_freed);
  }
  EXPECT_THROW(comm.rank(), collx::Error);
}

// This suite runs once per transport (COLLX_TRANSPORT in the ctest environment).
TEST(MpiCommunicator, UsesTheTransportThatTheConfigurationNames) {
  collx::Communicator comm(MPI_COMM_WORLD);
  EXPECT_EQ(collx::detail::state_of(comm).transport->name(),
            collx::detail::to_string(collx::detail::config().transport));
}

TEST(MpiCommunicator, DuplicatesItsCommunicator) {
  collx::Communicator comm(MPI_COMM_WORLD);
  int result = MPI_UNEQUAL;
  MPI_Comm_compare(comm.mpi_comm(), MPI_COMM_WORLD, &result);
  EXPECT_EQ(result, MPI_CONGRUENT);
  // Works on any communicator, here the odd and even ranks apart.
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, comm.rank() % 2, comm.rank(), &half);
  {
    collx::Communicator sub(half);
    std::int64_t v = comm.rank();
    sub.allreduce(collx::in_place, &v, 1, DataType::int64, ReduceOp::sum);
    std::int64_t expected = 0;
    for (int r = comm.rank() % 2; r < comm.size(); r += 2)
      expected += r;
    EXPECT_EQ(v, expected);
  }
  MPI_Comm_free(&half);
}

// Changes the configuration for one test and restores the one in force before (which may come
// from the environment, for example COLLX_TRANSPORT=ucx for the UCX runs of this suite).
using collx::testing::ConfigOverride;

// The communicator remembers its last choice per collective (CommState::choose); a replaced
// configuration must reach the next call, and so must another size or algorithm. Asked for
// nonblocking calls, which run the table's choice until the autotuner has settled a class.
TEST(MpiSelection, RememberedChoiceFollowsTheConfigurationAndTheCall) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  using collx::Algorithm;
  using collx::Collective;
  // As a call on this communicator asks (the size class's tuner, once started, keeps the
  // table's choice made with the arena the communicator has).
  const bool arena = s.transport->shared_arena() != nullptr;
  const Algorithm small =
      s.choose(Collective::allreduce, Algorithm::automatic, 8, arena, false).algorithm;
  EXPECT_EQ(small,
            collx::detail::resolve_algorithm(Collective::allreduce, Algorithm::automatic, 8,
                                             comm.size(), comm.rank(), arena, s.node_shape()));
  EXPECT_EQ(s.choose(Collective::allreduce, Algorithm::ring, 8, arena, false).algorithm,
            Algorithm::ring);
  EXPECT_EQ(s.choose(Collective::allreduce, Algorithm::automatic, 64 << 20, arena, false).algorithm,
            collx::detail::resolve_algorithm(Collective::allreduce, Algorithm::automatic, 64 << 20,
                                             comm.size(), comm.rank(), arena, s.node_shape()));
  EXPECT_EQ(s.choose(Collective::allreduce, Algorithm::automatic, 8, arena, false).algorithm,
            small);
  {
    collx::detail::Config c = collx::detail::config();
    const Algorithm forced =
        small == Algorithm::ring ? Algorithm::recursive_doubling : Algorithm::ring;
    c.algorithm[static_cast<int>(Collective::allreduce)] = forced;
    const ConfigOverride guard(c);
    EXPECT_EQ(s.choose(Collective::allreduce, Algorithm::automatic, 8, arena, false).algorithm,
              forced);
    // And a call under it runs and is right.
    std::vector<double> v(2, 1.0);
    comm.allreduce(collx::in_place, v.data(), 2, DataType::float64, ReduceOp::sum);
    EXPECT_EQ(v[0], comm.size());
  }
  EXPECT_EQ(s.choose(Collective::allreduce, Algorithm::automatic, 8, arena, false).algorithm,
            small);
}

TEST(MpiCheckMode, MismatchedCallsFailOnEveryRank) {
  collx::Communicator comm(MPI_COMM_WORLD);
  ASSERT_GE(comm.size(), 2) << "run with two ranks or more (ctest filters it out at np=1)";
  collx::detail::Config c = collx::detail::config();
  c.check = true;
  const ConfigOverride guard(c);
  std::vector<float> v(16, 1.0f);
  // Matching calls pass the check.
  comm.allreduce(collx::in_place, v.data(), 16, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(v[0], static_cast<float>(comm.size()));
  // Rank 0 reduces 15 elements, the others 16: every rank must get the error.
  const std::size_t count = comm.rank() == 0 ? 15 : 16;
  try {
    comm.allreduce(collx::in_place, v.data(), count, DataType::float32, ReduceOp::sum);
    ADD_FAILURE() << "mismatch not detected";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::mismatch) << e.what();
    EXPECT_NE(std::string(e.what()).find("count=" + std::to_string(count)), std::string::npos);
  }
  // And the communicator remains usable afterwards.
  std::int32_t one = 1;
  comm.allreduce(collx::in_place, &one, 1, DataType::int32, ReduceOp::sum);
  EXPECT_EQ(one, comm.size());
}

// The same through the shared arena, whose schedules take a turn when they are built: the
// mismatched call's turn is still taken and ended, so the arena's next operations run (they
// waited for it forever before).
TEST(MpiCheckMode, MismatchedArenaCallsLeaveTheArenaUsable) {
  collx::Communicator comm(MPI_COMM_WORLD);
  ASSERT_GE(comm.size(), 2) << "run with two ranks or more (ctest filters it out at np=1)";
  if (!comm.shared_memory()) GTEST_SKIP() << "no shared arena on this communicator";
  collx::detail::Config c = collx::detail::config();
  c.check = true;
  c.algorithm[static_cast<int>(collx::Collective::allreduce)] = Algorithm::shared_memory;
  c.algorithm[static_cast<int>(collx::Collective::broadcast)] = Algorithm::shared_memory;
  const ConfigOverride guard(c);
  std::vector<float> v(16, 1.0f);
  for (int round = 0; round < 3; ++round) {
    const std::size_t count = comm.rank() == 0 ? 15 : 16;
    EXPECT_THROW(comm.allreduce(collx::in_place, v.data(), count, DataType::float32, ReduceOp::sum),
                 collx::Error);
    std::vector<std::int32_t> w(1000, comm.rank() + 1);
    comm.allreduce(collx::in_place, w.data(), w.size(), DataType::int32, ReduceOp::sum);
    EXPECT_EQ(w[999], comm.size() * (comm.size() + 1) / 2) << "round " << round;
    std::int32_t b = comm.rank() == 0 ? 7 + round : -1;
    comm.broadcast(&b, 1, DataType::int32, 0);
    EXPECT_EQ(b, 7 + round);
  }
}

TEST(MpiTimeout, AWaitThatNeverEndsBecomesAnErrorNamingThePeer) {
  collx::Communicator world(MPI_COMM_WORLD);
  ASSERT_GE(world.size(), 2) << "run with two ranks or more (ctest filters it out at np=1)";
  MPI_Comm pair_comm;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), &pair_comm);
  if (world.rank() < 2) {
    collx::Communicator pair(pair_comm);
    std::int32_t v = 1;
    collx::Options options;
    options.algorithm = Algorithm::recursive_doubling;
    if (pair.rank() == 0) {
      collx::detail::Config c = collx::detail::config();
      c.timeout_seconds = 0.3;
      const ConfigOverride guard(c);
      try {
        pair.allreduce(collx::in_place, &v, 1, DataType::int32, ReduceOp::sum, options);
        ADD_FAILURE() << "no timeout";
      } catch (const collx::Error& e) {
        EXPECT_EQ(e.code(), collx::ErrorCode::timeout) << e.what();
        EXPECT_NE(std::string(e.what()).find("from rank 1"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("allreduce #0"), std::string::npos) << e.what();
      }
    }
    MPI_Barrier(pair_comm);
    // Rank 1 joins late. Rank 0's timeout revoked the communicator and sent its notice; rank 1's
    // late call may still complete with the right result, from the messages rank 0's abandoned
    // call had sent (then it hears the notice at its next wait), or fail at once. Its next call
    // fails either way, and so does every call of rank 0.
    const std::string who = pair.rank() == 0 ? "this rank" : "rank 0";
    auto expect_revoked = [&](const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::revoked) << e.what();
      EXPECT_NE(std::string(e.what()).find(who + " failed in allreduce #0: timeout"),
                std::string::npos)
          << e.what();
    };
    if (pair.rank() == 1) {
      try {
        pair.allreduce(collx::in_place, &v, 1, DataType::int32, ReduceOp::sum, options);
        EXPECT_EQ(v, 2);
      } catch (const collx::Error& e) {
        expect_revoked(e);
      }
    }
    try {
      pair.allreduce(collx::in_place, &v, 1, DataType::int32, ReduceOp::sum, options);
      ADD_FAILURE() << "a call on a communicator revoked by a timeout completed";
    } catch (const collx::Error& e) {
      expect_revoked(e);
    }
    MPI_Comm_free(&pair_comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
