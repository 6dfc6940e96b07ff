// Algorithm::mpi, the MPI library's own collectives as one of collx's rows (coll/mpi_library.cpp):
// every collective, blocking and nonblocking, in place and not, gives the same bits as collx's
// own algorithm on the same integer data; a call the MPI library cannot take (avg) is refused
// when asked for by name; and auto's trials take the MPI library's collective as a candidate.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "autotune.hpp"
#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "config_override.hpp"
#include "mpi_test_util.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;

const collx::Options kMpi{Algorithm::mpi};

std::vector<std::int32_t> values(int rank, std::size_t count, int salt) {
  std::vector<std::int32_t> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] =
        static_cast<std::int32_t>((rank + 1) * 131 + static_cast<int>(i) * 7 + salt) % 1000 - 500;
  return v;
}

class MpiLibrary : public ::testing::TestWithParam<bool> {
 protected:
  bool blocking() const { return GetParam(); }
  collx::Communicator comm{MPI_COMM_WORLD};
  int p = comm.size();
  int r = comm.rank();
  // Runs `call(options)` blocking or not, as the test's parameter says.
  template <class Blocking, class Nonblocking>
  void run(const collx::Options& options, Blocking b, Nonblocking n) {
    if (blocking())
      b(options);
    else
      n(options).wait();
  }
};

TEST_P(MpiLibrary, AllreduceAndReduceGiveCollxsBits) {
  for (std::size_t count : {std::size_t{1}, std::size_t{1000}, std::size_t{70000}}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
      const auto in = values(r, count, 1);
      std::vector<std::int32_t> want(count), got(count), in_place = in;
      comm.allreduce(in.data(), want.data(), count, DataType::int32, op);
      run(
          kMpi,
          [&](auto& o) { comm.allreduce(in.data(), got.data(), count, DataType::int32, op, o); },
          [&](auto& o) {
            return comm.iallreduce(in.data(), got.data(), count, DataType::int32, op, o);
          });
      EXPECT_EQ(got, want) << "allreduce " << count;
      run(
          kMpi,
          [&](auto& o) {
            comm.allreduce(in_place.data(), in_place.data(), count, DataType::int32, op, o);
          },
          [&](auto& o) {
            return comm.iallreduce(in_place.data(), in_place.data(), count, DataType::int32, op, o);
          });
      EXPECT_EQ(in_place, want) << "allreduce in place " << count;
      const int root = p - 1;
      std::vector<std::int32_t> reduced(count, -1), root_in_place = in;
      run(
          kMpi,
          [&](auto& o) {
            comm.reduce(in.data(), reduced.data(), count, DataType::int32, op, root, o);
          },
          [&](auto& o) {
            return comm.ireduce(in.data(), reduced.data(), count, DataType::int32, op, root, o);
          });
      if (r == root) {
        EXPECT_EQ(reduced, want) << "reduce " << count;
      }
      if (r != root) {
        EXPECT_EQ(reduced, std::vector<std::int32_t>(count, -1));
      }
      std::int32_t* target = r == root ? root_in_place.data() : nullptr;
      run(
          kMpi,
          [&](auto& o) {
            comm.reduce(root_in_place.data(), target, count, DataType::int32, op, root, o);
          },
          [&](auto& o) {
            return comm.ireduce(root_in_place.data(), target, count, DataType::int32, op, root, o);
          });
      if (r == root) {
        EXPECT_EQ(root_in_place, want) << "reduce in place " << count;
      }
    }
  }
}

TEST_P(MpiLibrary, DataMovementGivesCollxsBits) {
  for (std::size_t count : {std::size_t{0}, std::size_t{3}, std::size_t{20000}}) {
    const auto mine = values(r, count, 2);
    for (int root : {0, p - 1}) {
      auto buffer = values(root, count, 3);
      if (r != root) buffer.assign(count, 0);
      run(
          kMpi, [&](auto& o) { comm.broadcast(buffer.data(), count, DataType::int32, root, o); },
          [&](auto& o) { return comm.ibroadcast(buffer.data(), count, DataType::int32, root, o); });
      EXPECT_EQ(buffer, values(root, count, 3)) << "broadcast " << count;
    }
    const std::size_t all = count * static_cast<std::size_t>(p);
    std::vector<std::int32_t> want(all), got(all);
    comm.allgather(mine.data(), want.data(), count, DataType::int32);
    run(
        kMpi, [&](auto& o) { comm.allgather(mine.data(), got.data(), count, DataType::int32, o); },
        [&](auto& o) {
          return comm.iallgather(mine.data(), got.data(), count, DataType::int32, o);
        });
    EXPECT_EQ(got, want) << "allgather " << count;
    std::vector<std::int32_t> in_place(all, 0);
    std::copy(mine.begin(), mine.end(), in_place.begin() + static_cast<std::ptrdiff_t>(count) * r);
    std::int32_t* own = in_place.data() + count * static_cast<std::size_t>(r);
    run(
        kMpi, [&](auto& o) { comm.allgather(own, in_place.data(), count, DataType::int32, o); },
        [&](auto& o) { return comm.iallgather(own, in_place.data(), count, DataType::int32, o); });
    EXPECT_EQ(in_place, want) << "allgather in place " << count;
    const int root = p - 1;
    std::vector<std::int32_t> gathered(r == root ? all : 0);
    run(
        kMpi,
        [&](auto& o) {
          comm.gather(mine.data(), gathered.data(), count, DataType::int32, root, o);
        },
        [&](auto& o) {
          return comm.igather(mine.data(), gathered.data(), count, DataType::int32, root, o);
        });
    if (r == root) {
      EXPECT_EQ(gathered, want) << "gather " << count;
    }
    std::vector<std::int32_t> piece(count, -1);
    run(
        kMpi,
        [&](auto& o) {
          comm.scatter(r == root ? want.data() : nullptr, piece.data(), count, DataType::int32,
                       root, o);
        },
        [&](auto& o) {
          return comm.iscatter(r == root ? want.data() : nullptr, piece.data(), count,
                               DataType::int32, root, o);
        });
    EXPECT_EQ(piece, mine) << "scatter " << count;
    const auto outgoing = values(r, all, 4);
    std::vector<std::int32_t> exchanged(all), expected(all);
    comm.alltoall(outgoing.data(), expected.data(), count, DataType::int32);
    run(
        kMpi,
        [&](auto& o) {
          comm.alltoall(outgoing.data(), exchanged.data(), count, DataType::int32, o);
        },
        [&](auto& o) {
          return comm.ialltoall(outgoing.data(), exchanged.data(), count, DataType::int32, o);
        });
    EXPECT_EQ(exchanged, expected) << "alltoall " << count;
  }
  run(
      kMpi, [&](auto& o) { comm.barrier(o); }, [&](auto& o) { return comm.ibarrier(o); });
}

