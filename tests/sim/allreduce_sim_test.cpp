// Every allreduce algorithm on p = 1..33 simulated ranks in one process, with rendezvous
// sends: exact results, bitwise-identical results across ranks, no deadlock.
#include <gtest/gtest.h>

#include <bit>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "cost_model.hpp"
#include "exact_data.hpp"
#include "node_layout.hpp"
#include "sim_world.hpp"

namespace {

using collx::Algorithm;
using collx::DataType;
using collx::ReduceOp;
using collx::detail::AllreduceArgs;
using collx::detail::OpInfo;
using collx::detail::Reduction;
using collx::patterns::NodeLayout;
using collx::testing::SimWorld;

struct Pipeline {
  std::size_t segment_bytes;
  int depth;
};

// With node arenas (SimWorld::use_node_arenas): what went through them, and the messages
// between two ranks of one node (none, where every phase inside a node took its arena).
struct NodeArenaRun {
  std::uint64_t slots = 0;
  std::size_t messages_inside_nodes = 0;
};

// Places every rank of `world` by `layout`.
void place(SimWorld& world, const NodeLayout& layout) {
  const auto shared = std::make_shared<const NodeLayout>(layout);
  for (int r = 0; r < layout.size(); ++r)
    world.transport(r).set_node_layout(shared);
}

// Runs `algorithm` on the ranks of `world`, rank r's input send[r] (recv[r] where `in_place`);
// recv[r] holds its result.
void run_on(SimWorld& world, Algorithm algorithm, DataType type, ReduceOp op, std::size_t count,
            bool in_place, Pipeline pipeline, const std::vector<std::vector<std::byte>>& send,
            std::vector<std::vector<std::byte>>& recv) {
  const int p = static_cast<int>(recv.size());
  OpInfo info;
  info.collective = collx::Collective::allreduce;
  info.algorithm = algorithm;
  info.tag_base = 1;
  info.segment_bytes = pipeline.segment_bytes;
  info.pipeline_depth = pipeline.depth;
  world.run(info, [&](collx::detail::Operation& o, int r) {
    AllreduceArgs args{in_place ? recv[r].data() : send[r].data(),
                       recv[r].data(),
                       count,
                       Reduction::make(type, op, p),
                       {}};
    return collx::detail::allreduce_task(o, args, algorithm);
  });
}

// Runs one allreduce on p simulated ranks; returns every rank's output. `node_run`: with a
// layout, the nodes of more than one rank get arenas of their own, and it says what they did.
std::vector<std::vector<std::byte>> run_allreduce(
    int p, Algorithm algorithm, DataType type, ReduceOp op, std::size_t count, bool in_place,
    Pipeline pipeline, const std::vector<std::vector<std::byte>>& inputs,
    std::size_t shm_slot_bytes = 512, const NodeLayout* layout = nullptr,
    std::size_t* max_waiting_sends = nullptr, NodeArenaRun* node_run = nullptr) {
  const std::size_t bytes = count * collx::size_of(type);
  std::vector<std::vector<std::byte>> send = inputs;
  std::vector<std::vector<std::byte>> recv(p, std::vector<std::byte>(bytes, std::byte{0xAB}));
  if (in_place) recv = send;
  SimWorld world(p, shm_slot_bytes);
  if (layout != nullptr) {
    place(world, *layout);
    if (node_run != nullptr) world.use_node_arenas(*layout, shm_slot_bytes);
  }
  run_on(world, algorithm, type, op, count, in_place, pipeline, send, recv);
  if (max_waiting_sends != nullptr) *max_waiting_sends = world.max_waiting_sends();
  if (node_run != nullptr && layout != nullptr) {
    node_run->slots = world.node_arena_slots();
    // (postings() is empty where no message was posted at all.)
    for (std::size_t r = 0; r < world.postings().size(); ++r) {
      for (const auto& posting : world.postings()[r]) {
        if (posting.is_send &&
            layout->node_of(posting.peer) == layout->node_of(static_cast<int>(r))) {
          ++node_run->messages_inside_nodes;
        }
      }
    }
  }
  return recv;
}

std::vector<std::vector<std::byte>> exact_inputs(int p, DataType type, ReduceOp op,
                                                 std::size_t count) {
  std::vector<std::vector<std::byte>> inputs(p);
  for (int r = 0; r < p; ++r) {
    inputs[r].resize(count * collx::size_of(type));
    collx::verify::fill_input(inputs[r].data(), type, op, r, p, count);
  }
  return inputs;
}

std::vector<std::byte> exact_result(int p, DataType type, ReduceOp op, std::size_t count) {
  std::vector<std::byte> out(count * collx::size_of(type));
  collx::verify::fill_expected(out.data(), type, op, p, count);
  return out;
}

// Elements of `result` that differ from `expected` (bitwise).
std::size_t wrong_elements(const std::vector<std::byte>& result,
                           const std::vector<std::byte>& expected, DataType type) {
  // (An empty vector's data() may be null, which memcmp must not get even for 0 bytes.)
  if (result.size() == expected.size() &&
      (result.empty() || std::memcmp(result.data(), expected.data(), result.size()) == 0)) {
    return 0;
  }
  const std::size_t size = collx::size_of(type);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < expected.size() / size; ++i) {
    wrong += std::memcmp(result.data() + i * size, expected.data() + i * size, size) != 0;
  }
  return wrong;
}

