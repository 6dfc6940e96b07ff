// The latency path's blocking forms against their schedules: for every registry row that has
// one, on simulated ranks (the blocking form on a thread per rank), every rank posts the same
// messages in the same order with the same tags and lengths, and gets bitwise the same result.
// Ranks of one call may take different paths (one alone in the process, another not), so the
// two forms must stay interchangeable.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "exact_data.hpp"
#include "registry.hpp"
#include "sim_world.hpp"
#include "slices.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using namespace collx::detail;
using collx::testing::SimWorld;
using Bytes = std::vector<std::byte>;

constexpr int kTagBase = 1;

// What one form of the call leaves behind: every rank's output and postings.
struct Outcome {
  int declined_on = 0;  // ranks whose blocking form declined the call (posting nothing)
  std::vector<Bytes> outputs;
  std::vector<std::vector<SimWorld::Posting>> postings;
};

Bytes pattern(DataType type, int rank, std::size_t count) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, 0);
  return b;
}

// reduce_scatter's blocks: count, count + 1, count, ... elements.
std::vector<std::size_t> uneven_offsets(int p, std::size_t count) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(p) + 1, 0);
  for (int r = 0; r < p; ++r)
    offsets[r + 1] = offsets[r] + count + static_cast<std::size_t>(r % 2);
  return offsets;
}
std::size_t uneven_total(int p, std::size_t count) {
  return uneven_offsets(p, count).back();
}