TEST_P(MpiLibrary, ReduceScatterBlocksEvenAndUneven) {
  for (bool even : {true, false}) {
    std::vector<std::size_t> counts;
    for (int k = 0; k < p; ++k)
      counts.push_back(even ? 500 : static_cast<std::size_t>(k % 3) * 7);
    std::size_t total = 0;
    for (std::size_t c : counts)
      total += c;
    const auto in = values(r, total, 5);
    const std::size_t mine = counts[static_cast<std::size_t>(r)];
    std::vector<std::int32_t> want(mine), got(mine);
    comm.reduce_scatter_v(in.data(), want.data(), counts, DataType::int32, ReduceOp::sum);
    run(
        kMpi,
        [&](auto& o) {
          comm.reduce_scatter_v(in.data(), got.data(), counts, DataType::int32, ReduceOp::sum, o);
        },
        [&](auto& o) {
          return comm.ireduce_scatter_v(in.data(), got.data(), counts, DataType::int32,
                                        ReduceOp::sum, o);
        });
    EXPECT_EQ(got, want) << (even ? "even" : "uneven");
  }
}

INSTANTIATE_TEST_SUITE_P(BlockingAndNot, MpiLibrary, ::testing::Bool());

// mpi_types.hpp's tables: every DataType maps to the MPI datatype of its size (or to none), every
// ReduceOp to the MPI op of its name (or to none), and mpi_has, which reads no handle, agrees.
TEST(MpiLibraryHandles, TablesAgreeWithTheMpiLibrary) {
  const auto op_name = [](MPI_Op op) {
    if (op == MPI_SUM) return "sum";
    if (op == MPI_PROD) return "prod";
    if (op == MPI_MIN) return "min";
    if (op == MPI_MAX) return "max";
    return "";
  };
  for (int t = 0; t < collx::kDataTypeCount; ++t) {
    const auto type = static_cast<DataType>(t);
    const MPI_Datatype mpi = collx::mpi_datatype(type);
    const bool is_16bit_float = type == DataType::float16 || type == DataType::bfloat16;
    EXPECT_EQ(mpi == MPI_DATATYPE_NULL, is_16bit_float) << collx::to_string(type);
    if (mpi != MPI_DATATYPE_NULL) {
      int bytes = 0;
      MPI_Type_size(mpi, &bytes);
      EXPECT_EQ(static_cast<std::size_t>(bytes), collx::size_of(type)) << collx::to_string(type);
    }
    for (int o = 0; o < collx::kReduceOpCount; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      const MPI_Op mpi_op = collx::mpi_op(op);
      if (op == ReduceOp::avg) {
        EXPECT_EQ(mpi_op, MPI_OP_NULL);
      } else {
        EXPECT_EQ(op_name(mpi_op), collx::to_string(op));
      }
      EXPECT_EQ(collx::mpi_has(type, op), mpi != MPI_DATATYPE_NULL && mpi_op != MPI_OP_NULL)
          << collx::to_string(type) << " " << collx::to_string(op);
    }
  }
  // A value that is neither.
  EXPECT_EQ(collx::mpi_datatype(static_cast<DataType>(collx::kDataTypeCount)), MPI_DATATYPE_NULL);
  EXPECT_EQ(collx::mpi_op(static_cast<ReduceOp>(200)), MPI_OP_NULL);
  EXPECT_FALSE(collx::mpi_has(static_cast<DataType>(200), ReduceOp::sum));
}

TEST(MpiLibraryRefuses, WhatTheMpiLibraryHasNot) {
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<float> v(8, 1.0f), out(8);
  try {
    comm.allreduce(v.data(), out.data(), v.size(), DataType::float32, ReduceOp::avg, kMpi);
    FAIL() << "an avg through the MPI library was not refused";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::unsupported) << e.what();
  }
  // The communicator is still usable.
  comm.allreduce(v.data(), out.data(), v.size(), DataType::float32, ReduceOp::sum, kMpi);
  EXPECT_EQ(out[0], static_cast<float>(comm.size()));
}