// Every allreduce row of the registry but the node-aware ones (they have their own tests below,
// on node layouts): a row added to the registry is tested here in depth. shared_memory: through
// the simulated ranks' arena (ring slots of 512 B, so even small counts take many rounds of
// pieces).
std::vector<Algorithm> flat_algorithms() {
  std::vector<Algorithm> out;
  for (Algorithm a : collx::algorithms_of(collx::Collective::allreduce)) {
    if (!collx::model::node_aware(collx::Collective::allreduce, a)) out.push_back(a);
  }
  return out;
}
const std::vector<Algorithm> kAlgorithms = flat_algorithms();

std::string label(int p, Algorithm a, DataType t, ReduceOp o, std::size_t count, bool in_place,
                  Pipeline pl) {
  return "p=" + std::to_string(p) + " " + std::string(collx::to_string(a)) + " " +
         std::string(collx::to_string(t)) + " " + std::string(collx::to_string(o)) +
         " count=" + std::to_string(count) + (in_place ? " in-place" : "") +
         " segment=" + std::to_string(pl.segment_bytes) + " depth=" + std::to_string(pl.depth);
}

class SimAllreduce : public ::testing::TestWithParam<int> {};

// The matrix: p = 1..33, counts 0, 1, p-1, p+1 and 1000003, every algorithm.
TEST_P(SimAllreduce, ExactForEveryAlgorithmAndCount) {
  const int p = GetParam();
  const std::size_t counts[] = {0, 1, static_cast<std::size_t>(p - 1),
                                static_cast<std::size_t>(p + 1), 1000003};
  for (Algorithm algorithm : kAlgorithms) {
    for (std::size_t count : counts) {
      const Pipeline pipeline{256 << 10, 4};
      const bool in_place = count % 2 == 1;
      const auto inputs = exact_inputs(p, DataType::float32, ReduceOp::sum, count);
      // The arena's pieces for the large count in slots of 64 KiB (in 512 B ones the run
      // takes 100 times as many rounds).
      const auto out = run_allreduce(p, algorithm, DataType::float32, ReduceOp::sum, count,
                                     in_place, pipeline, inputs, count > 1000 ? 64 << 10 : 512);
      const auto expected = exact_result(p, DataType::float32, ReduceOp::sum, count);
      for (int r = 0; r < p; ++r) {
        ASSERT_EQ(wrong_elements(out[r], expected, DataType::float32), 0u)
            << label(p, algorithm, DataType::float32, ReduceOp::sum, count, in_place, pipeline)
            << " rank " << r;
      }
    }
  }
}

