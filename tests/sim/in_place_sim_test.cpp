// Every registry row's schedule run as a small blocking call runs it: to completion in place
// (run_blocking with nothing else in flight, every wait completing where it is, the shared
// arena's waits sleeping on its counters), each simulated rank on a thread of its own. Its
// outputs must be bitwise those of the same schedule driven by the simulated ranks' engine,
// which the other sim tests check against exact references: the in-place waits, the arena's
// awaiters and the turn its operation ends (Operation::ends_turn_of) change nothing, and a
// second call finds the arena as the first left it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "exact_data.hpp"
#include "registry.hpp"
#include "sim_world.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using namespace collx::detail;
using collx::testing::SimWorld;
using Bytes = std::vector<std::byte>;

constexpr int kTagBase = 1;

Bytes pattern(DataType type, int rank, std::size_t count) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, 0);
  return b;
}

// Every rank's output (and a gather's root buffer last) after one call of `row` with `count`
// elements from `root`: in place on a thread per rank, or driven by the world's engine.
std::vector<Bytes> run_call(const AlgorithmRow& row, int p, std::size_t count, int root,
                            ReduceOp rop, bool in_place) {
  const DataType type = DataType::float32;
  const std::size_t elem = collx::size_of(type);
  // The arena's rows run on ranks that share an arena (3 slots of 512 B); the others without.
  SimWorld world(p, 512, row.algorithm == Algorithm::shared_memory ? 3 : 0);
  std::vector<Bytes> in(p), out(p);
  for (int r = 0; r < p; ++r) {
    in[r] = pattern(type, r, count);
    // A broadcast works in place: the root's buffer holds the data, the others' are zero.
    out[r] = row.collective == Collective::broadcast && r == root ? in[r] : Bytes(in[r].size());
  }
  // gather and scatter: the root's full buffer holds p blocks of `count` elements.
  Bytes full(count * elem * static_cast<std::size_t>(p));
  if (row.collective == Collective::scatter) {
    for (int r = 0; r < p; ++r)
      std::copy(in[r].begin(), in[r].end(),
                full.begin() + static_cast<std::ptrdiff_t>(r * count * elem));
  }
  std::vector<std::size_t> offsets(static_cast<std::size_t>(p) + 1);
  for (std::size_t r = 0; r < offsets.size(); ++r)
    offsets[r] = r * count;
  if (row.collective == Collective::allgather) {
    for (auto& o : out)
      o = Bytes(full.size());
  }
  // reduce_scatter: uneven blocks (count, count + 1, count, ...), every rank's whole input.
  std::vector<std::size_t> uneven(static_cast<std::size_t>(p) + 1, 0);
  for (int r = 0; r < p; ++r)
    uneven[r + 1] = uneven[r] + count + static_cast<std::size_t>(r % 2);
  std::vector<Bytes> whole(p);
  if (row.collective == Collective::reduce_scatter) {
    for (int r = 0; r < p; ++r) {
      whole[r] = pattern(type, r, uneven.back());
      out[r] = Bytes((uneven[r + 1] - uneven[r]) * elem);
    }
  }
  // alltoall: p blocks of `count` elements in and out.
  if (row.collective == Collective::alltoall) {
    for (int r = 0; r < p; ++r) {
      in[r] = pattern(type, r, count * static_cast<std::size_t>(p));
      out[r] = Bytes(in[r].size());
    }
  }
  const Reduction reduction = Reduction::make(type, rop, p);
  const auto task_of = [&](Operation& op, int r) -> Task {
    switch (row.collective) {
      case Collective::allreduce:
        return allreduce_task(op, {in[r].data(), out[r].data(), count, reduction, {}},
                              row.algorithm);
      case Collective::broadcast:
        return broadcast_task(op, {out[r].data(), count, elem, root, {}}, row.algorithm);
      case Collective::reduce:
        return reduce_task(
            op, {in[r].data(), out[r].data(), count, reduction, root, {}, Algorithm::ring},
            row.algorithm);
      case Collective::gather:
        return gather_task(
            op, {in[r].data(), r == root ? full.data() : nullptr, offsets, elem, root, {}},
            row.algorithm);
      case Collective::allgather:
        return allgather_task(op, {in[r].data(), out[r].data(), offsets, elem, {}}, row.algorithm);
      case Collective::scatter:
        return scatter_task(
            op, {r == root ? full.data() : nullptr, out[r].data(), offsets, elem, root, {}},
            row.algorithm);
      case Collective::reduce_scatter:
        return reduce_scatter_task(op, {whole[r].data(), out[r].data(), uneven, reduction, {}},
                                   row.algorithm);
      case Collective::alltoall:
        return alltoall_task(op, {in[r].data(), out[r].data(), count, elem, {}}, row.algorithm);
      default:
        return barrier_task(op, BarrierArgs{}, row.algorithm);
    }
  };
  OpInfo info;
  info.collective = row.collective;
  info.algorithm = row.algorithm;
  info.tag_base = kTagBase;
  info.segment_bytes = 64 << 10;
  info.pipeline_depth = 4;
  if (in_place) {
    info.blocking = true;
    // Twice, as a run of small calls makes it: the second call starts where the first left the
    // arena's rings and turns (the outputs do not depend on the inputs' being fresh).
    world.run_threads([&](Transport& t, int r) {
      for (int call = 0; call < 2; ++call) {
        Operation op(t, info);
        run_blocking(op, task_of(op, r));
      }
    });
  } else {
    world.run(info, task_of);
  }
  // A gather's result is the root's full buffer.
  if (row.collective == Collective::gather) out.push_back(full);
  return out;
}

class SimInPlace : public ::testing::TestWithParam<int> {};

TEST_P(SimInPlace, EveryScheduleRunToCompletionInPlaceGivesTheBitsOfTheEngineRun) {
  const int p = GetParam();
  for (const AlgorithmRow& row : registry()) {
    // The MPI library's own collective has no simulated ranks to run on (mpi_library.cpp);
    // point-to-point takes the user's messages, not a collective's.
    if (row.mpi_library || row.collective == Collective::sendrecv) continue;
    const bool rooted =
        row.collective == Collective::broadcast || row.collective == Collective::reduce ||
        row.collective == Collective::gather || row.collective == Collective::scatter;
    const std::vector<std::size_t> counts =
        row.collective == Collective::barrier
            ? std::vector<std::size_t>{0}
            : std::vector<std::size_t>{0, 1, 3, static_cast<std::size_t>(p) + 1, 100, 1000};
    std::vector<int> roots{0};
    if (rooted && p > 1) roots.push_back(p - 1);
    for (ReduceOp rop : {ReduceOp::sum, ReduceOp::avg}) {
      for (std::size_t count : counts) {
        for (int root : roots) {
          const std::string what = std::string(collx::to_string(row.collective)) + "/" +
                                   std::string(collx::to_string(row.algorithm)) +
                                   " p=" + std::to_string(p) + " count=" + std::to_string(count) +
                                   " root=" + std::to_string(root) +
                                   " op=" + std::string(collx::to_string(rop));
          const std::vector<Bytes> engine = run_call(row, p, count, root, rop, false);
          const std::vector<Bytes> in_place = run_call(row, p, count, root, rop, true);
          ASSERT_EQ(in_place.size(), engine.size()) << what;
          for (std::size_t r = 0; r < engine.size(); ++r) {
            // The output of a reduce is significant at the root only.
            if (row.collective == Collective::reduce && static_cast<int>(r) != root) continue;
            ASSERT_EQ(in_place[r], engine[r]) << what << " rank " << r;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(P1to6, SimInPlace, ::testing::Range(1, 7));

}  // namespace