// auto's trials measure the MPI library's collective beside collx's candidates: the learned
// line of a tried size class names it.
TEST(MpiLibraryInAuto, TheTrialsTryIt) {
  collx::Communicator comm(MPI_COMM_WORLD);  // two ranks or more (CMakeLists.txt)
  std::vector<std::int32_t> v(256, 1), out(256);
  for (int i = 0; i < 120; ++i)
    comm.allreduce(v.data(), out.data(), v.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(out[0], comm.size());
  bool named = false;
  for (const std::string& line : comm.learned_choices())
    named = named || (line.find("allreduce") != std::string::npos &&
                      line.find(" mpi ") != std::string::npos);
  EXPECT_TRUE(named) << "no learned line names the MPI library's collective";
}

// The configuration in force with COLLX_AUTOTUNE_WAIT at `wait`.
collx::detail::Config with_autotune_wait(int wait) {
  collx::detail::Config c = collx::detail::config();
  c.autotune_wait = wait;
  return c;
}

// Settles a class's trials by handing its tuner `seconds(algorithm)` for every timed call, the
// same on every rank, as the ranks' agreement would give.
template <class Seconds>
void settle(collx::detail::ClassTuner& tuner, Seconds&& seconds) {
  while (tuner.in_trials()) {
    const collx::detail::TrialPick pick = tuner.pick();
    if (!pick.timed) continue;
    if (tuner.record(seconds(pick.algorithm)) == collx::detail::TunerStep::agree) {
      const auto values = tuner.agree_values();
      tuner.agreed(values, values);
    }
  }
}

// A new size class's first calls (its wait) run the MPI library's collective where the nearest
// smaller class whose trials ended settled on it; with no such class (another collective), the
// table's choice. The smaller class is settled here by handing its tuner the same times on every
// rank (the MPI library's the fastest), as the ranks' agreement would.
TEST(MpiLibraryInAuto, ANewClassWaitsOnTheMpiLibraryWhereASmallerOneSettledOnIt) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const collx::testing::ConfigOverride waiting(with_autotune_wait(2));
  using collx::detail::ClassTuner;
  ClassTuner* small = s.tuner_for(Collective::allreduce, 1024);
  ASSERT_NE(small, nullptr);
  settle(*small, [](Algorithm a) { return a == Algorithm::mpi ? 1e-6 : 5e-6; });
  ASSERT_TRUE(small->chose_library());
  ClassTuner* large = s.tuner_for(Collective::allreduce, std::size_t{1} << 20);
  ASSERT_NE(large, nullptr);
  ASSERT_EQ(large->phase(), ClassTuner::Phase::waiting);
  EXPECT_EQ(large->pick().algorithm, Algorithm::mpi);
  // Its wait is kLibraryWaitFactor times as long as a wait on the table's choice, which is twice
  // the trials' calls weighted by what they cost: collx's candidates were 5x the MPI library's.
  std::size_t waited = 1;
  for (; large->phase() == ClassTuner::Phase::waiting; ++waited)
    EXPECT_EQ(large->pick().algorithm, Algorithm::mpi);
  const double cost =
      s.trial_cost_in_calls(Collective::allreduce, std::size_t{1} << 20, large->candidates());
  EXPECT_GT(cost, static_cast<double>(large->candidates().size()));
  EXPECT_EQ(waited, static_cast<std::size_t>(
                        std::ceil(2 * collx::detail::trials_for(std::size_t{1} << 20) * cost)) *
                        collx::detail::CommState::kLibraryWaitFactor);
  ClassTuner* other = s.tuner_for(Collective::allgather, std::size_t{1} << 20);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(other->phase(), ClassTuner::Phase::waiting);
  EXPECT_NE(other->pick().algorithm, Algorithm::mpi);
  // The waiting calls run it and give the sum.
  std::vector<std::int32_t> v((std::size_t{1} << 20) / 4, 1), out(v.size());
  comm.allreduce(v.data(), out.data(), v.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(out.front(), comm.size());
  EXPECT_EQ(out.back(), comm.size());
}

// Where the nearest smaller class whose trials ended settled on one of collx's algorithms, a new
// class's first candidate (the one its wait runs, and kept on a tie) is that algorithm, not the
// table's choice (a table made on other machines).
TEST(MpiLibraryInAuto, ANewClassWaitsOnWhatTheNearestSmallerOneSettledOn) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const collx::testing::ConfigOverride waiting(with_autotune_wait(2));
  using collx::detail::ClassTuner;
  for (const std::size_t bytes : {std::size_t{1} << 10, std::size_t{64} << 10}) {
    ClassTuner* small = s.tuner_for(Collective::allgather, bytes);
    ASSERT_NE(small, nullptr);
    const std::vector<Algorithm> tried(small->candidates().begin(), small->candidates().end());
    // The winner: the last of collx's candidates, not the table's choice.
    const Algorithm winner = *std::find_if(tried.rbegin(), tried.rend(),
                                           [](Algorithm a) { return a != Algorithm::mpi; });
    ASSERT_NE(winner, tried.front()) << bytes << " B";
    // The MPI library's collective 3x behind: not far enough to leave the larger class.
    settle(*small, [&](Algorithm a) {
      return a == winner ? 1e-6 : a == Algorithm::mpi ? 3e-6 : 5e-6;
    });
    ASSERT_EQ(small->chosen(), winner);
    ClassTuner* large = s.tuner_for(Collective::allgather, 2 * bytes);
    ASSERT_NE(large, nullptr);
    const auto list = large->candidates();
    ASSERT_EQ(large->phase(), ClassTuner::Phase::waiting);
    EXPECT_EQ(list.front(), winner) << 2 * bytes << " B";
    EXPECT_EQ(large->pick().algorithm, winner) << 2 * bytes << " B";
  }
}