// Runs one call of `row` with `count` elements from `root`, as the schedule (blocking ==
// false) or as the blocking form.
Outcome run_form(const AlgorithmRow& row, int p, std::size_t count, int root, ReduceOp rop,
                 bool blocking) {
  const DataType type = DataType::float32;
  // The arena's rows run on ranks that share an arena (3 slots of 512 B); the others without.
  SimWorld world(p, 512, row.algorithm == Algorithm::shared_memory ? 3 : 0);
  std::vector<int> declined(static_cast<std::size_t>(p), 0);
  world.clear_postings();
  std::vector<Bytes> in(p), out(p);
  for (int r = 0; r < p; ++r) {
    in[r] = pattern(type, r, count);
    // A broadcast works in place: the root's buffer holds the data, the others' are zero.
    out[r] = row.collective == Collective::broadcast && r == root ? in[r] : Bytes(in[r].size());
  }
  // gather and scatter: the root's full buffer holds p blocks of `count` elements.
  const std::size_t elem = collx::size_of(type);
  Bytes full(count * elem * static_cast<std::size_t>(p));
  if (row.collective == Collective::scatter) {
    for (int r = 0; r < p; ++r)
      std::copy(in[r].begin(), in[r].end(),
                full.begin() + static_cast<std::ptrdiff_t>(r * count * elem));
  }
  std::vector<std::size_t> offsets(static_cast<std::size_t>(p) + 1);
  for (std::size_t r = 0; r < offsets.size(); ++r)
    offsets[r] = r * count;
  auto args_gather = [&](int r) {
    return GatherArgs{in[r].data(), r == root ? full.data() : nullptr, offsets, elem, root, {}};
  };
  // allgather: rank r's block r of the output comes from its input (not in place).
  if (row.collective == Collective::allgather) {
    for (auto& o : out)
      o = Bytes(full.size());
  }
  auto args_allgather = [&](int r) {
    return AllgatherArgs{in[r].data(), out[r].data(), offsets, elem, {}};
  };
  auto args_scatter = [&](int r) {
    return ScatterArgs{r == root ? full.data() : nullptr, out[r].data(), offsets, elem, root, {}};
  };
  const Reduction reduction = Reduction::make(type, rop, p);
  auto args_allreduce = [&](int r) {
    return AllreduceArgs{in[r].data(), out[r].data(), count, reduction, {}};
  };
  auto args_broadcast = [&](int r) {
    return BroadcastArgs{out[r].data(), count, collx::size_of(type), root, {}};
  };
  auto args_reduce = [&](int r) {
    return ReduceArgs{in[r].data(), out[r].data(), count, reduction, root, {}, Algorithm::ring};
  };
  // reduce_scatter: uneven blocks (count, count + 1, count, ...), every rank's whole input.
  const std::vector<std::size_t> uneven = uneven_offsets(p, count);
  std::vector<Bytes> whole(p);
  if (row.collective == Collective::reduce_scatter) {
    for (int r = 0; r < p; ++r) {
      whole[r] = pattern(type, r, uneven.back());
      out[r] = Bytes((uneven[r + 1] - uneven[r]) * elem);
    }
  }
  auto args_reduce_scatter = [&](int r) {
    return ReduceScatterArgs{whole[r].data(), out[r].data(), uneven, reduction, {}};
  };
  // alltoall: p blocks of `count` elements in and out (not in place).
  if (row.collective == Collective::alltoall) {
    for (int r = 0; r < p; ++r) {
      in[r] = pattern(type, r, count * static_cast<std::size_t>(p));
      out[r] = Bytes(in[r].size());
    }
  }
  auto args_alltoall = [&](int r) {
    return AlltoallArgs{in[r].data(), out[r].data(), count, elem, {}};
  };
  if (blocking) {
    world.run_threads([&](Transport& t, int r) {
      bool ran = false;
      switch (row.collective) {
        case Collective::allreduce:
          ran = run_blocking_form<Collective::allreduce>(t, kTagBase, args_allreduce(r),
                                                         row.algorithm);
          break;
        case Collective::broadcast:
          ran = run_blocking_form<Collective::broadcast>(t, kTagBase, args_broadcast(r),
                                                         row.algorithm);
          break;
        case Collective::reduce:
          ran = run_blocking_form<Collective::reduce>(t, kTagBase, args_reduce(r), row.algorithm);
          break;
        case Collective::barrier:
          ran = run_blocking_form<Collective::barrier>(t, kTagBase, BarrierArgs{}, row.algorithm);
          break;
        case Collective::gather:
          ran = run_blocking_form<Collective::gather>(t, kTagBase, args_gather(r), row.algorithm);
          break;
        case Collective::allgather:
          // The ring's form runs at one and two ranks only.
          ran = run_blocking_form<Collective::allgather>(t, kTagBase, args_allgather(r),
                                                         row.algorithm);
          break;
        case Collective::scatter:
          ran = run_blocking_form<Collective::scatter>(t, kTagBase, args_scatter(r), row.algorithm);
          break;
        case Collective::reduce_scatter:
          ran = run_blocking_form<Collective::reduce_scatter>(t, kTagBase, args_reduce_scatter(r),
                                                              row.algorithm);
          break;
        case Collective::alltoall:
          ran =
              run_blocking_form<Collective::alltoall>(t, kTagBase, args_alltoall(r), row.algorithm);
          break;
        default:
          FAIL() << "a blocking form for " << collx::to_string(row.collective)
                 << ": add it to this test";
      }
      if (!ran) declined[static_cast<std::size_t>(r)] = 1;
    });
  } else {
    OpInfo info;
    info.collective = row.collective;
    info.algorithm = row.algorithm;
    info.tag_base = kTagBase;
    info.segment_bytes = 64 << 10;  // one segment, as the latency path assumes
    info.pipeline_depth = 4;
    world.run(info, [&](Operation& op, int r) -> Task {
      switch (row.collective) {
        case Collective::allreduce:
          return allreduce_task(op, args_allreduce(r), row.algorithm);
        case Collective::broadcast:
          return broadcast_task(op, args_broadcast(r), row.algorithm);
        case Collective::reduce:
          return reduce_task(op, args_reduce(r), row.algorithm);
        case Collective::gather:
          return gather_task(op, args_gather(r), row.algorithm);
        case Collective::allgather:
          return allgather_task(op, args_allgather(r), row.algorithm);
        case Collective::scatter:
          return scatter_task(op, args_scatter(r), row.algorithm);
        case Collective::reduce_scatter:
          return reduce_scatter_task(op, args_reduce_scatter(r), row.algorithm);
        case Collective::alltoall:
          return alltoall_task(op, args_alltoall(r), row.algorithm);
        default:
          return barrier_task(op, BarrierArgs{}, row.algorithm);
      }
    });
  }
  Outcome o;
  o.declined_on = static_cast<int>(std::count(declined.begin(), declined.end(), 1));
  o.outputs = out;
  // A gather's result is the root's full buffer.
  if (row.collective == Collective::gather) o.outputs.push_back(full);
  o.postings = world.postings();
  o.postings.resize(static_cast<std::size_t>(p));
  return o;
}

