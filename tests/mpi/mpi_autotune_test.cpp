// auto's trials on real ranks (COLLX_AUTOTUNE, policy/autotune.hpp): every call during and after
// the trials gives the exact result; every rank ends with the same choice and the same learned
// line (the times are agreed, not local); nonblocking calls interleaved with the trials neither
// hang nor count; COLLX_AUTOTUNE=0 leaves the table alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "config_override.hpp"
#include "mpi_test_util.hpp"
#include "registry.hpp"
#include "selector.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using collx::testing::all_ranks;
using collx::testing::identical_on_all_ranks;

using collx::testing::ConfigOverride;

collx::detail::Config with_autotune(collx::detail::AutotuneMode mode) {
  collx::detail::Config c = collx::detail::config();
  c.autotune = mode;
  return c;
}
constexpr auto kExact = collx::detail::AutotuneMode::exact;

// The learned lines, joined, identical on every rank.
bool learned_identical(const collx::Communicator& comm) {
  std::string all;
  for (const auto& line : comm.learned_choices())
    all += line + "\n";
  std::uint64_t length = all.size();
  if (!identical_on_all_ranks(&length, sizeof length)) return false;
  return identical_on_all_ranks(all.data(), all.size());
}

// Blocking allreduces of `count` int32 until the size class settles (bounded), every result
// checked; an iallreduce between every two of them. Returns the calls made.
int allreduce_until_settled(collx::Communicator& comm, std::size_t count) {
  const int p = comm.size();
  const int r = comm.rank();
  std::vector<std::int32_t> v(count), w(count);
  int calls = 0;
  bool trying = true;
  for (; calls < 1000; ++calls) {
    (void)comm.auto_choice(Collective::allreduce, count * sizeof(std::int32_t), DataType::int32,
                           ReduceOp::sum, &trying);
    if (!trying) break;
    for (std::size_t i = 0; i < count; ++i)
      v[i] = static_cast<std::int32_t>((i % 97) + static_cast<std::size_t>(r) + calls);
    comm.allreduce(collx::in_place, v.data(), count, DataType::int32, ReduceOp::sum);
    // Not timed, not counted: runs the table's (or the settled) choice.
    std::fill(w.begin(), w.end(), r + 1);
    collx::Request req = comm.iallreduce(w.data(), w.data(), count, DataType::int32, ReduceOp::sum);
    req.wait();
    for (std::size_t i = 0; i < count; ++i) {
      const std::int64_t want =
          static_cast<std::int64_t>(p) * static_cast<std::int64_t>((i % 97) + calls) +
          static_cast<std::int64_t>(p) * (p - 1) / 2;
      if (v[i] != want) {
        ADD_FAILURE() << "call " << calls << " element " << i << ": " << v[i] << " != " << want;
        return calls;
      }
      if (w[i] != p * (p + 1) / 2) {
        ADD_FAILURE() << "iallreduce element " << i;
        return calls;
      }
    }
  }
  return calls;
}

TEST(MpiAutotune, EveryRankSettlesOnTheSameChoiceAndEveryResultIsExact) {
  const ConfigOverride guard(with_autotune(kExact));
  collx::Communicator comm(MPI_COMM_WORLD);
  std::size_t tried_classes = 0;
  for (std::size_t count :
       {std::size_t{3}, std::size_t{1000}, std::size_t{40000}, std::size_t{300000}}) {
    const int calls = allreduce_until_settled(comm, count);
    if (calls > 1) ++tried_classes;
    const std::size_t bytes = count * sizeof(std::int32_t);
    bool trying = true;
    const Algorithm chosen =
        comm.auto_choice(Collective::allreduce, bytes, DataType::int32, ReduceOp::sum, &trying);
    EXPECT_FALSE(trying) << count << " elements: still trying after " << calls << " calls";
    const int chosen_int = static_cast<int>(chosen);
    EXPECT_TRUE(identical_on_all_ranks(&chosen_int, sizeof chosen_int)) << count;
    if (comm.size() == 1) {
      EXPECT_EQ(calls, 0) << "one rank has nothing to try";
    } else if (bytes <= collx::detail::CommState::kLongCallBytes) {
      EXPECT_GT(calls, 1) << count << " elements: no trials";
    }
    // Above kLongCallBytes a class leaves out the candidates its smaller classes timed slow
    // (weigh_by_smaller_classes); on a loaded machine that can leave one, which settles untried.
  }
  EXPECT_TRUE(learned_identical(comm));
  if (comm.size() > 1) {
    EXPECT_GE(tried_classes, 2u);
    EXPECT_EQ(comm.learned_choices().size(), tried_classes);
  } else {
    EXPECT_TRUE(comm.learned_choices().empty());
  }
}