// Small segments and several depths exercise the pipelines' windows and hazards; every
// type and op, in place and not.
class SimAllreduceTypes : public ::testing::TestWithParam<int> {};

TEST_P(SimAllreduceTypes, EveryTypeAndOpWithSmallSegments) {
  const int p = GetParam();
  for (Algorithm algorithm : kAlgorithms) {
    for (int t = 0; t < collx::kDataTypeCount; ++t) {
      for (int o = 0; o < collx::kReduceOpCount; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (!collx::is_supported(type, op)) continue;
        for (Pipeline pipeline : {Pipeline{64, 1}, Pipeline{48, 3}}) {
          for (bool in_place : {false, true}) {
            const std::size_t count = static_cast<std::size_t>(7 * p + 5 + t);
            const auto inputs = exact_inputs(p, type, op, count);
            const auto out =
                run_allreduce(p, algorithm, type, op, count, in_place, pipeline, inputs);
            const auto expected = exact_result(p, type, op, count);
            for (int r = 0; r < p; ++r) {
              ASSERT_EQ(wrong_elements(out[r], expected, type), 0u)
                  << label(p, algorithm, type, op, count, in_place, pipeline) << " rank " << r;
            }
          }
        }
      }
    }
  }
}

// Real-valued random floats: sums depend on the combining order, so only a canonical order
// gives every rank the same bits.
TEST_P(SimAllreduce, BitwiseIdenticalAcrossRanksForRandomFloats) {
  const int p = GetParam();
  for (Algorithm algorithm : kAlgorithms) {
    for (DataType type :
         {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod}) {
        const std::size_t count = 1000 + static_cast<std::size_t>(p);
        std::mt19937 rng(static_cast<unsigned>(p * 131 + static_cast<int>(type)));
        std::uniform_real_distribution<float> dist(0.5f, 1.5f);
        std::vector<std::vector<std::byte>> inputs(p);
        for (int r = 0; r < p; ++r) {
          inputs[r].resize(count * collx::size_of(type));
          for (std::size_t i = 0; i < count; ++i) {
            const float v = dist(rng);
            std::byte* at = inputs[r].data() + i * collx::size_of(type);
            switch (type) {
              case DataType::float32:
                std::memcpy(at, &v, 4);
                break;
              case DataType::float64: {
                const double d = static_cast<double>(v) * (1 + 1e-9 * r);
                std::memcpy(at, &d, 8);
                break;
              }
              case DataType::float16: {
                const collx::float16 h(v);
                std::memcpy(at, &h, 2);
                break;
              }
              default: {
                const collx::bfloat16 h(v);
                std::memcpy(at, &h, 2);
                break;
              }
            }
          }
        }
        const Pipeline pipeline{512, 2};
        const auto out = run_allreduce(p, algorithm, type, op, count, false, pipeline, inputs);
        for (int r = 1; r < p; ++r) {
          ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), out[0].size()), 0)
              << label(p, algorithm, type, op, count, false, pipeline) << ": rank " << r
              << " differs from rank 0";
        }
      }
    }
  }
}

// A ring slot too small for one element per rank (16 B for 5 ranks of float64): the arena's
// allreduce runs the ring instead, and is still exact, in place or not.
TEST(SimAllreduceSharedMemory, SlotsTooSmallForAPieceFallBackToTheRing) {
  const int p = 5;
  for (bool in_place : {false, true}) {
    const std::size_t count = 37;
    const auto inputs = exact_inputs(p, DataType::float64, ReduceOp::sum, count);
    const auto out = run_allreduce(p, Algorithm::shared_memory, DataType::float64, ReduceOp::sum,
                                   count, in_place, Pipeline{64, 2}, inputs, 16);
    const auto expected = exact_result(p, DataType::float64, ReduceOp::sum, count);
    for (int r = 0; r < p; ++r)
      ASSERT_EQ(wrong_elements(out[r], expected, DataType::float64), 0u) << "rank " << r;
  }
}