// Above 64 KiB a new class does not try a candidate that the nearest smaller tried class to try it
// timed at twice its fastest or more (2.8x two classes down, 4x three down): its trial calls
// would cost a benchmark of a few calls of that size (IMB) more than the trials can win. Further
// up it is tried again; the MPI library's collective always stays.
TEST(MpiLibraryInAuto, ACandidateTwiceAsSlowInTheClassBelowIsNotTriedAgain) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const collx::testing::ConfigOverride no_wait(with_autotune_wait(0));
  using collx::detail::ClassTuner;
  const std::size_t kib256 = std::size_t{256} << 10;
  ClassTuner* small = s.tuner_for(Collective::allgather, kib256);
  ASSERT_NE(small, nullptr);
  const std::vector<Algorithm> tried(small->candidates().begin(), small->candidates().end());
  ASSERT_GE(tried.size(), 3u);
  // The MPI library's collective the fastest, the first of collx's candidates 3x slower, the
  // others 1.5x (the same times on every rank, as the ranks' agreement would give).
  const Algorithm slow = tried.front() == Algorithm::mpi ? tried[1] : tried.front();
  settle(*small, [&](Algorithm a) {
    return a == Algorithm::mpi ? 100e-6 : a == slow ? 300e-6 : 150e-6;
  });
  ASSERT_TRUE(small->chose_library());
  for (const std::size_t bytes : {2 * kib256, 4 * kib256}) {
    ClassTuner* next = s.tuner_for(Collective::allgather, bytes);
    ASSERT_NE(next, nullptr);
    const auto list = next->candidates();
    EXPECT_EQ(std::find(list.begin(), list.end(), slow), list.end())
        << bytes << " B: " << collx::to_string(slow);
    EXPECT_NE(std::find(list.begin(), list.end(), Algorithm::mpi), list.end()) << bytes << " B";
  }
  // A candidate 1.5x slower is kept.
  const Algorithm other = *std::find_if(
      tried.begin(), tried.end(), [&](Algorithm a) { return a != slow && a != Algorithm::mpi; });
  std::vector<Algorithm> offered = {slow, other, Algorithm::mpi};
  (void)s.weigh_by_smaller_classes(Collective::allgather, 2 * kib256, offered);
  EXPECT_EQ(offered, (std::vector<Algorithm>{other, Algorithm::mpi}));
  // Every candidate shown slow, and no MPI library's collective among them: none is left out.
  std::vector<Algorithm> only_slow = {slow};
  (void)s.weigh_by_smaller_classes(Collective::allgather, 2 * kib256, only_slow);
  EXPECT_EQ(only_slow, std::vector<Algorithm>{slow});
  // Three classes up, 3x is not slow enough (4x would be): tried again.
  std::vector<Algorithm> far = {slow, Algorithm::mpi};
  (void)s.weigh_by_smaller_classes(Collective::allgather, 8 * kib256, far);
  EXPECT_EQ(far.size(), 2u);
  // At 64 KiB and below the rule does not apply.
  std::vector<Algorithm> small_call = {slow, Algorithm::mpi};
  (void)s.weigh_by_smaller_classes(Collective::allgather, kib256 / 4, small_call);
  EXPECT_EQ(small_call.size(), 2u);
}

// The MPI library's collective leaves a new class above 64 KiB only where the nearest smaller
// tried class timed it 4x behind collx's choice or more (5.7x two classes down): 5x one class down
// leaves it out, 3x and 5x two classes down keep it.
TEST(MpiLibraryInAuto, TheMpiLibraryFourTimesAsSlowInTheClassBelowIsNotTriedAgain) {
  using collx::detail::ClassTuner;
  const collx::testing::ConfigOverride no_wait(with_autotune_wait(0));
  const std::size_t kib256 = std::size_t{256} << 10;
  // Whether the class of `larger` bytes offers the MPI library's collective, after the class of
  // 256 KiB settled on collx's choice with the MPI library's `behind` times its time.
  const auto offers_library = [&](double behind, std::size_t larger) {
    collx::Communicator fresh(MPI_COMM_WORLD);
    collx::detail::CommState& s = collx::detail::state_of(fresh);
    ClassTuner* small = s.tuner_for(Collective::broadcast, kib256);
    EXPECT_NE(small, nullptr);
    if (small == nullptr) return true;
    const Algorithm first = small->candidates().front();
    settle(*small, [&](Algorithm a) {
      return a == Algorithm::mpi ? behind * 100e-6 : a == first ? 100e-6 : 150e-6;
    });
    EXPECT_EQ(small->chosen(), first);
    std::vector<Algorithm> offered = {first, Algorithm::mpi};
    (void)s.weigh_by_smaller_classes(Collective::broadcast, larger, offered);
    EXPECT_EQ(offered.front(), first);
    return std::find(offered.begin(), offered.end(), Algorithm::mpi) != offered.end();
  };
  EXPECT_FALSE(offers_library(5.0, 2 * kib256));
  EXPECT_TRUE(offers_library(3.0, 2 * kib256));
  EXPECT_TRUE(offers_library(5.0, 4 * kib256));
}