// Calls of one size class share the class's trials: sizes inside the class (here 4097..8192
// bytes) keep the same choice, and the other collectives tune apart from allreduce.
TEST(MpiAutotune, OtherCollectivesTuneAndStayExact) {
  const ConfigOverride guard(with_autotune(kExact));
  collx::Communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const int r = comm.rank();
  for (int call = 0; call < 80; ++call) {
    const std::size_t count = 1100 + static_cast<std::size_t>(call % 7) * 100;  // 4.4-6.8 KB
    // broadcast from a moving root
    const int root = call % p;
    std::vector<std::int32_t> b(count, r == root ? call : -1);
    comm.broadcast(b.data(), count, DataType::int32, root);
    ASSERT_TRUE(all_ranks(std::all_of(b.begin(), b.end(), [&](int x) { return x == call; })))
        << "broadcast call " << call;
    // allgather of rank-valued blocks (small blocks: p x block bytes in total)
    const std::size_t block = 64;
    std::vector<std::int32_t> mine(block, r * 1000 + call),
        all(block * static_cast<std::size_t>(p));
    comm.allgather(mine.data(), all.data(), block, DataType::int32);
    bool ok = true;
    for (int q = 0; q < p; ++q)
      for (std::size_t i = 0; i < block; ++i)
        ok = ok && all[static_cast<std::size_t>(q) * block + i] == q * 1000 + call;
    ASSERT_TRUE(all_ranks(ok)) << "allgather call " << call;
    // reduce_scatter: every rank's block reduced
    std::vector<std::int32_t> send(block * static_cast<std::size_t>(p)), recv(block);
    std::iota(send.begin(), send.end(), call);
    comm.reduce_scatter(send.data(), recv.data(), block, DataType::int32, ReduceOp::sum);
    ok = true;
    for (std::size_t i = 0; i < block; ++i)
      ok = ok && recv[i] == p * (call + static_cast<int>(static_cast<std::size_t>(r) * block + i));
    ASSERT_TRUE(all_ranks(ok)) << "reduce_scatter call " << call;
  }
  for (Collective c : {Collective::broadcast, Collective::allgather, Collective::reduce_scatter}) {
    const std::size_t bytes =
        c == Collective::broadcast ? 6000 : 64 * 4 * static_cast<std::size_t>(p);
    bool trying = true;
    const int chosen =
        static_cast<int>(comm.auto_choice(c, bytes, DataType::int32, ReduceOp::sum, &trying));
    EXPECT_TRUE(identical_on_all_ranks(&chosen, sizeof chosen));
    const int trying_int = trying ? 1 : 0;
    EXPECT_TRUE(identical_on_all_ranks(&trying_int, sizeof trying_int));
  }
  EXPECT_TRUE(learned_identical(comm));
}

TEST(MpiAutotune, OffLeavesTheTableAlone) {
  const ConfigOverride guard(with_autotune(collx::detail::AutotuneMode::off));
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<float> v(1000, 1.0f);
  for (int i = 0; i < 50; ++i)
    comm.allreduce(collx::in_place, v.data(), v.size(), DataType::float32, ReduceOp::max);
  EXPECT_TRUE(comm.learned_choices().empty());
  bool trying = true;
  const Algorithm a =
      comm.auto_choice(Collective::allreduce, 4000, DataType::float32, ReduceOp::max, &trying);
  EXPECT_FALSE(trying);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  EXPECT_EQ(a, collx::detail::resolve_algorithm(Collective::allreduce, Algorithm::automatic, 4000,
                                                comm.size(), comm.rank(), comm.shared_memory(),
                                                s.node_shape()));
}

// A floating-point sum's bits depend on the algorithm from three ranks on: there, under
// COLLX_AUTOTUNE=1 it keeps the table's choice (a run's results do not depend on which
// algorithm won its trials); under COLLX_AUTOTUNE=all it is tried like the rest, and every rank
// still gets the same bits. At two ranks every algorithm adds the two values once, in the same
// order (the simulated-rank suite's SimTwoRanks checks the bits), so the default tries them.
TEST(MpiAutotune, FloatingSumsAreTriedOnlyUnderAllFromThreeRanks) {
  const std::size_t count = 3000;
  const std::size_t bytes = count * sizeof(float);
  std::vector<float> v(count);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // Values whose float sum depends on the order of addition.
  auto fill = [&](int call) {
    for (std::size_t i = 0; i < count; ++i)
      v[i] = 0.1f * static_cast<float>(i % 13) +
             0.01f * static_cast<float>(call + 1) / static_cast<float>(1 + rank);
  };
  {
    const ConfigOverride guard(with_autotune(kExact));
    collx::Communicator comm(MPI_COMM_WORLD);
    bool trying = true;
    for (int call = 0; call < 100; ++call) {
      (void)comm.auto_choice(Collective::allreduce, bytes, DataType::float32, ReduceOp::sum,
                             &trying);
      if (!trying) break;
      fill(call);
      comm.allreduce(collx::in_place, v.data(), count, DataType::float32, ReduceOp::sum);
    }
    collx::detail::CommState& s = collx::detail::state_of(comm);
    const Algorithm chosen =
        comm.auto_choice(Collective::allreduce, bytes, DataType::float32, ReduceOp::sum, &trying);
    EXPECT_FALSE(trying);
    if (comm.size() > 2) {
      EXPECT_TRUE(comm.learned_choices().empty());
      EXPECT_EQ(chosen, collx::detail::resolve_algorithm(
                            Collective::allreduce, Algorithm::automatic, bytes, comm.size(),
                            comm.rank(), comm.shared_memory(), s.node_shape()));
    } else {
      EXPECT_EQ(comm.learned_choices().size(), comm.size() == 2 ? 1u : 0u);
      EXPECT_TRUE(learned_identical(comm));
    }
  }
  {
    const ConfigOverride guard(with_autotune(collx::detail::AutotuneMode::all));
    collx::Communicator comm(MPI_COMM_WORLD);
    bool trying = true;
    int call = 0;
    for (; call < 100; ++call) {
      (void)comm.auto_choice(Collective::allreduce, bytes, DataType::float32, ReduceOp::sum,
                             &trying);
      if (!trying) break;
      fill(call);
      comm.allreduce(collx::in_place, v.data(), count, DataType::float32, ReduceOp::sum);
      ASSERT_TRUE(identical_on_all_ranks(v.data(), bytes)) << "call " << call;
    }
    EXPECT_FALSE(trying);
    EXPECT_EQ(comm.learned_choices().size(), comm.size() > 1 ? 1u : 0u);
    EXPECT_TRUE(learned_identical(comm));
  }
}

