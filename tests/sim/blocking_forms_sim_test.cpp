// The latency path's blocking forms against their schedules: for every registry row that has
// one, on simulated ranks (the blocking form on a thread per rank), every rank posts the same
// messages in the same order with the same tags and lengths, and gets bitwise the same result.
// Ranks of one call may take different paths (one alone in the process, another not), so the
// two forms must stay interchangeable.
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

// What one form of the call leaves behind: every rank's output and postings.
struct Outcome {
  std::vector<Bytes> outputs;
  std::vector<std::vector<SimWorld::Posting>> postings;
};

Bytes pattern(DataType type, int rank, std::size_t count) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, 0);
  return b;
}

// Runs one call of `row` with `count` elements from `root`, as the schedule (blocking ==
// false) or as the blocking form.
Outcome run_form(const AlgorithmRow& row, int p, std::size_t count, int root, ReduceOp rop,
                 bool blocking) {
  const DataType type = DataType::float32;
  SimWorld world(p, 512, 0);
  world.clear_postings();
  std::vector<Bytes> in(p), out(p);
  for (int r = 0; r < p; ++r) {
    in[r] = pattern(type, r, count);
    // A broadcast works in place: the root's buffer holds the data, the others' are zero.
    out[r] = row.collective == Collective::broadcast && r == root ? in[r] : Bytes(in[r].size());
  }
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
        default:
          FAIL() << "a blocking form for " << collx::to_string(row.collective)
                 << ": add it to this test";
      }
      if (!ran) throw std::runtime_error("the blocking form declined a call it should run");
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
        default:
          return barrier_task(op, BarrierArgs{}, row.algorithm);
      }
    });
  }
  Outcome o;
  o.outputs = out;
  o.postings = world.postings();
  o.postings.resize(static_cast<std::size_t>(p));
  return o;
}

class SimBlockingForms : public ::testing::TestWithParam<int> {};

TEST_P(SimBlockingForms, PostTheSameMessagesAndGiveTheSameBitsAsTheirSchedules) {
  const int p = GetParam();
  int rows_with_blocking_form = 0;
  for (const AlgorithmRow& row : registry()) {
    if (row.blocking == nullptr) continue;
    ++rows_with_blocking_form;
    const bool rooted =
        row.collective == Collective::broadcast || row.collective == Collective::reduce;
    const std::vector<std::size_t> counts =
        row.collective == Collective::barrier
            ? std::vector<std::size_t>{0}
            : std::vector<std::size_t>{0, 1, 3, static_cast<std::size_t>(p) + 1, 255, 256};
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
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(blocking.postings[r], schedule.postings[r]) << what << " rank " << r;
            // The output of a reduce is significant at the root only.
            if (row.collective == Collective::reduce && r != root) continue;
            ASSERT_EQ(blocking.outputs[r], schedule.outputs[r]) << what << " rank " << r;
          }
        }
      }
    }
  }
  // allreduce/recursive_doubling, broadcast/binomial_tree and pipelined_chain,
  // reduce/binomial_tree, barrier/dissemination.
  EXPECT_EQ(rows_with_blocking_form, 5);
}

INSTANTIATE_TEST_SUITE_P(P1to9, SimBlockingForms, ::testing::Range(1, 10));

}  // namespace
