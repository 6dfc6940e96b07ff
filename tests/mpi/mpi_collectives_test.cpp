// Every collective on real MPI ranks: each algorithm, several types, random integer-valued
// inputs against exact references, roots first/middle/last, counts 0, 1, odd and large, in-place
// forms; nonblocking operations in flight together; sub-communicators beside their parent;
// point-to-point.
#include <gtest/gtest.h>

#include <mpi.h>
#include <algorithm>

#include <chrono>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "collx/collx.hpp"
#include "exact_data.hpp"
#include "mpi_test_util.hpp"
#include "random_cases.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using collx::testing::all_ranks;
using collx::testing::make_case;
constexpr auto roots = collx::testing::test_roots;
constexpr auto with_auto = collx::testing::algorithms_with_auto;
using Bytes = std::vector<std::byte>;

std::vector<std::size_t> counts(int p) {
  return {0, 1, static_cast<std::size_t>(2 * p + 3), 65537};
}

collx::Options with(Algorithm a) {
  collx::Options o;
  o.algorithm = a;
  return o;
}

Bytes pattern(DataType type, int rank, std::size_t count, std::size_t first = 0) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, first);
  return b;
}

std::string label(Collective c, Algorithm a, DataType t, std::size_t count, int root = -1,
                  bool in_place = false) {
  return std::string(collx::to_string(c)) + "/" + std::string(collx::to_string(a)) + " " +
         std::string(collx::to_string(t)) + " count=" + std::to_string(count) +
         (root >= 0 ? " root=" + std::to_string(root) : "") + (in_place ? " in-place" : "");
}

double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The calls of a test that were wrong on this rank. The check is one collective on
// MPI_COMM_WORLD per algorithm instead of one per call (at 5 oversubscribed ranks on MPICH the
// per-call checks were a large share of this suite's time); a rank with a wrong result names
// the calls in its own failure line.
class Wrong {
 public:
  void note(bool ok, const std::string& call) {
    if (!ok) calls_ += " [" + call + "]";
  }
  bool none_on_any_rank() const { return all_ranks(calls_.empty()); }
  std::string report() const {
    return calls_.empty() ? "wrong on another rank" : "wrong on this rank:" + calls_;
  }

 private:
  std::string calls_;
};

class MpiCollectives : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
  int p = comm.size();
  int me = comm.rank();
};

// Outputs above 8 MiB, where the shared-memory algorithms write with streaming stores (and
// pieces wrap the rings several times); odd lengths so the copies have unaligned tails.
TEST_F(MpiCollectives, SharedMemoryLargeOutputs) {
  const std::size_t count = (std::size_t{9} << 20) + 13;
  for (int root : roots(p)) {
    Bytes buf = me == root ? pattern(DataType::int8, root, count) : Bytes(count, std::byte{0x5A});
    comm.broadcast(buf.data(), count, DataType::int8, root, with(Algorithm::shared_memory));
    ASSERT_TRUE(all_ranks(buf == pattern(DataType::int8, root, count)))
        << "broadcast root " << root;
  }
  const std::size_t block = (std::size_t{9} << 20) / static_cast<std::size_t>(p) + 5;
  const Bytes mine = pattern(DataType::int8, me, block);
  Bytes out(block * static_cast<std::size_t>(p), std::byte{0x11});
  comm.allgather(mine.data(), out.data(), block, DataType::int8, with(Algorithm::shared_memory));
  Bytes expected;
  for (int r = 0; r < p; ++r) {
    const Bytes b = pattern(DataType::int8, r, block);
    expected.insert(expected.end(), b.begin(), b.end());
  }
  ASSERT_TRUE(all_ranks(out == expected)) << "allgather";
}