// From three ranks a floating-point sum's class tries no other algorithm under COLLX_AUTOTUNE=1,
// but its table's choice with one segment as long as the class's calls beside the default
// segments, where the row's bits do not depend on its segments (AlgorithmRow::segments_keep_bits,
// CommState::segment_tuner_for): every call of the class, during the trials and after them,
// blocking or not, gives the first call's bits, and the learned line names the segment sizes.
// Without the arena the table takes the ring or Rabenseifner there, both such rows.
TEST(MpiAutotune, FloatingSumsTrySegmentSizesWithTheSameBits) {
  collx::detail::Config c = with_autotune(kExact);
  c.shared_memory = false;
  const ConfigOverride guard(c);
  collx::Communicator comm(MPI_COMM_WORLD);
  const std::size_t count = std::size_t{1} << 20;  // 4 MiB: two default segments and more
  const std::size_t bytes = count * sizeof(float);
  std::vector<float> input(count), v(count), first;
  for (std::size_t i = 0; i < count; ++i) {
    input[i] = 0.1f * static_cast<float>(i % 13) +
               0.01f * static_cast<float>(i % 7 + 1) / static_cast<float>(1 + comm.rank());
  }
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const Algorithm table =
      collx::detail::resolve_algorithm(Collective::allreduce, Algorithm::automatic, bytes,
                                       comm.size(), comm.rank(), false, s.node_shape());
  const collx::detail::AlgorithmRow* row = collx::detail::find_row(Collective::allreduce, table);
  ASSERT_NE(row, nullptr);
  bool trying = true;
  int call = 0;
  for (; call < 200 && (trying || call < 2); ++call) {
    (void)comm.auto_choice(Collective::allreduce, bytes, DataType::float32, ReduceOp::sum, &trying);
    comm.allreduce(input.data(), v.data(), count, DataType::float32, ReduceOp::sum);
    if (call == 0) first = v;
    ASSERT_EQ(v, first) << "call " << call;
    ASSERT_TRUE(identical_on_all_ranks(v.data(), bytes)) << "call " << call;
  }
  EXPECT_FALSE(trying);
  collx::Request req =
      comm.iallreduce(input.data(), v.data(), count, DataType::float32, ReduceOp::sum);
  req.wait();
  EXPECT_EQ(v, first);
  EXPECT_TRUE(learned_identical(comm));
  // At two ranks every algorithm adds the two values once (the general trials ran).
  if (comm.size() > 2) {
    EXPECT_EQ(
        comm.auto_choice(Collective::allreduce, bytes, DataType::float32, ReduceOp::sum, &trying),
        table);
    EXPECT_TRUE(row->segments_keep_bits) << collx::to_string(table);
    ASSERT_EQ(comm.learned_choices().size(), 1u);
    EXPECT_NE(comm.learned_choices()[0].find("(segments of 4194304 B)"), std::string::npos)
        << comm.learned_choices()[0];
  }
}

// COLLX_ALGO decides alone: no trials under it.
TEST(MpiAutotune, ForcedAlgorithmIsNotTried) {
  collx::detail::Config c = with_autotune(kExact);
  c.algorithm[static_cast<int>(Collective::allreduce)] = Algorithm::ring;
  const ConfigOverride guard(c);
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<double> v(100, 1.0);
  for (int i = 0; i < 40; ++i)
    comm.allreduce(collx::in_place, v.data(), v.size(), DataType::float64, ReduceOp::max);
  EXPECT_TRUE(comm.learned_choices().empty());
  EXPECT_EQ(comm.auto_choice(Collective::allreduce, 800, DataType::float64, ReduceOp::max),
            Algorithm::ring);
}

}  // namespace