// Above 64 KiB, where the nearest smaller tried class timed the MPI library's collective 1.5x
// behind collx's choice or more (2.1x two classes down), the new class's wait runs that choice
// throughout instead of warming the MPI library up in its second half (a benchmark of a few
// calls a size, IMB's Bcast of 1 MiB, makes all its calls in the wait); 1.3x behind, or at 64 KiB
// and below, the wait's second half still runs the MPI library's.
TEST(MpiLibraryInAuto, AWaitSkipsWarmingAnMpiLibraryFarBehind) {
  using collx::detail::ClassTuner;
  const collx::testing::ConfigOverride waiting(with_autotune_wait(2));
  // Whether every call of the wait of the class of 2 x `bytes` runs collx's choice, after the class
  // of `bytes` settled on it with the MPI library's collective `behind` times its time.
  const auto wait_runs_the_choice = [&](std::size_t bytes, double behind) {
    collx::Communicator fresh(MPI_COMM_WORLD);
    collx::detail::CommState& s = collx::detail::state_of(fresh);
    ClassTuner* small = s.tuner_for(Collective::broadcast, bytes);
    EXPECT_NE(small, nullptr);
    if (small == nullptr) return false;
    settle(*small, [&](Algorithm a) {
      return a == Algorithm::mpi                ? behind * 100e-6
             : a == small->candidates().front() ? 100e-6
                                                : 400e-6;
    });
    const Algorithm choice = small->chosen();
    EXPECT_NE(choice, Algorithm::mpi);
    ClassTuner* large = s.tuner_for(Collective::broadcast, 2 * bytes);
    EXPECT_NE(large, nullptr);
    if (large == nullptr) return false;
    EXPECT_EQ(large->phase(), ClassTuner::Phase::waiting);
    bool only_choice = true;
    while (large->phase() == ClassTuner::Phase::waiting) {
      const collx::detail::TrialPick p = large->pick();
      EXPECT_FALSE(p.timed);
      only_choice = only_choice && p.algorithm == choice;
    }
    return only_choice;
  };
  const std::size_t kib256 = std::size_t{256} << 10;
  EXPECT_TRUE(wait_runs_the_choice(kib256, 1.6));
  EXPECT_FALSE(wait_runs_the_choice(kib256, 1.3));
  EXPECT_FALSE(wait_runs_the_choice(std::size_t{16} << 10, 1.6));
}

// Above 64 KiB the wait before a class's trials is twice the trials' calls weighted by what each
// candidate cost in the nearest smaller class that timed it (a challenger at 3x counts three
// calls a trial call): a program calling the class a few times more than the unweighted wait
// (IMB's Alltoall of 2 MiB at 2 ranks: about 51 calls, a wait of 36) does not pay a slow
// challenger's trials. At 64 KiB and below every candidate counts one call.
TEST(MpiLibraryInAuto, AWaitLastsTwiceWhatTheTrialsAreExpectedToCost) {
  using collx::detail::ClassTuner;
  const collx::testing::ConfigOverride waiting(with_autotune_wait(2));
  // The wait of the class of 2 x `bytes`, after the class of `bytes` settled on its front
  // candidate with the others `slower` times its time (the MPI library's 1.2x).
  const auto wait_after = [&](std::size_t bytes, double slower) -> std::size_t {
    collx::Communicator fresh(MPI_COMM_WORLD);
    collx::detail::CommState& s = collx::detail::state_of(fresh);
    ClassTuner* small = s.tuner_for(Collective::alltoall, bytes);
    EXPECT_NE(small, nullptr);
    if (small == nullptr) return 0;
    const Algorithm front = small->candidates().front();
    settle(*small, [&](Algorithm a) {
      return a == front ? 100e-6 : a == Algorithm::mpi ? 120e-6 : slower * 100e-6;
    });
    EXPECT_EQ(small->chosen(), front);
    ClassTuner* large = s.tuner_for(Collective::alltoall, 2 * bytes);
    EXPECT_NE(large, nullptr);
    if (large == nullptr) return 0;
    std::size_t waited = 0;
    while (large->phase() == ClassTuner::Phase::waiting) {
      EXPECT_FALSE(large->pick().timed);
      ++waited;
    }
    // What the wait was weighed with: the candidates still in the class.
    const double cost = s.trial_cost_in_calls(Collective::alltoall, 2 * bytes, large->candidates());
    EXPECT_EQ(waited,
              static_cast<std::size_t>(std::ceil(2 * collx::detail::trials_for(2 * bytes) * cost)));
    if (2 * bytes > collx::detail::CommState::kLongCallBytes) {
      // Every candidate but the front one was timed below: 1.2 for the MPI library's, `slower`
      // (below the 2x that leaves a candidate out) for collx's others.
      double expected = 0;
      for (const Algorithm a : large->candidates())
        expected += a == front ? 1.0 : a == Algorithm::mpi ? 1.2 : slower;
      EXPECT_NEAR(cost, expected, 0.05);
    } else {
      EXPECT_EQ(cost, static_cast<double>(large->candidates().size()));
    }
    return waited;
  };
  const std::size_t kib512 = std::size_t{512} << 10;
  // A challenger at 1.9x makes the wait longer than at 1.0x (where each counts about one call).
  const std::size_t slow = wait_after(kib512, 1.9);
  const std::size_t even = wait_after(kib512, 1.0);
  if (slow > 0 && even > 0) {
    EXPECT_GT(slow, even);
  }
  wait_after(std::size_t{16} << 10, 1.9);
}