// The ring's sends run at most `depth` segments ahead of the receives on its link (issue 13,
// case 1): with a whole step of sends posted early instead, a 1 GiB allreduce left thousands of
// rendezvous sends unmatched at the peer, and Open MPI stalled one rank for seconds. A rank's
// receives wait on its predecessor only, so around a ring of p a sender may lead its successor by
// up to (p - 1) x depth segments.
TEST(SimAllreduceRing, SendsStayWithinThePipelineDepthOfThePeersReceives) {
  for (int p : {2, 3, 4, 5}) {
    for (int depth : {1, 2, 4}) {
      const std::size_t count = 64 * 16 * static_cast<std::size_t>(p) + 3;  // ~64 segments
      const Pipeline pipeline{64, depth};
      const auto inputs = exact_inputs(p, DataType::float32, ReduceOp::sum, count);
      std::size_t waiting = 0;
      const auto out = run_allreduce(p, Algorithm::ring, DataType::float32, ReduceOp::sum, count,
                                     false, pipeline, inputs, 512, nullptr, &waiting);
      const auto expected = exact_result(p, DataType::float32, ReduceOp::sum, count);
      for (int r = 0; r < p; ++r)
        ASSERT_EQ(wrong_elements(out[r], expected, DataType::float32), 0u) << "rank " << r;
      EXPECT_LE(waiting, static_cast<std::size_t>((p - 1) * depth))
          << "p=" << p << " depth=" << depth;
    }
  }
}

// ---- the node-aware algorithms on simulated node layouts ----
// Each simulated rank's transport holds the layout, as a communicator's does: the schedules'
// groups (a node's ranks, the leaders, the ranks of one local rank) run on the simulated ranks.
struct LayoutCase {
  const char* name;
  std::vector<int> sizes;
};
const LayoutCase kLayouts[] = {
    {"1x1", {1}},
    {"1x3", {3}},
    {"2x1", {1, 1}},
    {"4x1", {1, 1, 1, 1}},
    {"2x2", {2, 2}},
    {"3,1", {3, 1}},
    {"1,3", {1, 3}},
    {"2x3", {3, 3}},
    {"3x2", {2, 2, 2}},
    {"1,2,3", {1, 2, 3}},
    {"5,3,8,1", {5, 3, 8, 1}},
    {"3x5", {5, 5, 5}},
    {"4x4", {4, 4, 4, 4}},
    {"8x8", {8, 8, 8, 8, 8, 8, 8, 8}},
    {"7x1,2", {1, 1, 1, 1, 1, 1, 1, 2}},
};
const Algorithm kNodeAware[] = {Algorithm::hierarchical, Algorithm::multi_leader};

class SimNodeAware : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(SimNodeAware, ExactForEveryCount) {
  const NodeLayout layout = NodeLayout::from_sizes(GetParam().sizes);
  const int p = layout.size();
  const std::size_t counts[] = {0,
                                1,
                                static_cast<std::size_t>(p - 1),
                                static_cast<std::size_t>(p + 1),
                                1003,
                                p <= 16 ? std::size_t{100003} : std::size_t{10007}};
  for (Algorithm algorithm : kNodeAware) {
    for (std::size_t count : counts) {
      for (Pipeline pipeline : {Pipeline{256 << 10, 4}, Pipeline{64, 2}}) {
        if (pipeline.segment_bytes < 1024 && count > 2000) continue;
        for (bool node_arenas : {false, true}) {
          const bool in_place = count % 2 == 1;
          const auto inputs = exact_inputs(p, DataType::float32, ReduceOp::sum, count);
          NodeArenaRun node_run;
          const auto out = run_allreduce(p, algorithm, DataType::float32, ReduceOp::sum, count,
                                         in_place, pipeline, inputs, count > 2000 ? 16 << 10 : 512,
                                         &layout, nullptr, node_arenas ? &node_run : nullptr);
          const auto expected = exact_result(p, DataType::float32, ReduceOp::sum, count);
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(wrong_elements(out[r], expected, DataType::float32), 0u)
                << GetParam().name << " "
                << label(p, algorithm, DataType::float32, ReduceOp::sum, count, in_place, pipeline)
                << (node_arenas ? " node arenas" : "") << " rank " << r;
          }
          // Through the node arenas, no message stays inside a node (a phase that fell back to
          // messages would send some); a layout with a node of several ranks uses them.
          if (node_arenas && layout.hierarchical() && count > 0) {
            EXPECT_EQ(node_run.messages_inside_nodes, 0u)
                << GetParam().name << " " << collx::to_string(algorithm) << " count=" << count;
            EXPECT_GT(node_run.slots, 0u)
                << GetParam().name << " " << collx::to_string(algorithm) << " count=" << count;
          }
        }
      }
    }
  }
}