TEST_F(MpiCollectives, Broadcast) {
  for (Algorithm a : with_auto(Collective::broadcast)) {
    Wrong wrong;
    for (DataType type : {DataType::int8, DataType::float64, DataType::bfloat16}) {
      for (std::size_t count : counts(p)) {
        for (int root : roots(p)) {
          Bytes buf = me == root ? pattern(type, root, count)
                                 : Bytes(count * collx::size_of(type), std::byte{0x5A});
          comm.broadcast(buf.data(), count, type, root, with(a));
          wrong.note(buf == pattern(type, root, count),
                     label(Collective::broadcast, a, type, count, root));
        }
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, Reduce) {
  std::uint64_t seed = 100;
  for (Algorithm a : with_auto(Collective::reduce)) {
    Wrong wrong;
    for (auto [type, op] :
         {std::pair{DataType::int32, ReduceOp::sum}, std::pair{DataType::float32, ReduceOp::avg},
          std::pair{DataType::float16, ReduceOp::min},
          std::pair{DataType::uint64, ReduceOp::prod}}) {
      for (std::size_t count : counts(p)) {
        for (int root : roots(p)) {
          for (bool in_place : {false, true}) {
            const auto c = make_case(type, op, count, me, p, seed++);
            Bytes out(c.input.size(), std::byte{0x11});
            if (in_place && me == root) {
              out = c.input;
              comm.reduce(out.data(), out.data(), count, type, op, root, with(a));
            } else {
              comm.reduce(c.input.data(), me == root ? out.data() : nullptr, count, type, op, root,
                          with(a));
            }
            wrong.note(me != root || out == c.expected,
                       label(Collective::reduce, a, type, count, root, in_place));
          }
        }
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, Allgather) {
  for (Algorithm a : with_auto(Collective::allgather)) {
    Wrong wrong;
    for (DataType type : {DataType::uint8, DataType::float32}) {
      for (std::size_t count : counts(p)) {
        for (bool in_place : {false, true}) {
          const std::size_t block = count * collx::size_of(type);
          const Bytes mine = pattern(type, me, count);
          Bytes out(block * p, std::byte{0x77});
          if (in_place) {
            if (block) std::memcpy(out.data() + me * block, mine.data(), block);
            comm.allgather(collx::in_place, out.data(), count, type, with(a));
          } else {
            comm.allgather(mine.data(), out.data(), count, type, with(a));
          }
          Bytes expected;
          for (int r = 0; r < p; ++r) {
            const Bytes b = pattern(type, r, count);
            expected.insert(expected.end(), b.begin(), b.end());
          }
          wrong.note(out == expected, label(Collective::allgather, a, type, count, -1, in_place));
        }
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, ReduceScatterEqualAndPerRankBlocks) {
  std::uint64_t seed = 200;
  for (Algorithm a : with_auto(Collective::reduce_scatter)) {
    Wrong wrong;
    for (auto [type, op] :
         {std::pair{DataType::int64, ReduceOp::sum}, std::pair{DataType::bfloat16, ReduceOp::avg},
          std::pair{DataType::int8, ReduceOp::max}}) {
      for (std::size_t count : counts(p)) {
        const std::size_t elem = collx::size_of(type);
        // Equal blocks, in place and not.
        for (bool in_place : {false, true}) {
          auto c = make_case(type, op, count * p, me, p, seed++);
          const Bytes expected(
              c.expected.begin() + static_cast<std::ptrdiff_t>(me * count * elem),
              c.expected.begin() + static_cast<std::ptrdiff_t>((me + 1) * count * elem));
          Bytes out(count * elem, std::byte{0x21});
          if (in_place) {
            comm.reduce_scatter(c.input.data(), c.input.data(), count, type, op, with(a));
            out.assign(c.input.begin(),
                       c.input.begin() + static_cast<std::ptrdiff_t>(count * elem));
          } else {
            comm.reduce_scatter(c.input.data(), out.data(), count, type, op, with(a));
          }
          wrong.note(out == expected,
                     label(Collective::reduce_scatter, a, type, count, -1, in_place));
        }
        // Per-rank lengths: rank r gets (count + r) % 5 * (r % 3) elements, some zero.
        std::vector<std::size_t> lengths(p);
        for (int r = 0; r < p; ++r)
          lengths[r] = (count + r) % 5 * (r % 3) + (count > 1000 ? count / (r + 1) : 0);
        std::vector<std::size_t> offsets(p + 1, 0);
        std::partial_sum(lengths.begin(), lengths.end(), offsets.begin() + 1);
        const auto c = make_case(type, op, offsets.back(), me, p, seed++);
        Bytes out(lengths[me] * elem, std::byte{0x21});
        comm.reduce_scatter_v(c.input.data(), out.data(), lengths, type, op, with(a));
        const Bytes expected(
            c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me] * elem),
            c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me + 1] * elem));
        wrong.note(out == expected, label(Collective::reduce_scatter_v, a, type, count));
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, GatherAndScatter) {
  for (Algorithm a : with_auto(Collective::gather)) {
    Wrong wrong;
    for (DataType type : {DataType::int32, DataType::float16}) {
      for (std::size_t count : counts(p)) {
        for (int root : roots(p)) {
          for (bool in_place : {false, true}) {
            const std::size_t block = count * collx::size_of(type);
            const Bytes mine = pattern(type, me, count);
            Bytes all(me == root ? block * p : 0, std::byte{0x31});
            if (in_place && me == root) {
              if (block) std::memcpy(all.data() + root * block, mine.data(), block);
              comm.gather(all.data() + root * block, all.data(), count, type, root, with(a));
            } else {
              comm.gather(mine.data(), all.data(), count, type, root, with(a));
            }
            Bytes expected;
            for (int r = 0; r < p; ++r) {
              const Bytes b = pattern(type, r, count);
              expected.insert(expected.end(), b.begin(), b.end());
            }
            wrong.note(me != root || all == expected,
                       label(Collective::gather, a, type, count, root, in_place));

            const Bytes source = me == root ? pattern(type, root, count * p) : Bytes{};
            Bytes piece(block, std::byte{0x41});
            if (in_place && me == root) {
              comm.scatter(source.data(), nullptr, count, type, root, with(a));
            } else {
              comm.scatter(source.data(), piece.data(), count, type, root, with(a));
            }
            const bool ok =
                (in_place && me == root) || piece == pattern(type, root, count, me * count);
            wrong.note(ok, label(Collective::scatter, a, type, count, root, in_place));
          }
        }
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, Alltoall) {
  for (Algorithm a : with_auto(Collective::alltoall)) {
    Wrong wrong;
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{5000}}) {
      for (bool in_place : {false, true}) {
        const DataType type = DataType::uint32;
        const std::size_t block = count * 4;
        Bytes send = pattern(type, me, count * p);  // block j: elements j*count ..
        Bytes out(block * p, std::byte{0x61});
        if (in_place) {
          out = send;
          comm.alltoall(out.data(), out.data(), count, type, with(a));
        } else {
          comm.alltoall(send.data(), out.data(), count, type, with(a));
        }
        Bytes expected;
        for (int i = 0; i < p; ++i) {
          const Bytes b = pattern(type, i, count, me * count);
          expected.insert(expected.end(), b.begin(), b.end());
        }
        wrong.note(out == expected, label(Collective::alltoall, a, type, count, -1, in_place));
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, AllreduceTrees) {
  std::uint64_t seed = 300;
  for (Algorithm a : {Algorithm::binomial_tree, Algorithm::double_binary_tree}) {
    Wrong wrong;
    for (auto [type, op] :
         {std::pair{DataType::float64, ReduceOp::sum}, std::pair{DataType::bfloat16, ReduceOp::avg},
          std::pair{DataType::int8, ReduceOp::prod}}) {
      for (std::size_t count : counts(p)) {
        const auto c = make_case(type, op, count, me, p, seed++);
        Bytes out(c.input.size());
        comm.allreduce(c.input.data(), out.data(), count, type, op, with(a));
        wrong.note(out == c.expected, label(Collective::allreduce, a, type, count));
      }
    }
    ASSERT_TRUE(wrong.none_on_any_rank()) << to_string(a) << ": " << wrong.report();
  }
}

TEST_F(MpiCollectives, BarrierOrdersAroundIt) {
  // No rank may leave before the last one arrived; one rank arrives late in each round. Every
  // barrier algorithm by name, blocking and nonblocking (under the emulated node layouts the
  // hierarchical barrier runs its node trees and its exchange between leaders; auto's node rule
  // takes it only on nodes of 8 ranks and more).
  for (Algorithm a : with_auto(Collective::barrier)) {
    for (int round = 0; round < 2 * p + 2; ++round) {
      const bool nonblocking = round % 2 == 1;
      if (me == round % p) {
        const double until = MPI_Wtime() + 0.02;  // this rank arrives late
        while (MPI_Wtime() < until) {
        }
      }
      const double arrived = monotonic_seconds();
      if (nonblocking)
        comm.ibarrier(with(a)).wait();
      else
        comm.barrier(with(a));
      const double left = monotonic_seconds();
      double latest_arrival = 0;
      double earliest_exit = 0;
      MPI_Allreduce(&arrived, &latest_arrival, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(&left, &earliest_exit, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
      // All ranks run on one node and read the same system-wide monotonic clock (MPI_Wtime may
      // count from each process's start); allow a microsecond of skew.
      EXPECT_GE(earliest_exit + 1e-6, latest_arrival)
          << collx::to_string(a) << (nonblocking ? " ibarrier" : " barrier") << " round " << round;
    }
  }
}

TEST_F(MpiCollectives, NonblockingCollectivesInFlightTogether) {
  const std::size_t n = 3001;
  std::vector<float> ar(n, 1.0f + me);
  std::vector<std::int32_t> bc(n, me == p - 1 ? 7 : 0);
  std::vector<double> ag(n * p, -1.0), ag_mine(n, me * 2.0);
  std::vector<std::int64_t> rs(n * p, me + 1), rs_out(n, 0);
  std::vector<collx::Request> reqs;
  reqs.push_back(comm.iallreduce(ar.data(), ar.data(), n, DataType::float32, ReduceOp::sum));
  reqs.push_back(comm.ibroadcast(bc.data(), n, DataType::int32, p - 1));
  reqs.push_back(comm.iallgather(ag_mine.data(), ag.data(), n, DataType::float64));
  reqs.push_back(comm.ireduce_scatter(rs.data(), rs_out.data(), n, DataType::int64, ReduceOp::sum));
  reqs.push_back(comm.ibarrier());
  // Complete in an order that differs by rank.
  for (std::size_t k = 0; k < reqs.size(); ++k)
    reqs[(k + static_cast<std::size_t>(me)) % reqs.size()].wait();
  const float sum = static_cast<float>(p * (p + 1) / 2);
  for (float v : ar)
    ASSERT_EQ(v, sum);
  for (auto v : bc)
    ASSERT_EQ(v, 7);
  for (int r = 0; r < p; ++r)
    ASSERT_EQ(ag[r * n], r * 2.0);
  for (auto v : rs_out)
    ASSERT_EQ(v, p * (p + 1) / 2);
}

// Shared-memory operations in flight together take turns on the segment in call order, however
// the ranks wait for them; several pieces each (more than the ring holds), so operations that
// ran at once would mix their pieces.
TEST_F(MpiCollectives, SharedMemoryOperationsInFlightTogether) {
  const std::size_t n = (std::size_t{3} << 20) / 4 + 7;
  const collx::Options shm = with(Algorithm::shared_memory);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::int32_t> bc(n, me == round % p ? 40 + round : 0);
    std::vector<std::int32_t> mine(n, me + round), ag(n * p, -1);
    std::vector<std::int32_t> red_in(n, me + 1), red_out(n, 0);
    std::vector<std::int32_t> bc2(n, me == (round + 1) % p ? 50 + round : 0);
    std::vector<std::int32_t> all_in(n, me + 2), all_out(n, 0);
    std::vector<std::int32_t> scattered(n * p, me + 3), kept(n, 0);
    std::vector<collx::Request> reqs;
    reqs.push_back(comm.ibroadcast(bc.data(), n, DataType::int32, round % p, shm));
    reqs.push_back(comm.iallgather(mine.data(), ag.data(), n, DataType::int32, shm));
    reqs.push_back(
        comm.ireduce(red_in.data(), red_out.data(), n, DataType::int32, ReduceOp::sum, 0, shm));
    reqs.push_back(comm.ibroadcast(bc2.data(), n, DataType::int32, (round + 1) % p, shm));
    reqs.push_back(
        comm.iallreduce(all_in.data(), all_out.data(), n, DataType::int32, ReduceOp::sum, shm));
    reqs.push_back(comm.ireduce_scatter(scattered.data(), kept.data(), n, DataType::int32,
                                        ReduceOp::sum, shm));
    // Each rank waits in its own order (5 and the 6 requests are coprime: every one once).
    for (std::size_t k = 0; k < reqs.size(); ++k)
      reqs[(k * 5 + static_cast<std::size_t>(me)) % reqs.size()].wait();
    ASSERT_TRUE(
        all_ranks(std::all_of(bc.begin(), bc.end(), [&](int v) { return v == 40 + round; })));
    ASSERT_TRUE(
        all_ranks(std::all_of(bc2.begin(), bc2.end(), [&](int v) { return v == 50 + round; })));
    bool gathered = true;
    for (int r = 0; r < p; ++r) {
      for (std::size_t i = 0; i < n; ++i)
        gathered = gathered && ag[static_cast<std::size_t>(r) * n + i] == r + round;
    }
    ASSERT_TRUE(all_ranks(gathered)) << "round " << round;
    const int sum_plus_2 = p * (p - 1) / 2 + 2 * p;
    ASSERT_TRUE(all_ranks(
        std::all_of(all_out.begin(), all_out.end(), [&](int v) { return v == sum_plus_2; })));
    ASSERT_TRUE(all_ranks(
        std::all_of(kept.begin(), kept.end(), [&](int v) { return v == sum_plus_2 + p; })));
    if (me == 0) {
      for (auto v : red_out)
        ASSERT_EQ(v, p * (p + 1) / 2);
    }
  }
}

// The node-aware schedules in flight together: under COLLX_NODE_LAYOUT (the layout runs) each
// takes its node's arena for the phases inside the node, the turn taken in call order and
// held for the whole operation (registry.hpp, with_node_arena), however the ranks wait.
TEST_F(MpiCollectives, NodeAwareOperationsInFlightTogether) {
  const std::size_t n = (std::size_t{3} << 20) / 4 + 5;
  const collx::Options hier = with(Algorithm::hierarchical);
  const collx::Options leaders = with(Algorithm::multi_leader);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::int32_t> a_in(n, me + 1), a_out(n, 0), b_in(n, 2 * me), b_out(n, 0);
    std::vector<std::int32_t> bc(n, me == (round + 1) % p ? 60 + round : 0);
    std::vector<std::int32_t> mine(n, me - round), ag(n * p, -1);
    std::vector<std::int32_t> red_in(n, me + 5), red_out(n, 0);
    std::vector<std::int32_t> scattered(n * p, me + 3), kept(n, 0);
    std::vector<collx::Request> reqs;
    reqs.push_back(
        comm.iallreduce(a_in.data(), a_out.data(), n, DataType::int32, ReduceOp::sum, leaders));
    reqs.push_back(comm.ibroadcast(bc.data(), n, DataType::int32, (round + 1) % p, hier));
    reqs.push_back(
        comm.iallreduce(b_in.data(), b_out.data(), n, DataType::int32, ReduceOp::sum, hier));
    reqs.push_back(comm.iallgather(mine.data(), ag.data(), n, DataType::int32, hier));
    reqs.push_back(comm.ireduce(red_in.data(), red_out.data(), n, DataType::int32, ReduceOp::sum,
                                p - 1, hier));
    reqs.push_back(comm.ireduce_scatter(scattered.data(), kept.data(), n, DataType::int32,
                                        ReduceOp::sum, hier));
    for (std::size_t k = 0; k < reqs.size(); ++k)
      reqs[(k * 5 + static_cast<std::size_t>(me)) % reqs.size()].wait();
    const int ranks_sum = p * (p - 1) / 2;
    ASSERT_TRUE(all_ranks(
        std::all_of(a_out.begin(), a_out.end(), [&](int v) { return v == ranks_sum + p; })));
    ASSERT_TRUE(all_ranks(
        std::all_of(b_out.begin(), b_out.end(), [&](int v) { return v == 2 * ranks_sum; })));
    ASSERT_TRUE(
        all_ranks(std::all_of(bc.begin(), bc.end(), [&](int v) { return v == 60 + round; })));
    bool gathered = true;
    for (int r = 0; r < p; ++r) {
      for (std::size_t i = 0; i < n; ++i)
        gathered = gathered && ag[static_cast<std::size_t>(r) * n + i] == r - round;
    }
    ASSERT_TRUE(all_ranks(gathered)) << "round " << round;
    ASSERT_TRUE(all_ranks(
        std::all_of(kept.begin(), kept.end(), [&](int v) { return v == ranks_sum + 3 * p; })));
    if (me == p - 1) {
      for (auto v : red_out)
        ASSERT_EQ(v, ranks_sum + 5 * p);
    }
  }
}

// A rank waiting in a shared-memory collective keeps MPI progressing: here rank 0's blocking
// MPI_Send (a rendezvous) completes only through rank 1's progress engine, while rank 1 waits
// in the broadcast for rank 0's data. Without progress in that wait the two ranks wait for
// each other for ever (collx-bench at np=4 hung this way in 1 of 36 runs).
TEST_F(MpiCollectives, SharedMemoryWaitKeepsMpiProgressing) {
  if (p < 2) GTEST_SKIP() << "needs two ranks";
  const std::size_t big = std::size_t{16} << 20;
  std::vector<std::byte> message(big, std::byte{me == 0 ? std::uint8_t{0x3c} : std::uint8_t{0}});
  std::vector<std::int32_t> buf(1000, me == 0 ? 9 : 0);
  MPI_Request pending = MPI_REQUEST_NULL;
  if (me == 1) {
    MPI_Irecv(message.data(), static_cast<int>(big), MPI_BYTE, 0, 77, MPI_COMM_WORLD, &pending);
  }
  if (me == 0) MPI_Send(message.data(), static_cast<int>(big), MPI_BYTE, 1, 77, MPI_COMM_WORLD);
  comm.broadcast(buf.data(), buf.size(), DataType::int32, 0, with(Algorithm::shared_memory));
  MPI_Wait(&pending, MPI_STATUS_IGNORE);
  EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](std::int32_t v) { return v == 9; }));
  if (me == 1) {
    EXPECT_EQ(message[big - 1], std::byte{0x3c});
  }
}

TEST_F(MpiCollectives, SubCommunicatorsBesideTheirParent) {
  // Odd and even ranks apart, keyed in reverse order.
  auto half = comm.split(me % 2, -me);
  ASSERT_TRUE(half.has_value());
  std::vector<int> members;
  for (int r = me % 2; r < p; r += 2)
    members.push_back(r);
  ASSERT_EQ(half->size(), static_cast<int>(members.size()));
  EXPECT_EQ(half->rank(), static_cast<int>(members.size()) - 1 - me / 2) << "key orders the ranks";
  // A collective on the sub-communicator and one on the parent, in flight together.
  std::vector<std::int64_t> sub(1000, me), parent(1000, 1);
  auto r1 = half->iallreduce(sub.data(), sub.data(), sub.size(), DataType::int64, ReduceOp::sum);
  auto r2 =
      comm.iallreduce(parent.data(), parent.data(), parent.size(), DataType::int64, ReduceOp::sum);
  r2.wait();
  r1.wait();
  const std::int64_t sub_sum = std::accumulate(members.begin(), members.end(), std::int64_t{0});
  for (auto v : sub)
    ASSERT_EQ(v, sub_sum);
  for (auto v : parent)
    ASSERT_EQ(v, p);
  // Leaving a rank out.
  auto only_zero = comm.split(me == 0 ? 1 : -1, 0);
  EXPECT_EQ(only_zero.has_value(), me == 0);
  // A group of the first ceil(p/2) ranks, listed backwards.
  std::vector<int> group;
  for (int r = (p + 1) / 2 - 1; r >= 0; --r)
    group.push_back(r);
  if (me < (p + 1) / 2) {
    collx::Communicator g = comm.create_group(group);
    EXPECT_EQ(g.size(), static_cast<int>(group.size()));
    EXPECT_EQ(g.rank(), static_cast<int>(group.size()) - 1 - me);
    std::int32_t v = me;
    g.broadcast(&v, 1, DataType::int32, 0);  // group rank 0 is world rank (p+1)/2 - 1
    EXPECT_EQ(v, (p + 1) / 2 - 1);
    EXPECT_THROW(g.broadcast(&v, 1, DataType::int32, g.size()), collx::Error);
  } else {
    EXPECT_THROW(comm.create_group(group), collx::Error);  // not listed: rejected locally
  }
  // A rank listed twice: an error on every rank that calls, listed or not, and nobody waits.
  const std::vector<int> twice{0, 0};
  try {
    (void)comm.create_group(twice);
    ADD_FAILURE() << "create_group({0, 0}) accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("listed twice"), std::string::npos) << e.what();
  }
  comm.barrier();
}

TEST_F(MpiCollectives, PointToPoint) {
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  // A ring shift with sendrecv, and the same with isend/irecv completing in either order.
  std::vector<double> out(10, me), in(10, -1);
  comm.sendrecv(out.data(), out.size(), next, in.data(), in.size(), prev, DataType::float64, 5);
  for (double v : in)
    ASSERT_EQ(v, prev);
  std::vector<float> a(100, 1.0f * me), b(100, -1.0f);
  auto rr = comm.irecv(b.data(), b.size(), DataType::float32, prev, 9);
  auto rs = comm.isend(a.data(), a.size(), DataType::float32, next, 9);
  rr.wait();
  rs.wait();
  for (float v : b)
    ASSERT_EQ(v, static_cast<float>(prev));
  // A receive longer than the message, and a zero-byte message, still match.
  if (p > 1) {
    if (me == 0) {
      const std::int32_t three[3] = {1, 2, 3};
      comm.send(three, 3, DataType::int32, 1, 77);
      comm.send(nullptr, 0, DataType::int32, 1, 78);
    } else if (me == 1) {
      std::int32_t buf[8] = {};
      comm.recv(buf, 8, DataType::int32, 0, 77);
      EXPECT_EQ(buf[2], 3);
      comm.recv(buf, 8, DataType::int32, 0, 78);
    }
  }
  // Point-to-point never matches a collective's messages: interleave them.
  std::int32_t token = me;
  auto pending = comm.irecv(&token, 1, DataType::int32, prev, 0);
  std::int32_t x = 1;
  comm.allreduce(collx::in_place, &x, 1, DataType::int32, ReduceOp::sum);
  comm.send(&me, 1, DataType::int32, next, 0);
  pending.wait();
  EXPECT_EQ(token, prev);
  EXPECT_EQ(x, p);
  EXPECT_THROW(comm.send(&me, 1, DataType::int32, p, 0), collx::Error);
  EXPECT_THROW(comm.send(&me, 1, DataType::int32, next, collx::Communicator::kMaxTag + 1),
               collx::Error);
}

TEST_F(MpiCollectives, RootedArgumentsAreChecked) {
  std::int32_t v = 0;
  for (int bad : {-1, p}) {
    EXPECT_THROW(comm.broadcast(&v, 1, DataType::int32, bad), collx::Error);
    EXPECT_THROW(comm.reduce(&v, &v, 1, DataType::int32, ReduceOp::sum, bad), collx::Error);
    EXPECT_THROW(comm.gather(&v, &v, 1, DataType::int32, bad), collx::Error);
  }
  EXPECT_THROW(comm.reduce(&v, &v, 1, DataType::int32, ReduceOp::avg, 0), collx::Error);
  std::vector<std::size_t> wrong_length(p + 1, 1);
  EXPECT_THROW(comm.reduce_scatter_v(&v, &v, wrong_length, DataType::int32, ReduceOp::sum),
               collx::Error);
  collx::Options o;
  o.algorithm = Algorithm::ring;
  EXPECT_THROW(comm.broadcast(&v, 1, DataType::int32, 0, o), collx::Error);  // no ring broadcast
  comm.barrier();
}

// Small blocking broadcasts, reduces, allgathers and barriers run straight through the
// transport (or the shared arena's counters) when nothing else is in flight, and as operations
// otherwise; ranks that take different paths in the same call must still match and agree on
// the result bits.
// Zero-count calls move nothing: each rank's is complete at once, before the other ranks have
// made theirs (they wait in a barrier rank 0 reaches only afterwards), and the calls after them
// still match.
TEST_F(MpiCollectives, ZeroCountCallsCompleteAtOnce) {
  const int p = comm.size();
  const int root = p - 1;
  std::vector<float> buffer(4, 1.0f), other(4 * static_cast<std::size_t>(p), 2.0f);
  const std::vector<std::size_t> zeros(static_cast<std::size_t>(p), 0);
  auto zero_calls = [&] {
    std::vector<collx::Request> requests;
    requests.push_back(
        comm.iallreduce(buffer.data(), other.data(), 0, DataType::float32, ReduceOp::sum));
    requests.push_back(comm.ibroadcast(buffer.data(), 0, DataType::float32, root));
    requests.push_back(
        comm.ireduce(buffer.data(), other.data(), 0, DataType::float32, ReduceOp::sum, root));
    requests.push_back(comm.iallgather(buffer.data(), other.data(), 0, DataType::float32));
    requests.push_back(
        comm.ireduce_scatter(other.data(), buffer.data(), 0, DataType::float32, ReduceOp::sum));
    requests.push_back(comm.ireduce_scatter_v(other.data(), buffer.data(), zeros, DataType::float32,
                                              ReduceOp::avg));
    requests.push_back(comm.igather(buffer.data(), other.data(), 0, DataType::float32, root));
    requests.push_back(comm.iscatter(other.data(), buffer.data(), 0, DataType::float32, root));
    requests.push_back(comm.ialltoall(other.data(), buffer.data(), 0, DataType::float32));
    return requests;
  };
  // The blocking calls of nothing return at once too (the public entry's own shortcut).
  auto blocking_zero_calls = [&] {
    comm.allreduce(buffer.data(), other.data(), 0, DataType::float32, ReduceOp::sum);
    comm.broadcast(buffer.data(), 0, DataType::float32, root);
    comm.reduce(buffer.data(), other.data(), 0, DataType::float32, ReduceOp::sum, root);
    comm.allgather(buffer.data(), other.data(), 0, DataType::float32);
    comm.reduce_scatter(other.data(), buffer.data(), 0, DataType::float32, ReduceOp::sum);
    comm.gather(buffer.data(), other.data(), 0, DataType::float32, root);
    comm.scatter(other.data(), buffer.data(), 0, DataType::float32, root);
    comm.alltoall(other.data(), buffer.data(), 0, DataType::float32);
  };
  if (comm.rank() == 0) {
    std::vector<collx::Request> requests = zero_calls();
    for (collx::Request& r : requests)
      EXPECT_TRUE(r.test());
    blocking_zero_calls();
    comm.barrier();
    for (collx::Request& r : requests)
      r.wait();
  } else {
    comm.barrier();
    for (collx::Request& r : zero_calls())
      r.wait();
    blocking_zero_calls();
  }
  EXPECT_EQ(buffer, std::vector<float>(4, 1.0f));
  EXPECT_EQ(other, std::vector<float>(4 * static_cast<std::size_t>(p), 2.0f));
  std::vector<float> sum(1, static_cast<float>(comm.rank()));
  comm.allreduce(sum.data(), sum.data(), 1, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(sum[0], static_cast<float>(p * (p - 1) / 2));
}

// A blocking broadcast, reduce or gather of one ring slot (a rank) runs at once, without an
// operation, where its wait ends within a spin (broadcast_shared_memory_at_once and the like);
// else as an operation, on the same slots and counters. Mixed here: behind a nonblocking broadcast
// still in flight on the same communicator (it must wait its turn, and the slot after); the readers
// late by 2 ms where the root has run ahead of them past its ring's room; the root late by 2 ms,
// the readers' spins over before its slot arrives.
TEST_F(MpiCollectives, SmallRootedCallsAtOnceAndAsOperationsMix) {
  const collx::Options shm = with(Algorithm::shared_memory);
  const auto late = [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); };
  for (int round = 0; round < 4; ++round) {
    const int root = round % p;
    const std::size_t count = round % 2 == 0 ? 2 : 300;  // in the descriptor line, or not
    // The second from the same root (its ring's next slot) or from the next rank.
    const int second_root = round % 2 == 0 ? root : (root + 1) % p;
    std::vector<std::int32_t> first(count, me == root ? 10 + round : -1);
    std::vector<std::int32_t> second(count, me == second_root ? 20 + round : -1);
    collx::Request pending = comm.ibroadcast(first.data(), count, DataType::int32, root, shm);
    comm.broadcast(second.data(), count, DataType::int32, second_root, shm);
    pending.wait();
    ASSERT_TRUE(all_ranks(first == std::vector<std::int32_t>(count, 10 + round) &&
                          second == std::vector<std::int32_t>(count, 20 + round)))
        << "behind a nonblocking broadcast, round " << round;
    // Ten broadcasts from one root in a row, more than its ring's slots.
    std::vector<std::vector<std::int32_t>> row(10);
    for (int k = 0; k < 10; ++k) {
      if ((me == root) == (round < 2) && k == 0) late();
      row[k].assign(count, me == root ? 100 * round + k : -1);
      comm.broadcast(row[k].data(), count, DataType::int32, root, shm);
    }
    bool right = true;
    for (int k = 0; k < 10; ++k)
      right = right && row[k] == std::vector<std::int32_t>(count, 100 * round + k);
    ASSERT_TRUE(all_ranks(right)) << (round < 2 ? "root late" : "readers late") << ", round "
                                  << round;
    // Reduces the same way: behind a nonblocking one, then ten in a row (int64 sums, exact).
    std::vector<std::int64_t> in(count, me + 1), twice(count, 2 * (me + 1));
    std::vector<std::int64_t> pending_sum(count, -1), sum(count, -1);
    const std::int64_t total = static_cast<std::int64_t>(p) * (p + 1) / 2;
    collx::Request pending_reduce = comm.ireduce(in.data(), pending_sum.data(), count,
                                                 DataType::int64, ReduceOp::sum, root, shm);
    comm.reduce(twice.data(), sum.data(), count, DataType::int64, ReduceOp::sum, second_root, shm);
    pending_reduce.wait();
    ASSERT_TRUE(
        all_ranks((me != root || pending_sum == std::vector<std::int64_t>(count, total)) &&
                  (me != second_root || sum == std::vector<std::int64_t>(count, 2 * total))))
        << "reduce behind a nonblocking reduce, round " << round;
    right = true;
    for (int k = 0; k < 10; ++k) {
      if ((me == root) == (round < 2) && k == 0) late();
      std::vector<std::int64_t> mine(count, (me + 1) * (k + 1)), out(count, -1);
      comm.reduce(mine.data(), out.data(), count, DataType::int64, ReduceOp::sum, root, shm);
      right = right && (me != root || out == std::vector<std::int64_t>(count, total * (k + 1)));
    }
    ASSERT_TRUE(all_ranks(right)) << "reduces, " << (round < 2 ? "root late" : "others late")
                                  << ", round " << round;
    // Gathers the same way.
    const auto gathered = [&](int tag) {
      std::vector<std::int32_t> all;
      for (int r = 0; r < p; ++r)
        all.insert(all.end(), count, 1000 * tag + r);
      return all;
    };
    std::vector<std::int32_t> own(count, 1000 * round + me),
        twice_own(count, 1000 * (round + 50) + me);
    std::vector<std::int32_t> pending_all(count * p, -1), all(count * p, -1);
    collx::Request pending_gather =
        comm.igather(own.data(), pending_all.data(), count, DataType::int32, root, shm);
    comm.gather(twice_own.data(), all.data(), count, DataType::int32, second_root, shm);
    pending_gather.wait();
    ASSERT_TRUE(all_ranks((me != root || pending_all == gathered(round)) &&
                          (me != second_root || all == gathered(round + 50))))
        << "gather behind a nonblocking gather, round " << round;
    right = true;
    for (int k = 0; k < 10; ++k) {
      if ((me == root) == (round < 2) && k == 0) late();
      std::vector<std::int32_t> mine(count, 1000 * (round + k) + me), out(count * p, -1);
      comm.gather(mine.data(), out.data(), count, DataType::int32, root, shm);
      right = right && (me != root || out == gathered(round + k));
    }
    ASSERT_TRUE(all_ranks(right)) << "gathers, " << (round < 2 ? "root late" : "others late")
                                  << ", round " << round;
    // Scatters the same way (the root's full buffer is what gathered(tag) gathers).
    std::vector<std::int32_t> pending_block(count, -1), block(count, -1);
    const std::vector<std::int32_t> to_scatter = gathered(round),
                                    twice_scattered = gathered(round + 50);
    collx::Request pending_scatter =
        comm.iscatter(me == root ? to_scatter.data() : nullptr, pending_block.data(), count,
                      DataType::int32, root, shm);
    comm.scatter(me == second_root ? twice_scattered.data() : nullptr, block.data(), count,
                 DataType::int32, second_root, shm);
    pending_scatter.wait();
    ASSERT_TRUE(all_ranks(pending_block == std::vector<std::int32_t>(count, 1000 * round + me) &&
                          block == std::vector<std::int32_t>(count, 1000 * (round + 50) + me)))
        << "scatter behind a nonblocking scatter, round " << round;
    right = true;
    for (int k = 0; k < 10; ++k) {
      if ((me == root) == (round < 2) && k == 0) late();
      const std::vector<std::int32_t> full = gathered(round + k);
      std::vector<std::int32_t> mine(count, -1);
      comm.scatter(me == root ? full.data() : nullptr, mine.data(), count, DataType::int32, root,
                   shm);
      right = right && mine == std::vector<std::int32_t>(count, 1000 * (round + k) + me);
    }
    ASSERT_TRUE(all_ranks(right)) << "scatters, " << (round < 2 ? "root late" : "others late")
                                  << ", round " << round;
  }
}

TEST_F(MpiCollectives, LatencyAndOperationPathsInteroperate) {
  collx::Communicator other(MPI_COMM_WORLD);
  const int p = comm.size();
  const bool early = comm.rank() % 2 == 0;
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{256}}) {
    for (int root : roots(p)) {
      std::vector<double> pending(5000, 1.0);
      collx::Request request;
      if (early)
        request = other.iallreduce(pending.data(), pending.data(), pending.size(),
                                   DataType::float64, ReduceOp::sum);
      for (Algorithm a :
           {Algorithm::binomial_tree, Algorithm::pipelined_chain, Algorithm::shared_memory}) {
        std::vector<std::int32_t> b(count, comm.rank() == root ? 17 + root : -1);
        comm.broadcast(b.data(), count, DataType::int32, root, with(a));
        for (std::int32_t v : b)
          ASSERT_EQ(v, 17 + root) << to_string(a);
      }
      // float avg (the root's last combine divides) and int64 sum, to any root; the arena's
      // reduce combines in another order than the tree at 3+ ranks, so its own result.
      std::vector<float> mine(count);
      for (std::size_t i = 0; i < count; ++i)
        mine[i] = 0.1f * static_cast<float>(comm.rank() + 1) + static_cast<float>(i);
      std::vector<float> reduced(count, -1.0f), reduced_shm(count, -1.0f);
      comm.reduce(mine.data(), reduced.data(), count, DataType::float32, ReduceOp::avg, root,
                  with(Algorithm::binomial_tree));
      comm.reduce(mine.data(), reduced_shm.data(), count, DataType::float32, ReduceOp::avg, root,
                  with(Algorithm::shared_memory));
      std::vector<std::int64_t> ints(count, comm.rank() + 1), sum(count, 0), sum_shm(count, 0);
      comm.reduce(ints.data(), sum.data(), count, DataType::int64, ReduceOp::sum, root,
                  with(Algorithm::binomial_tree));
      comm.reduce(ints.data(), sum_shm.data(), count, DataType::int64, ReduceOp::sum, root,
                  with(Algorithm::shared_memory));
      // Allreduce and reduce_scatter through the arena (the piece protocol's one round).
      std::vector<std::int64_t> everywhere(count, 0);
      comm.allreduce(ints.data(), everywhere.data(), count, DataType::int64, ReduceOp::sum,
                     with(Algorithm::shared_memory));
      for (std::int64_t v : everywhere)
        ASSERT_EQ(v, static_cast<std::int64_t>(p) * (p + 1) / 2);
      std::vector<std::int64_t> blocks(count * static_cast<std::size_t>(p)), block(count, 0);
      for (std::size_t i = 0; i < blocks.size(); ++i)
        blocks[i] = static_cast<std::int64_t>(i) + comm.rank();
      comm.reduce_scatter(blocks.data(), block.data(), count, DataType::int64, ReduceOp::sum,
                          with(Algorithm::shared_memory));
      for (std::size_t i = 0; i < count; ++i) {
        const auto at =
            static_cast<std::int64_t>(static_cast<std::size_t>(comm.rank()) * count + i);
        ASSERT_EQ(block[i], at * p + static_cast<std::int64_t>(p) * (p - 1) / 2);
      }
      // Gather and scatter through the arena and as messages.
      for (Algorithm a : {Algorithm::linear, Algorithm::shared_memory}) {
        std::vector<std::int32_t> own(count), all(count * static_cast<std::size_t>(p), -1);
        for (std::size_t i = 0; i < count; ++i)
          own[i] = comm.rank() * 1000 + static_cast<std::int32_t>(i);
        comm.gather(own.data(), all.data(), count, DataType::int32, root, with(a));
        if (comm.rank() == root) {
          for (int r = 0; r < p; ++r)
            for (std::size_t i = 0; i < count; ++i)
              ASSERT_EQ(all[static_cast<std::size_t>(r) * count + i],
                        r * 1000 + static_cast<std::int32_t>(i))
                  << to_string(a);
        }
        std::vector<std::int32_t> mine_back(count, -1);
        comm.scatter(all.data(), mine_back.data(), count, DataType::int32, root, with(a));
        if (comm.rank() == root) {
          for (std::size_t i = 0; i < count; ++i)
            ASSERT_EQ(mine_back[i], root * 1000 + static_cast<std::int32_t>(i)) << to_string(a);
        }
        // Scatter back what the root gathered: every rank gets its own block.
        std::vector<std::int32_t> full(count * static_cast<std::size_t>(p));
        for (std::size_t i = 0; i < full.size(); ++i)
          full[i] = static_cast<std::int32_t>(i) + 7 * root;
        comm.scatter(full.data(), mine_back.data(), count, DataType::int32, root, with(a));
        for (std::size_t i = 0; i < count; ++i)
          ASSERT_EQ(mine_back[i],
                    static_cast<std::int32_t>(static_cast<std::size_t>(comm.rank()) * count + i) +
                        7 * root)
              << to_string(a);
      }
      // Allgather: every rank's block.
      for (Algorithm a :
           {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::shared_memory}) {
        std::vector<std::int32_t> own(count), all(count * static_cast<std::size_t>(p), -1);
        for (std::size_t i = 0; i < count; ++i)
          own[i] = comm.rank() * 1000 + static_cast<std::int32_t>(i) + root;
        comm.allgather(own.data(), all.data(), count, DataType::int32, with(a));
        for (int r = 0; r < p; ++r)
          for (std::size_t i = 0; i < count; ++i)
            ASSERT_EQ(all[static_cast<std::size_t>(r) * count + i],
                      r * 1000 + static_cast<std::int32_t>(i) + root)
                << to_string(a);
      }
      // Alltoall, pairwise and Bruck.
      for (Algorithm a : {Algorithm::pairwise, Algorithm::bruck}) {
        std::vector<std::int32_t> out(count * static_cast<std::size_t>(p)), in(out.size(), -1);
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = comm.rank() * 100000 + static_cast<std::int32_t>(i);
        comm.alltoall(out.data(), in.data(), count, DataType::int32, with(a));
        for (int r = 0; r < p; ++r)
          for (std::size_t i = 0; i < count; ++i)
            ASSERT_EQ(in[static_cast<std::size_t>(r) * count + i],
                      r * 100000 + static_cast<std::int32_t>(
                                       static_cast<std::size_t>(comm.rank()) * count + i))
                << to_string(a);
      }
      comm.barrier();
      if (!early)
        request = other.iallreduce(pending.data(), pending.data(), pending.size(),
                                   DataType::float64, ReduceOp::sum);
      request.wait();
      if (comm.rank() == root) {
        for (std::size_t i = 0; i < count; ++i) {
          ASSERT_EQ(sum[i], static_cast<std::int64_t>(p) * (p + 1) / 2);
          ASSERT_EQ(sum_shm[i], sum[i]);
          double expected = 0;
          for (int r = 0; r < p; ++r)
            expected += 0.1 * (r + 1) + static_cast<double>(i);
          ASSERT_NEAR(reduced[i], expected / p, 1e-4 * (1.0 + expected / p));
          ASSERT_NEAR(reduced_shm[i], expected / p, 1e-4 * (1.0 + expected / p));
        }
      }
      for (double v : pending)
        ASSERT_EQ(v, static_cast<double>(p));
    }
  }
}

}  // namespace