// An order-sensitive call (a float sum over three ranks or more, whose class auto does not try)
// up to CommState::kUntriedLibraryBytes runs the MPI library's own collective where the table
// would run one of collx's message algorithms: every call gives the MPI library's bits, the same
// as MPI_Allreduce on the same data. Larger calls, integer sums and two ranks keep the table's
// choice (two ranks: one combination, the same bits whatever runs); a nonblocking call keeps it
// too.
TEST(MpiLibraryInAuto, UntriedOrderSensitiveSmallCallsRunTheMpiLibrarys) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const int p = comm.size();
  const std::size_t small = 8 * sizeof(float);
  const std::size_t large = collx::detail::CommState::kUntriedLibraryBytes * 2;
  for (const std::size_t bytes : {small, large}) {
    const bool arena = s.arena_for(bytes);
    const auto sensitive =
        s.choose(Collective::allreduce, Algorithm::automatic, bytes, arena, true, p > 2);
    const Algorithm table = collx::detail::resolve_algorithm(
        Collective::allreduce, Algorithm::automatic, bytes, p, comm.rank(), arena, s.node_shape());
    const bool message_algorithm = !collx::runs_through_arena(Collective::allreduce, table);
    // Across nodes (COLLX_NODE_LAYOUT) the table's choice stays: its rules come from clusters.
    const bool one_node = s.node_shape().nodes == 1;
    if (p > 2 && bytes == small && message_algorithm && one_node) {
      EXPECT_EQ(sensitive.algorithm, Algorithm::mpi) << "table: " << collx::to_string(table);
      const auto nonblocking =
          s.choose(Collective::allreduce, Algorithm::automatic, bytes, arena, false, true);
      EXPECT_EQ(nonblocking.algorithm, table);
    } else if (p > 2) {
      EXPECT_EQ(sensitive.algorithm, table) << bytes << " B";
    }
  }
  // The bits are the MPI library's, call after call (on one node).
  const bool one_node_calls = s.node_shape().nodes == 1;
  std::vector<float> in(8), got(8), want(8);
  for (std::size_t i = 0; i < in.size(); ++i)
    in[i] = 0.1f * static_cast<float>(comm.rank() + 1) + 1e-7f * static_cast<float>(i * 7919);
  MPI_Allreduce(in.data(), want.data(), 8, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (int call = 0; call < 20; ++call) {
    comm.allreduce(in.data(), got.data(), in.size(), DataType::float32, ReduceOp::sum);
    if (p > 2 && one_node_calls) {
      ASSERT_EQ(0, std::memcmp(got.data(), want.data(), sizeof(float) * got.size()))
          << "call " << call;
    }
  }
}

// A program of barriers alone, its barrier settled on the MPI library, goes to it straight: no
// call with a buffer has told collx that the process is host-only, and a barrier has no buffer to
// be in device memory (ctest runs this test alone in its process: mpi_library_barriers_np*).
TEST(MpiLibraryBarrierOnly, DelegatedBarrierInAProgramOfBarriers) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  collx::detail::ClassTuner settled;
  const std::vector<Algorithm> only_mpi = {Algorithm::mpi};
  settled.start(only_mpi, 1, collx::detail::ClassTuner::Meetings::never, Algorithm::mpi);
  s.note_settled(Collective::barrier, 0, settled);
  const std::uint64_t before = s.next_sequence;
  for (int i = 0; i < 50; ++i)
    comm.barrier();
  EXPECT_EQ(s.next_sequence, before + 50);
  // collx's path would have started the barrier's trials (COLLX_AUTOTUNE_WAIT=0: at the first
  // call; one rank tries nothing): a learned line for it.
  for (const auto& started : s.learned())
    EXPECT_NE(started.collective, Collective::barrier)
        << "the delegated barrier reached its trials";
}