TEST_P(SimNodeAware, EveryTypeAndOp) {
  const NodeLayout layout = NodeLayout::from_sizes(GetParam().sizes);
  const int p = layout.size();
  if (p > 16) GTEST_SKIP() << "the type x op matrix runs on layouts of up to 16 ranks";
  for (Algorithm algorithm : kNodeAware) {
    for (int t = 0; t < collx::kDataTypeCount; ++t) {
      for (int o = 0; o < collx::kReduceOpCount; ++o) {
        const auto type = static_cast<DataType>(t);
        const auto op = static_cast<ReduceOp>(o);
        if (!collx::is_supported(type, op)) continue;
        const std::size_t count = static_cast<std::size_t>(7 * p + 5 + t);
        const bool in_place = (t + o) % 2 == 0;
        const Pipeline pipeline{48, 3};
        const auto inputs = exact_inputs(p, type, op, count);
        const auto expected = exact_result(p, type, op, count);
        for (bool node_arenas : {false, true}) {
          NodeArenaRun node_run;
          const auto out = run_allreduce(p, algorithm, type, op, count, in_place, pipeline, inputs,
                                         512, &layout, nullptr, node_arenas ? &node_run : nullptr);
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(wrong_elements(out[r], expected, type), 0u)
                << GetParam().name << " "
                << label(p, algorithm, type, op, count, in_place, pipeline)
                << (node_arenas ? " node arenas" : "") << " rank " << r;
          }
        }
      }
    }
  }
}

// Real-valued random floats: the node-aware orders differ from the flat ones, but every rank
// of one call must get the same bits.
TEST_P(SimNodeAware, BitwiseIdenticalAcrossRanksForRandomFloats) {
  const NodeLayout layout = NodeLayout::from_sizes(GetParam().sizes);
  const int p = layout.size();
  for (Algorithm algorithm : kNodeAware) {
    for (DataType type : {DataType::float32, DataType::float64, DataType::bfloat16}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        const std::size_t count = 1000 + static_cast<std::size_t>(p);
        std::mt19937 rng(static_cast<unsigned>(p * 31 + static_cast<int>(type)));
        std::uniform_real_distribution<float> dist(0.5f, 1.5f);
        std::vector<std::vector<std::byte>> inputs(p);
        for (int r = 0; r < p; ++r) {
          inputs[r].resize(count * collx::size_of(type));
          for (std::size_t i = 0; i < count; ++i) {
            const float v = dist(rng);
            std::byte* at = inputs[r].data() + i * collx::size_of(type);
            if (type == DataType::float32) {
              std::memcpy(at, &v, 4);
            } else if (type == DataType::float64) {
              const double d = static_cast<double>(v) * (1 + 1e-9 * r);
              std::memcpy(at, &d, 8);
            } else {
              const collx::bfloat16 h(v);
              std::memcpy(at, &h, 2);
            }
          }
        }
        const Pipeline pipeline{512, 2};
        for (bool node_arenas : {false, true}) {
          NodeArenaRun node_run;
          const auto out = run_allreduce(p, algorithm, type, op, count, false, pipeline, inputs,
                                         512, &layout, nullptr, node_arenas ? &node_run : nullptr);
          for (int r = 1; r < p; ++r) {
            ASSERT_EQ(std::memcmp(out[r].data(), out[0].data(), out[0].size()), 0)
                << GetParam().name << " " << label(p, algorithm, type, op, count, false, pipeline)
                << (node_arenas ? " node arenas" : "") << ": rank " << r << " differs from rank 0";
          }
        }
      }
    }
  }
}