Bytes concatenated(const std::vector<Bytes>& blocks) {
  Bytes all;
  for (const Bytes& b : blocks)
    all.insert(all.end(), b.begin(), b.end());
  return all;
}

class SimBlockingForms : public ::testing::TestWithParam<int> {};

TEST_P(SimBlockingForms, PostTheSameMessagesAndGiveTheSameBitsAsTheirSchedules) {
  const int p = GetParam();
  int rows_with_blocking_form = 0;
  for (const AlgorithmRow& row : registry()) {
    // The MPI library's own collective has no simulated ranks to run on (mpi_library.cpp): the
    // MPI tests run it.
    if (row.blocking == nullptr || row.mpi_library) continue;
    ++rows_with_blocking_form;
    const bool rooted =
        row.collective == Collective::broadcast || row.collective == Collective::reduce ||
        row.collective == Collective::gather || row.collective == Collective::scatter;
    std::vector<std::size_t> counts =
        row.collective == Collective::barrier
            ? std::vector<std::size_t>{0}
            : std::vector<std::size_t>{0, 1, 3, static_cast<std::size_t>(p) + 1, 100, 255, 256};
    if (row.collective == Collective::gather || row.collective == Collective::scatter ||
        row.collective == Collective::allgather) {
      // Past the latency path's 1 KiB, up to and past kDirectPathBytes in all.
      const std::size_t edge = kDirectPathBytes / sizeof(float) / static_cast<std::size_t>(p);
      counts.insert(counts.end(), {1000, edge, edge + 1});
    }
    if (row.collective == Collective::broadcast) {
      // The trees' and linear's forms take calls of up to kArenaPathBytes (no scratch).
      const std::size_t edge = kArenaPathBytes / sizeof(float);
      counts.insert(counts.end(), {1000, edge, edge + 1});
    }
    std::vector<int> roots{0};
    if (rooted && p > 2) roots.push_back(p / 2);
    if (rooted && p > 1) roots.push_back(p - 1);
    for (ReduceOp rop : {ReduceOp::sum, ReduceOp::avg}) {
      for (std::size_t count : counts) {
        for (int root : roots) {
          const std::string what = std::string(collx::to_string(row.collective)) + "/" +
                                   std::string(collx::to_string(row.algorithm)) +
                                   " p=" + std::to_string(p) + " count=" + std::to_string(count) +
                                   " root=" + std::to_string(root) +
                                   " op=" + std::string(collx::to_string(rop));
          const Outcome schedule = run_form(row, p, count, root, rop, false);
          const Outcome blocking = run_form(row, p, count, root, rop, true);
          // The forms of the gathering collectives take calls of at most kDirectPathBytes in
          // all (p blocks), the ring allgather's one and two ranks with bytes to move; beyond,
          // the form declines on every rank and the call goes through the schedule.
          const bool gathering = row.collective == Collective::gather ||
                                 row.collective == Collective::scatter ||
                                 row.collective == Collective::allgather;
          // reduce_scatter's form takes at most kLatencyPathBytes in all (its blocks are count
          // and count + 1 elements long, alternately).
          const std::size_t scattered =
              (count * static_cast<std::size_t>(p) + static_cast<std::size_t>(p / 2)) *
              sizeof(float);
          // The arena's forms take one slot (512 B here) per producer, at most
          // kArenaPathBytes in all; they post no messages, as their schedules. One rank has
          // no arena (as SharedArena::create makes none), and the forms decline.
          const bool arena = row.algorithm == Algorithm::shared_memory;
          const std::size_t block_bytes = count * sizeof(float);
          // The sliced reductions' forms take one round of pieces (p pieces to a 512 B slot),
          // their whole input in one slot.
          const bool sliced = row.collective == Collective::allreduce ||
                              row.collective == Collective::reduce_scatter;
          const std::size_t sliced_count =
              row.collective == Collective::allreduce ? count : uneven_total(p, count);
          const std::size_t piece =
              collx::patterns::piece_elements(64 << 10, 512, p, sizeof(float));
          const std::vector<std::size_t> sliced_offsets =
              row.collective == Collective::allreduce
                  ? collx::patterns::line_aligned_offsets(count, sizeof(float), p)
                  : uneven_offsets(p, count);
          const bool one_round =
              piece > 0 && collx::patterns::rounds_of(sliced_offsets, piece) <= 1;
          const bool arena_too_large =
              arena &&
              (p == 1 || block_bytes > 512 || block_bytes > kArenaPathBytes ||
               (gathering && block_bytes * static_cast<std::size_t>(p) > kArenaPathBytes) ||
               (sliced && (sliced_count * sizeof(float) > 512 || !one_round)));
          const bool too_large =
              arena_too_large ||
              (!arena && row.collective == Collective::broadcast &&
               count * sizeof(float) > kArenaPathBytes) ||
              (!arena && gathering &&
               count * sizeof(float) * static_cast<std::size_t>(p) > kDirectPathBytes) ||
              (row.collective == Collective::reduce_scatter && scattered > kLatencyPathBytes);
          // The allgathers' forms: the ring's at one and two ranks with bytes to move,
          // recursive doubling's on a power of two with bytes in every block.
          const bool ring_declines =
              row.algorithm == Algorithm::ring && (p > 2 || (p == 2 && count == 0));
          const bool doubling_declines =
              row.algorithm == Algorithm::recursive_doubling && p > 1 &&
              (!std::has_single_bit(static_cast<unsigned>(p)) || count == 0);
          if (too_large || (!arena && row.collective == Collective::allgather &&
                            (ring_declines || doubling_declines))) {
            ASSERT_EQ(blocking.declined_on, p) << what;
            continue;
          }
          ASSERT_EQ(blocking.declined_on, 0) << what << ": the blocking form declined";
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(blocking.postings[r], schedule.postings[r]) << what << " rank " << r;
            // The output of a reduce is significant at the root only.
            if (row.collective == Collective::reduce && r != root) continue;
            ASSERT_EQ(blocking.outputs[r], schedule.outputs[r]) << what << " rank " << r;
          }
          ASSERT_EQ(blocking.outputs.size(), schedule.outputs.size());
          if (row.collective == Collective::alltoall) {
            // Block j of rank r's output is block r of rank j's input.
            const std::size_t block = count * sizeof(float);
            for (int r = 0; r < p; ++r) {
              for (int j = 0; j < p; ++j) {
                const Bytes input =
                    pattern(DataType::float32, j, count * static_cast<std::size_t>(p));
                ASSERT_TRUE(std::equal(
                    input.begin() + static_cast<std::ptrdiff_t>(r * block),
                    input.begin() + static_cast<std::ptrdiff_t>((r + 1) * block),
                    schedule.outputs[r].begin() + static_cast<std::ptrdiff_t>(j * block)))
                    << what << " rank " << r << " block " << j;
              }
            }
          }
          if (row.collective == Collective::gather) {
            ASSERT_EQ(blocking.outputs.back(), schedule.outputs.back()) << what << " root's buffer";
            std::vector<Bytes> inputs;
            for (int r = 0; r < p; ++r)
              inputs.push_back(pattern(DataType::float32, r, count));
            ASSERT_EQ(schedule.outputs.back(), concatenated(inputs)) << what << " root's buffer";
          }
        }
      }
    }
  }
  // allreduce/recursive_doubling and shared_memory, broadcast/binomial_tree, pipelined_chain,
  // linear and shared_memory,
  // reduce/binomial_tree and shared_memory, barrier/dissemination, gather/linear and
  // shared_memory, scatter/linear and shared_memory, allgather/ring, recursive_doubling and
  // shared_memory, reduce_scatter/recursive_halving and shared_memory, alltoall/pairwise.
  EXPECT_EQ(rows_with_blocking_form, 19);
}

INSTANTIATE_TEST_SUITE_P(P1to9, SimBlockingForms, ::testing::Range(1, 10));

}  // namespace