// A caller in front of collx (the drop-in) marks its entry (Communicator::entering_call) while
// trials run: the next blocking call takes it (once) as the start of its timing, so that collx's
// candidates are timed with the caller's own work, as settled they will cost; a mark left by a
// call that did not come (another numbered call took its place) is dropped.
TEST(MpiLibraryInAuto, TrialsTimeCollxsCandidatesFromTheCallersEntry) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  using Clock = collx::detail::CallClock;
  // No trials yet: nothing marked.
  comm.entering_call();
  EXPECT_EQ(s.caller_entry(), Clock::time_point{});
  std::vector<std::int32_t> in(1000, 1), out(1000);
  comm.allreduce(in.data(), out.data(), in.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(out[0], comm.size());
  // The class's trials start at its first call (COLLX_AUTOTUNE_WAIT=0), where there are ranks
  // to try anything with.
  ASSERT_EQ(s.trials_running(), comm.size() > 1);
  comm.entering_call();
  const Clock::time_point marked = s.caller_entry();
  EXPECT_EQ(marked != Clock::time_point{}, comm.size() > 1);
  EXPECT_EQ(s.caller_entry(), Clock::time_point{});  // taken once
  comm.entering_call();
  comm.allreduce(in.data(), out.data(), in.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(s.caller_entry(), Clock::time_point{});  // the call took it
  s.note_caller_entry();
  comm.library_call_made();  // a call numbered elsewhere (every rank alike): the mark was its
  EXPECT_EQ(s.caller_entry(), Clock::time_point{});
}

// A size class settled on the MPI library goes to it straight (CommState::delegates): the
// calls give collx's bits, take their sequence numbers, and never reach the class's trials (no
// learned line for the class); a size class next to it still goes through collx.
TEST(MpiLibraryDelegated, SettledClassesGoStraightToTheMpiLibrary) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const std::size_t count = 1000;  // 4000 B of int32: the class of 2049..4096 B
  collx::detail::ClassTuner settled;
  const std::vector<Algorithm> only_mpi = {Algorithm::mpi};
  settled.start(only_mpi, 1, collx::detail::ClassTuner::Meetings::never, Algorithm::mpi);
  ASSERT_EQ(settled.phase(), collx::detail::ClassTuner::Phase::settled);
  for (Collective c : {Collective::allreduce, Collective::broadcast, Collective::reduce,
                       Collective::allgather, Collective::reduce_scatter, Collective::gather,
                       Collective::scatter, Collective::alltoall, Collective::barrier}) {
    const std::size_t bytes =
        c == Collective::barrier ? 0
        : (c == Collective::allreduce || c == Collective::broadcast || c == Collective::reduce)
            ? count * 4
            : count * 4 * static_cast<std::size_t>(comm.size());
    s.note_settled(c, bytes, settled);
  }
  const int p = comm.size(), r = comm.rank();
  const auto in = values(r, count * static_cast<std::size_t>(p), 6);
  std::vector<std::int32_t> out(count * static_cast<std::size_t>(p)), want(out.size());
  const std::uint64_t before = s.next_sequence;
  comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
  comm.allreduce(in.data(), want.data(), count, DataType::int32, ReduceOp::sum,
                 collx::Options{Algorithm::ring});
  EXPECT_TRUE(std::equal(want.begin(), want.begin() + count, out.begin()));
  std::vector<std::int32_t> buffer = values(0, count, 7);
  if (r != 0) buffer.assign(count, 0);
  comm.broadcast(buffer.data(), count, DataType::int32, 0);
  EXPECT_EQ(buffer, values(0, count, 7));
  // In place at the last rank (MPICH before 4.2 reads MPI_IN_PLACE as an address there: the root
  // passes a copy, library_reduce_in_place).
  const int root = p - 1;
  std::vector<std::int32_t> reduced(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(count));
  comm.reduce(reduced.data(), r == root ? reduced.data() : nullptr, count, DataType::int32,
              ReduceOp::sum, root);
  if (r == root) {
    EXPECT_TRUE(std::equal(reduced.begin(), reduced.end(), want.begin()));
  }
  comm.allgather(in.data(), out.data(), count, DataType::int32);
  comm.allgather(in.data(), want.data(), count, DataType::int32, collx::Options{Algorithm::ring});
  EXPECT_EQ(out, want);
  comm.reduce_scatter(in.data(), out.data(), count, DataType::int32, ReduceOp::max);
  comm.reduce_scatter(in.data(), want.data(), count, DataType::int32, ReduceOp::max,
                      collx::Options{Algorithm::ring});
  EXPECT_TRUE(std::equal(want.begin(), want.begin() + count, out.begin()));
  comm.alltoall(in.data(), out.data(), count, DataType::int32);
  comm.alltoall(in.data(), want.data(), count, DataType::int32,
                collx::Options{Algorithm::pairwise});
  EXPECT_EQ(out, want);
  comm.barrier();
  // Eleven calls, each with its sequence number (the ring and pairwise ones included).
  EXPECT_EQ(s.next_sequence, before + 11);
  // No trials started for the delegated classes (the normal path starts them at the first call).
  const int delegated_class = collx::detail::size_class_of(count * 4);
  for (const auto& started : s.learned())
    EXPECT_FALSE(started.collective == Collective::allreduce &&
                 started.size_class == delegated_class)
        << "the delegated allreduce class reached its trials";
  // The class next to it is still collx's (its trials start: a learned line appears).
  std::vector<std::int32_t> small(100, 1), sum(100);
  for (int i = 0; i < 60; ++i)
    comm.allreduce(small.data(), sum.data(), small.size(), DataType::int32, ReduceOp::sum);
  EXPECT_EQ(sum[0], p);
}

// A choice of the MPI library's collective that no trials time goes to it straight from the
// size's second call on (CommState::delegates, untimed_library_): asked for by name, or by
// COLLX_ALGO (a tuning file's rule and the table's row resolve alike). The calls give the MPI
// library's bits and take their sequence numbers; another size, and auto's calls where nothing
// chose the MPI library for them, are not taken along.
TEST(MpiLibraryDelegated, UntimedChoicesOfTheMpiLibraryGoStraightToIt) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const int r = comm.rank();
  const std::size_t count = 300;  // 1200 B of int32
  const std::size_t bytes = count * sizeof(std::int32_t);
  const auto in = values(r, count, 3);
  std::vector<std::int32_t> want(count), out(count);
  comm.allreduce(in.data(), want.data(), count, DataType::int32, ReduceOp::sum,
                 collx::Options{Algorithm::ring});
  // By name: the first call goes through collx's path, which remembers the size.
  EXPECT_FALSE(s.delegates(Collective::allreduce, bytes, kMpi));
  comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum, kMpi);
  EXPECT_EQ(out, want);
  EXPECT_TRUE(s.delegates(Collective::allreduce, bytes, kMpi));
  EXPECT_FALSE(s.delegates(Collective::allreduce, bytes + sizeof(std::int32_t), kMpi));
  EXPECT_FALSE(s.delegates(Collective::allreduce, bytes, collx::Options{}));
  EXPECT_FALSE(s.delegates(Collective::allreduce, bytes, collx::Options{Algorithm::ring}));
  std::uint64_t before = s.next_sequence;
  for (int call = 0; call < 5; ++call) {
    out.assign(count, 0);
    comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum, kMpi);
    EXPECT_EQ(out, want) << "call " << call;
  }
  EXPECT_EQ(s.next_sequence, before + 5);
  // By COLLX_ALGO: auto's broadcast resolves to the MPI library's.
  collx::detail::Config c = collx::detail::config();
  c.algorithm[static_cast<std::size_t>(Collective::broadcast)] = Algorithm::mpi;
  const collx::testing::ConfigOverride forced(c);
  const std::vector<std::int32_t> sent = values(0, count, 8);
  std::vector<std::int32_t> buffer(count);
  const auto broadcast = [&] {
    buffer = r == 0 ? sent : std::vector<std::int32_t>(count, 0);
    comm.broadcast(buffer.data(), count, DataType::int32, 0);
    EXPECT_EQ(buffer, sent);
  };
  broadcast();
  EXPECT_TRUE(s.delegates(Collective::broadcast, bytes, collx::Options{}));
  EXPECT_FALSE(s.delegates(Collective::broadcast, 2 * bytes, collx::Options{}));
  // The allreduce asked for by name, under a configuration replaced since: through collx again
  // once, then straight.
  EXPECT_FALSE(s.delegates(Collective::allreduce, bytes, kMpi));
  before = s.next_sequence;
  for (int call = 0; call < 3; ++call)
    broadcast();
  EXPECT_EQ(s.next_sequence, before + 3);
}