// On 2, 4 or 8 nodes the node-aware allreduces pipeline the buffer in node segments, the exchanges
// of some node segments across the nodes in flight while the node's ranks run their phases on the
// next and on the ones before (multi_leader: every rank carries a block across; hierarchical: the
// leaders carry the node segment, any layout; multi_leader runs it on nodes of different sizes). In
// the postings of a rank that both crosses the network
// and has a node of several ranks, the messages across nodes and those inside its node then
// alternate (the unpipelined schedules post them in three runs: inside, across, inside); exact
// results on every rank.
// Runs `algorithm` on simulated ranks placed by `layout` (node segments of `segment_bytes`, two
// in flight); recv[r] holds rank r's result.
void allreduce_on_nodes(SimWorld& world, const NodeLayout& layout, Algorithm algorithm,
                        std::size_t segment_bytes, DataType type, ReduceOp rop, std::size_t count,
                        bool in_place, const std::vector<std::vector<std::byte>>& inputs,
                        std::vector<std::vector<std::byte>>& recv) {
  place(world, layout);
  run_on(world, algorithm, type, rop, count, in_place, {segment_bytes, 2}, inputs, recv);
}

// How many runs of messages inside its node and across nodes rank r posted, alternately.
int phase_runs(const SimWorld& world, const NodeLayout& layout, int r) {
  int runs = 0;
  bool last_across = false;
  for (const auto& posting : world.postings()[static_cast<std::size_t>(r)]) {
    const bool across = layout.node_of(posting.peer) != layout.node_of(r);
    if (runs == 0 || across != last_across) ++runs;
    last_across = across;
  }
  return runs;
}

TEST(SimNodeAwarePipelined, NodeAndNetworkPhasesInterleave) {
  const std::vector<std::vector<int>> layouts = {
      {2, 2}, {3, 3}, {2, 2, 2, 2}, {3, 3, 3, 3}, std::vector<int>(8, 2), {3, 1}, {1, 3, 2, 2}};
  for (Algorithm algorithm : {Algorithm::multi_leader, Algorithm::hierarchical}) {
    for (const std::vector<int>& sizes : layouts) {
      const NodeLayout layout = NodeLayout::from_sizes(sizes);
      const int p = layout.size();
      for (int t = 0; t < collx::kDataTypeCount; ++t) {
        for (int o = 0; o < collx::kReduceOpCount; ++o) {
          const auto type = static_cast<DataType>(t);
          const auto rop = static_cast<ReduceOp>(o);
          if (!collx::is_supported(type, rop)) continue;
          const std::size_t elem = collx::size_of(type);
          const std::size_t count = 4001;
          const bool in_place = (t + o) % 2 == 0;
          const auto inputs = exact_inputs(p, type, rop, count);
          std::vector<std::vector<std::byte>> recv(p, std::vector<std::byte>(count * elem));
          if (in_place) recv = inputs;
          SimWorld world(p, 512, 0);
          // Node segments of count / 8 elements (more than four segments per share): 9 here.
          allreduce_on_nodes(world, layout, algorithm, 16 * elem, type, rop, count, in_place,
                             inputs, recv);
          const auto expected = exact_result(p, type, rop, count);
          const std::string what =
              std::string(collx::to_string(algorithm)) + " p=" + std::to_string(p) + " layout " +
              std::to_string(sizes[0]) + "... (" + std::to_string(sizes.size()) + " nodes) " +
              std::string(collx::to_string(type)) + " " + std::string(collx::to_string(rop)) +
              (in_place ? " in place" : "");
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(wrong_elements(recv[r], expected, type), 0u) << what << " rank " << r;
            // multi_leader on nodes of different sizes runs hierarchical.
            const bool crosses = (algorithm == Algorithm::multi_leader && layout.uniform()) ||
                                 layout.local_rank(r) == 0;
            if (!crosses || layout.ranks_on(layout.node_of(r)) < 2) continue;
            EXPECT_GT(phase_runs(world, layout, r), 6)
                << what << " rank " << r << ": the node and network phases do not alternate";
          }
        }
      }
    }
  }
}

// On 8 nodes and more (model::kManyNodes) multi_leader cuts a buffer of up to four segments per
// carrier into 8 node segments, and where a rank's block of one is a segment or less its node
// phases are the butterfly and recursive doubling; on 8 or more nodes that are not a power of
// two it runs the flat allreduce at those sizes. Exact on every rank, for several types and ops,
// in place or not; on 2^L nodes the node and network phases alternate.
TEST(SimNodeAwarePipelined, ManyNodesSmallBuffers) {
  const std::vector<std::vector<int>> layouts = {std::vector<int>(8, 2), std::vector<int>(8, 4),
                                                 std::vector<int>(16, 2), std::vector<int>(8, 3),
                                                 std::vector<int>(12, 2)};
  const std::pair<DataType, ReduceOp> cases[] = {{DataType::float32, ReduceOp::sum},
                                                 {DataType::int64, ReduceOp::avg},
                                                 {DataType::uint8, ReduceOp::max},
                                                 {DataType::float16, ReduceOp::prod}};
  for (const std::vector<int>& sizes : layouts) {
    const NodeLayout layout = NodeLayout::from_sizes(sizes);
    const int p = layout.size();
    for (auto [type, rop] : cases) {
      if (!collx::is_supported(type, rop)) continue;
      for (bool in_place : {false, true}) {
        const std::size_t elem = collx::size_of(type);
        // 8 node segments of count / 8 elements: four 1 KiB segments per carrier hold the buffer.
        const std::size_t count = 4 * 1024 * static_cast<std::size_t>(sizes[0]) / elem - 3;
        const auto inputs = exact_inputs(p, type, rop, count);
        std::vector<std::vector<std::byte>> recv(p, std::vector<std::byte>(count * elem));
        if (in_place) recv = inputs;
        SimWorld world(p, 512, 0);
        allreduce_on_nodes(world, layout, Algorithm::multi_leader, 1024, type, rop, count, in_place,
                           inputs, recv);
        const auto expected = exact_result(p, type, rop, count);
        const std::string what = "multi_leader p=" + std::to_string(p) + " (" +
                                 std::to_string(sizes.size()) + " nodes) " +
                                 std::string(collx::to_string(type)) + " " +
                                 std::string(collx::to_string(rop)) + (in_place ? " in place" : "");
        const bool pipelined = std::has_single_bit(sizes.size());
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(wrong_elements(recv[r], expected, type), 0u) << what << " rank " << r;
          if (!pipelined) continue;
          EXPECT_GT(phase_runs(world, layout, r), 6)
              << what << " rank " << r << ": the node and network phases do not alternate";
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SimNodeAware, ::testing::ValuesIn(kLayouts),
                         [](const ::testing::TestParamInfo<LayoutCase>& info) {
                           std::string name = info.param.name;
                           for (char& c : name)
                             if (c == ',') c = '_';
                           return name;
                         });

INSTANTIATE_TEST_SUITE_P(P1to33, SimAllreduce, ::testing::Range(1, 34));
// The type x op x pipeline matrix on every size up to 12 and two larger odd ones.
INSTANTIATE_TEST_SUITE_P(Sizes, SimAllreduceTypes,
                         ::testing::Values(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 17, 33));

}  // namespace