// A delegated class of the test's count (4000 B of int32, the class of 2049..4096 B), settled on
// the MPI library as auto's trials would settle it.
void settle_on_the_mpi_library(collx::detail::CommState& s, Collective collective,
                               std::size_t bytes) {
  collx::detail::ClassTuner settled;
  const std::vector<Algorithm> only_mpi = {Algorithm::mpi};
  settled.start(only_mpi, 1, collx::detail::ClassTuner::Meetings::never, Algorithm::mpi);
  s.note_settled(collective, bytes, settled);
}

// A delegated call is remembered (CommState::remembered_calls): the collective's next call with
// the same arguments, options and configuration goes to the MPI library without its checks and
// decision; any other call takes the whole path, which checks it and may remember it instead. A
// replaced configuration is a different decision: the remembered call then goes through collx's
// path, whose first call of the class starts its trials.
TEST(MpiLibraryDelegated, ARememberedCallIsTheSameCallOnly) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const std::size_t count = 1000;
  settle_on_the_mpi_library(s, Collective::allreduce, count * 4);
  const auto& slot = s.remembered_calls[static_cast<std::size_t>(Collective::allreduce)];
  EXPECT_FALSE(slot.held);
  const auto in = values(comm.rank(), count, 9);
  std::vector<std::int32_t> sum(count), max(count), out(count);
  comm.allreduce(in.data(), sum.data(), count, DataType::int32, ReduceOp::sum,
                 collx::Options{Algorithm::ring});
  comm.allreduce(in.data(), max.data(), count, DataType::int32, ReduceOp::max,
                 collx::Options{Algorithm::ring});
  EXPECT_FALSE(slot.held);  // an explicit collx algorithm is never delegated
  const std::uint64_t before = s.next_sequence;
  for (int call = 0; call < 4; ++call) {
    out.assign(count, 0);
    comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
    EXPECT_TRUE(slot.held);
    EXPECT_EQ(out, sum) << "call " << call;
  }
  // Another op, another output buffer, in place: each is its own call, and right.
  comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::max);
  EXPECT_EQ(out, max);
  std::vector<std::int32_t> other(count);
  comm.allreduce(in.data(), other.data(), count, DataType::int32, ReduceOp::sum);
  EXPECT_EQ(other, sum);
  other = in;
  comm.allreduce(collx::in_place, other.data(), count, DataType::int32, ReduceOp::sum);
  EXPECT_EQ(other, sum);
  EXPECT_EQ(s.next_sequence, before + 7);
  // The same call under a replaced configuration: collx's path, which starts the class's trials.
  const int size_class = collx::detail::size_class_of(count * 4);
  const auto trials_started = [&] {
    for (const auto& started : s.learned(false, true))
      if (started.collective == Collective::allreduce && started.size_class == size_class)
        return true;
    return false;
  };
  comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
  EXPECT_FALSE(trials_started());
  {
    const collx::testing::ConfigOverride replaced(collx::detail::config());
    out.assign(count, 0);
    comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(out, sum);
    if (comm.size() > 1) {
      EXPECT_TRUE(trials_started());
    }
  }
  // What the remembered call never checked is checked for a call that differs: a null output
  // buffer, and device memory asked for (this test runs host memory only).
  comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
  EXPECT_THROW(comm.allreduce(in.data(), nullptr, count, DataType::int32, ReduceOp::sum),
               collx::Error);
  collx::Options device;
  device.memory = collx::MemoryKind::device;
  EXPECT_THROW(comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum, device),
               collx::Error);
}

// Calls that every rank rejected (before sending anything) leave each rank awaiting the others'
// notices of them (failure_notices.hpp), which arrive at each rank in its own time. A delegated
// class's next call must still take one path on every rank: it settles the notices first, then
// decides (it used to leave the delegated path on a rank still awaiting a notice, for collx's
// algorithm, while the others made the MPI library's call: a hang).
TEST(MpiLibraryDelegated, CallsEveryRankRejectedLeaveOnePathForTheNext) {
  collx::Communicator comm(MPI_COMM_WORLD);
  collx::detail::CommState& s = collx::detail::state_of(comm);
  const std::size_t count = 1000;
  settle_on_the_mpi_library(s, Collective::allreduce, count * 4);
  const auto in = values(comm.rank(), count, 4);
  std::vector<std::int32_t> want(count), out(count);
  comm.allreduce(in.data(), want.data(), count, DataType::int32, ReduceOp::sum,
                 collx::Options{Algorithm::ring});
  collx::Options device;
  device.memory = collx::MemoryKind::device;
  for (int round = 0; round < 10; ++round) {
    comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(out, want) << "round " << round;
    EXPECT_THROW(comm.allreduce(in.data(), nullptr, count, DataType::int32, ReduceOp::sum),
                 collx::Error);
    EXPECT_THROW(
        comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum, device),
        collx::Error);
    out.assign(count, 0);
    comm.allreduce(in.data(), out.data(), count, DataType::int32, ReduceOp::sum);
    EXPECT_EQ(out, want) << "round " << round;
  }
}
}  // namespace
