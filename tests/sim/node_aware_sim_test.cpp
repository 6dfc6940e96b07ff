// The node-aware broadcast, reduce, allgather and reduce_scatter (the `hierarchical` rows) on
// simulated node layouts up to 8 nodes x 8 ranks, uneven and interleaved ones too: exact results
// for every root, count, in-place form and pipeline, and the bytes that cross between nodes
// (a split that silently fell back to a flat algorithm would move more).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "exact_data.hpp"
#include "node_layout.hpp"
#include "sim_world.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using namespace collx::detail;
using collx::patterns::NodeLayout;
using collx::testing::SimWorld;
using Bytes = std::vector<std::byte>;

struct Pipeline {
  std::size_t segment_bytes;
  int depth;
};
const Pipeline kPipelines[] = {{256 << 10, 4}, {64, 3}};

// keys[r]: rank r's node (NodeLayout::from_keys), so that interleaved placements (mpirun
// --map-by node) are covered as well as blocks.
struct LayoutCase {
  const char* name;
  std::vector<int> keys;
};

std::vector<int> blocks_of(std::vector<int> sizes) {
  std::vector<int> keys;
  for (std::size_t j = 0; j < sizes.size(); ++j)
    keys.insert(keys.end(), static_cast<std::size_t>(sizes[j]), static_cast<int>(j));
  return keys;
}
std::vector<int> round_robin(int nodes, int per_node) {
  std::vector<int> keys;
  for (int i = 0; i < nodes * per_node; ++i)
    keys.push_back(i % nodes);
  return keys;
}

const LayoutCase kLayouts[] = {
    {"1x1", blocks_of({1})},
    {"1x4", blocks_of({4})},
    {"3x1", blocks_of({1, 1, 1})},
    {"2x2", blocks_of({2, 2})},
    {"2x2_by_node", round_robin(2, 2)},
    {"3_1", blocks_of({3, 1})},
    {"1_3", blocks_of({1, 3})},
    {"2x3", blocks_of({3, 3})},
    {"3x2_by_node", round_robin(3, 2)},
    {"1_2_3", blocks_of({1, 2, 3})},
    {"5_3_8_1", blocks_of({5, 3, 8, 1})},
    {"3x5", blocks_of({5, 5, 5})},
    {"4x4", blocks_of({4, 4, 4, 4})},
    {"4x4_by_node", round_robin(4, 4)},
    {"8x8", blocks_of({8, 8, 8, 8, 8, 8, 8, 8})},
    {"7x1_2", blocks_of({1, 1, 1, 1, 1, 1, 1, 2})},
};

OpInfo info_for(Collective c, Pipeline pl) {
  OpInfo info;
  info.collective = c;
  info.algorithm = Algorithm::hierarchical;
  info.tag_base = 1;
  info.segment_bytes = pl.segment_bytes;
  info.pipeline_depth = pl.depth;
  return info;
}

// No arena of the whole world: the ranks are on different nodes. `node_arenas`: each node of
// several ranks has one of its own (slots of 512 B, so the phases inside a node take many).
std::unique_ptr<SimWorld> world_for(const NodeLayout& layout, bool node_arenas) {
  auto world = std::make_unique<SimWorld>(layout.size(), 512, 0);
  const auto shared = std::make_shared<const NodeLayout>(layout);
  for (int r = 0; r < layout.size(); ++r)
    world->transport(r).set_node_layout(shared);
  if (node_arenas) world->use_node_arenas(layout);
  return world;
}

// Messages sent between two ranks of one node.
std::size_t messages_inside_nodes(const SimWorld& world, const NodeLayout& layout) {
  std::size_t n = 0;
  for (std::size_t r = 0; r < world.postings().size(); ++r) {
    for (const auto& p : world.postings()[r])
      n += p.is_send && layout.node_of(p.peer) == layout.node_of(static_cast<int>(r)) ? 1 : 0;
  }
  return n;
}

// The bytes every rank sent to a rank on another node.
std::size_t bytes_across(const SimWorld& world, const NodeLayout& layout) {
  std::size_t total = 0;
  for (int r = 0; r < world.size(); ++r) {
    for (const auto& p : world.postings()[static_cast<std::size_t>(r)]) {
      if (p.is_send && layout.node_of(p.peer) != layout.node_of(r)) total += p.bytes;
    }
  }
  return total;
}

Bytes pattern(DataType type, int rank, std::size_t count, std::size_t first = 0) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, first);
  return b;
}

std::vector<int> roots_for(const NodeLayout& layout) {
  const int p = layout.size();
  if (p <= 8) {
    std::vector<int> all(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r)
      all[static_cast<std::size_t>(r)] = r;
    return all;
  }
  // First, a leader, a rank that leads no node, the last.
  return {0, layout.leaders().back(), layout.members(0).back(), p - 1};
}

std::vector<std::size_t> counts_for(int p) {
  return {0, 1, static_cast<std::size_t>(2 * p + 1), 1001};
}

// Block lengths: equal, or random per rank (some zero).
std::vector<std::size_t> offsets_for(int p, std::size_t count, bool uneven, std::mt19937& rng) {
  std::vector<std::size_t> offsets = equal_offsets(count, p);
  if (uneven) {
    for (int r = 0; r < p; ++r)
      offsets[r + 1] = offsets[r] + (rng() % 3 == 0 ? 0 : rng() % (count + 2));
  }
  return offsets;
}

std::string what(const char* layout, Collective c, DataType t, std::size_t count, int root,
                 bool in_place, Pipeline pl) {
  return std::string(layout) + " " + std::string(collx::to_string(c)) + " " +
         std::string(collx::to_string(t)) + " count=" + std::to_string(count) +
         " root=" + std::to_string(root) + (in_place ? " in-place" : "") +
         " segment=" + std::to_string(pl.segment_bytes);
}

// With and without node arenas (the phases inside a node through them, or as messages).
class SimNodeAwareCollectives : public ::testing::TestWithParam<std::tuple<LayoutCase, bool>> {
 protected:
  NodeLayout layout() const { return NodeLayout::from_keys(std::get<0>(GetParam()).keys); }
  bool node_arenas() const { return std::get<1>(GetParam()); }
  std::string name() const {
    return std::string(std::get<0>(GetParam()).name) + (node_arenas() ? " node arenas" : "");
  }
  std::unique_ptr<SimWorld> world(const NodeLayout& l) const { return world_for(l, node_arenas()); }
  // Through the node arenas, a schedule that splits by node sends no message inside a node
  // (allgather and reduce_scatter split only where every node has as many ranks).
  void expect_no_messages_inside_nodes(const SimWorld& w, const NodeLayout& l, Collective c,
                                       std::size_t bytes) const {
    const bool splits =
        l.hierarchical() && (l.uniform() || c == Collective::broadcast || c == Collective::reduce);
    if (!node_arenas() || !splits || bytes == 0) return;
    EXPECT_EQ(messages_inside_nodes(w, l), 0u) << name() << " " << collx::to_string(c);
  }
};

// One rank's reduce to `root` by `algorithm` (a node-aware one: the ring inside its phases).
collx::detail::Task reduce_by(Operation& op, const std::byte* send, std::byte* recv,
                              std::size_t count, const Reduction& reduction, int root,
                              Algorithm algorithm) {
  return reduce_task(op, {send, recv, count, reduction, root, {}, Algorithm::ring}, algorithm);
}

TEST_P(SimNodeAwareCollectives, Broadcast) {
  const NodeLayout l = layout();
  const int p = l.size();
  for (Pipeline pl : kPipelines) {
    for (std::size_t count : counts_for(p)) {
      for (int root : roots_for(l)) {
        const DataType type = DataType::int8;
        std::vector<Bytes> buf(p, Bytes(count, std::byte{0x77}));
        buf[root] = pattern(type, root, count);
        auto world = this->world(l);
        world->run(info_for(Collective::broadcast, pl), [&](Operation& op, int r) {
          return broadcast_task(op, {buf[r].data(), count, 1, root, {}}, Algorithm::hierarchical);
        });
        expect_no_messages_inside_nodes(*world, l, Collective::broadcast, count);
        const Bytes expected = pattern(type, root, count);
        for (int r = 0; r < p; ++r) {
          ASSERT_EQ(buf[r], expected)
              << what(name().c_str(), Collective::broadcast, type, count, root, false, pl)
              << " rank " << r;
        }
      }
    }
  }
}

TEST_P(SimNodeAwareCollectives, Reduce) {
  const NodeLayout l = layout();
  const int p = l.size();
  for (Pipeline pl : kPipelines) {
    for (std::size_t count : counts_for(p)) {
      for (int root : roots_for(l)) {
        for (auto [type, rop] : {std::pair{DataType::int32, ReduceOp::sum},
                                 std::pair{DataType::float32, ReduceOp::avg},
                                 std::pair{DataType::bfloat16, ReduceOp::max}}) {
          for (bool in_place : {false, true}) {
            const std::size_t bytes = count * collx::size_of(type);
            std::vector<Bytes> send(p, Bytes(bytes)), recv(p, Bytes(bytes, std::byte{0x55}));
            for (int r = 0; r < p; ++r)
              collx::verify::fill_input(send[r].data(), type, rop, r, p, count);
            if (in_place) recv[root] = send[root];
            auto world = this->world(l);
            world->run(info_for(Collective::reduce, pl), [&](Operation& op, int r) {
              const std::byte* s = in_place && r == root ? recv[r].data() : send[r].data();
              return reduce_by(op, s, recv[r].data(), count, Reduction::make(type, rop, p), root,
                               Algorithm::hierarchical);
            });
            expect_no_messages_inside_nodes(*world, l, Collective::reduce, bytes);
            Bytes expected(bytes);
            collx::verify::fill_expected(expected.data(), type, rop, p, count);
            ASSERT_EQ(recv[root], expected)
                << what(name().c_str(), Collective::reduce, type, count, root, in_place, pl);
          }
        }
      }
    }
  }
}

TEST_P(SimNodeAwareCollectives, Allgather) {
  const NodeLayout l = layout();
  const int p = l.size();
  std::mt19937 rng(static_cast<unsigned>(p));
  for (Pipeline pl : kPipelines) {
    for (std::size_t count : counts_for(p)) {
      for (bool uneven : {false, true}) {
        const std::vector<std::size_t> offsets = offsets_for(p, count, uneven, rng);
        for (bool in_place : {false, true}) {
          const DataType type = DataType::float64;
          const std::size_t total = offsets.back() * 8;
          std::vector<Bytes> send(p), recv(p, Bytes(total, std::byte{0x33}));
          Bytes expected;
          for (int r = 0; r < p; ++r) {
            const std::size_t n = offsets[r + 1] - offsets[r];
            send[r] = pattern(type, r, n);
            expected.insert(expected.end(), send[r].begin(), send[r].end());
            if (in_place && n > 0)
              std::memcpy(recv[r].data() + offsets[r] * 8, send[r].data(), n * 8);
          }
          auto world = this->world(l);
          world->run(info_for(Collective::allgather, pl), [&](Operation& op, int r) {
            return allgather_task(
                op, {in_place ? nullptr : send[r].data(), recv[r].data(), offsets, 8, {}},
                Algorithm::hierarchical);
          });
          expect_no_messages_inside_nodes(*world, l, Collective::allgather, total);
          for (int r = 0; r < p; ++r) {
            ASSERT_EQ(recv[r], expected)
                << what(name().c_str(), Collective::allgather, type, count, -1, in_place, pl)
                << (uneven ? " uneven" : "") << " rank " << r;
          }
        }
      }
    }
  }
}

TEST_P(SimNodeAwareCollectives, ReduceScatter) {
  const NodeLayout l = layout();
  const int p = l.size();
  std::mt19937 rng(static_cast<unsigned>(p) + 7);
  for (Pipeline pl : kPipelines) {
    for (std::size_t count : counts_for(p)) {
      for (bool uneven : {false, true}) {
        const std::vector<std::size_t> offsets = offsets_for(p, count, uneven, rng);
        for (auto [type, rop] : {std::pair{DataType::int64, ReduceOp::sum},
                                 std::pair{DataType::float16, ReduceOp::avg},
                                 std::pair{DataType::uint8, ReduceOp::prod}}) {
          for (bool in_place : {false, true}) {
            const std::size_t elem = collx::size_of(type);
            const std::size_t total = offsets.back();
            std::vector<Bytes> send(p, Bytes(total * elem)), recv(p);
            for (int r = 0; r < p; ++r) {
              collx::verify::fill_input(send[r].data(), type, rop, r, p, total);
              recv[r].assign((offsets[r + 1] - offsets[r]) * elem, std::byte{0x11});
            }
            auto world = this->world(l);
            world->run(info_for(Collective::reduce_scatter, pl), [&](Operation& op, int r) {
              std::byte* out = in_place ? send[r].data() : recv[r].data();
              return reduce_scatter_task(
                  op, {send[r].data(), out, offsets, Reduction::make(type, rop, p), {}},
                  Algorithm::hierarchical);
            });
            expect_no_messages_inside_nodes(*world, l, Collective::reduce_scatter, total * elem);
            for (int r = 0; r < p; ++r) {
              const std::size_t n = offsets[r + 1] - offsets[r];
              Bytes expected(n * elem);
              collx::verify::fill_expected(expected.data(), type, rop, p, n, offsets[r]);
              Bytes got(send[r].begin(), send[r].begin() + static_cast<std::ptrdiff_t>(n * elem));
              if (!in_place) got = recv[r];
              ASSERT_EQ(got, expected)
                  << what(name().c_str(), Collective::reduce_scatter, type, count, -1, in_place, pl)
                  << (uneven ? " uneven" : "") << " rank " << r;
            }
          }
        }
      }
    }
  }
}

// Where the layout splits, the buffer crosses into every other node once (broadcast, reduce:
// the binomial tree across nodes below 64 KiB) and each block leaves its node once toward each
// other node (allgather, as many ranks on every node): (nodes - 1) x the buffer in all.
TEST_P(SimNodeAwareCollectives, BytesAcrossNodes) {
  const NodeLayout l = layout();
  const int p = l.size();
  if (!l.hierarchical()) GTEST_SKIP() << "one node or one rank per node: the flat algorithms run";
  const std::size_t count = 64 * static_cast<std::size_t>(p);
  const auto nodes = static_cast<std::size_t>(l.nodes());
  const Pipeline pl{256 << 10, 4};
  for (int root : roots_for(l)) {
    std::vector<Bytes> buf(p, Bytes(count));
    auto world = this->world(l);
    world->run(info_for(Collective::broadcast, pl), [&](Operation& op, int r) {
      return broadcast_task(op, {buf[r].data(), count, 1, root, {}}, Algorithm::hierarchical);
    });
    EXPECT_EQ(bytes_across(*world, l), (nodes - 1) * count) << "broadcast root " << root;
    std::vector<Bytes> send(p, Bytes(count * 4)), recv(p, Bytes(count * 4));
    auto world2 = this->world(l);
    world2->run(info_for(Collective::reduce, pl), [&](Operation& op, int r) {
      return reduce_by(op, send[r].data(), recv[r].data(), count,
                       Reduction::make(DataType::float32, ReduceOp::sum, p), root,
                       Algorithm::hierarchical);
    });
    EXPECT_EQ(bytes_across(*world2, l), (nodes - 1) * count * 4) << "reduce root " << root;
  }
  if (l.uniform()) {
    std::vector<Bytes> recv(p, Bytes(count * static_cast<std::size_t>(p)));
    auto world = this->world(l);
    world->run(info_for(Collective::allgather, pl), [&](Operation& op, int r) {
      return allgather_task(op, {nullptr, recv[r].data(), equal_offsets(count, p), 1, {}},
                            Algorithm::hierarchical);
    });
    EXPECT_EQ(bytes_across(*world, l), (nodes - 1) * count * static_cast<std::size_t>(p));
  }
}

// The hierarchical barrier: one token up and one down per rank that leads no node, and
// dissemination among the leaders alone across nodes (ceil(log2 nodes) sends each); on one node
// or with one rank per node, dissemination on every rank.
TEST_P(SimNodeAwareCollectives, Barrier) {
  const NodeLayout l = layout();
  const int p = l.size();
  const auto rounds = [](int n) {
    int r = 0;
    while ((1 << r) < n)
      ++r;
    return static_cast<std::size_t>(r);
  };
  auto world = this->world(l);
  world->run(info_for(Collective::barrier, kPipelines[0]),
             [&](Operation& op, int) { return barrier_task(op, {}, Algorithm::hierarchical); });
  std::size_t sends = 0;
  for (const auto& postings : world->postings()) {
    for (const auto& posting : postings)
      sends += posting.is_send ? 1 : 0;
  }
  const auto nodes = static_cast<std::size_t>(l.nodes());
  if (!l.hierarchical()) {
    EXPECT_EQ(sends, static_cast<std::size_t>(p) * rounds(p)) << name();
    return;
  }
  const std::size_t inside = messages_inside_nodes(*world, l);
  EXPECT_EQ(inside, 2 * (static_cast<std::size_t>(p) - nodes)) << name();
  EXPECT_EQ(sends - inside, nodes * rounds(l.nodes())) << name();
}

// On 8 nodes and more Rabenseifner's reduce runs its reduce-scatter half as the butterfly
// (whatever the caller chose for it): exact at every root, on 2^L nodes and on others, ranks in
// blocks or interleaved.
TEST(SimNodeAwareReduce, RabenseifnerOnManyNodes) {
  const std::vector<LayoutCase> layouts = {{"8x2", blocks_of(std::vector<int>(8, 2))},
                                           {"9x2", blocks_of(std::vector<int>(9, 2))},
                                           {"8x3_by_node", round_robin(8, 3)}};
  for (const LayoutCase& lc : layouts) {
    const NodeLayout l = NodeLayout::from_keys(lc.keys);
    const int p = l.size();
    for (std::size_t count :
         {std::size_t{1}, static_cast<std::size_t>(3 * p + 1), std::size_t{1001}}) {
      for (int root : roots_for(l)) {
        for (auto [type, rop] : {std::pair{DataType::int64, ReduceOp::sum},
                                 std::pair{DataType::float16, ReduceOp::avg}}) {
          const std::size_t elem = collx::size_of(type);
          std::vector<Bytes> send(p, Bytes(count * elem)), recv(p, Bytes(count * elem));
          for (int r = 0; r < p; ++r)
            collx::verify::fill_input(send[r].data(), type, rop, r, p, count);
          auto world = world_for(l, false);
          world->run(info_for(Collective::reduce, kPipelines[1]), [&](Operation& op, int r) {
            return reduce_by(op, send[r].data(), recv[r].data(), count,
                             Reduction::make(type, rop, p), root, Algorithm::rabenseifner);
          });
          Bytes expected(count * elem);
          collx::verify::fill_expected(expected.data(), type, rop, p, count, 0);
          ASSERT_EQ(recv[static_cast<std::size_t>(root)], expected)
              << what(lc.name, Collective::reduce, type, count, root, false, kPipelines[1]);
        }
      }
    }
  }
}

// On 8, 16, ... nodes of as many ranks the hierarchical reduce_scatter pipelines the buffer in
// node segments (a piece of every block each): the node's reduce-scatter of one node segment runs
// while the halving exchanges across nodes of the ones before are in flight, so in the postings
// of every rank the messages inside its node and those across nodes alternate (the unpipelined
// schedule posts them in two runs). Exact results for blocks of equal and of random lengths
// (some empty), in place or not, with and without node arenas.
TEST(SimNodeAwarePipelinedReduceScatter, NodeAndNetworkPhasesInterleave) {
  const std::vector<LayoutCase> layouts = {{"8x2", blocks_of(std::vector<int>(8, 2))},
                                           {"8x3", blocks_of(std::vector<int>(8, 3))},
                                           {"8x2_by_node", round_robin(8, 2)},
                                           {"16x2", blocks_of(std::vector<int>(16, 2))}};
  std::mt19937 rng(41);
  for (const LayoutCase& lc : layouts) {
    const NodeLayout l = NodeLayout::from_keys(lc.keys);
    const int p = l.size();
    for (bool uneven : {false, true}) {
      const std::vector<std::size_t> offsets =
          offsets_for(p, 97 * static_cast<std::size_t>(p), uneven, rng);
      for (auto [type, rop] :
           {std::pair{DataType::int64, ReduceOp::sum}, std::pair{DataType::float16, ReduceOp::avg},
            std::pair{DataType::uint8, ReduceOp::max}}) {
        for (bool in_place : {false, true}) {
          for (bool node_arenas : {false, true}) {
            const std::size_t elem = collx::size_of(type);
            const std::size_t total = offsets.back();
            std::vector<Bytes> send(p, Bytes(total * elem)), recv(p);
            for (int r = 0; r < p; ++r) {
              collx::verify::fill_input(send[r].data(), type, rop, r, p, total);
              recv[r].assign((offsets[r + 1] - offsets[r]) * elem, std::byte{0x11});
            }
            auto world = world_for(l, node_arenas);
            const Pipeline pl{64, 2};
            world->run(info_for(Collective::reduce_scatter, pl), [&](Operation& op, int r) {
              std::byte* out = in_place ? send[r].data() : recv[r].data();
              return reduce_scatter_task(
                  op, {send[r].data(), out, offsets, Reduction::make(type, rop, p), {}},
                  Algorithm::hierarchical);
            });
            const std::string label =
                what(lc.name, Collective::reduce_scatter, type, total, -1, in_place, pl) +
                (uneven ? " uneven" : "") + (node_arenas ? " node arenas" : "");
            for (int r = 0; r < p; ++r) {
              const std::size_t n = offsets[r + 1] - offsets[r];
              Bytes expected(n * elem);
              collx::verify::fill_expected(expected.data(), type, rop, p, n, offsets[r]);
              Bytes got(send[r].begin(), send[r].begin() + static_cast<std::ptrdiff_t>(n * elem));
              if (!in_place) got = recv[r];
              ASSERT_EQ(got, expected) << label << " rank " << r;
              if (node_arenas || uneven) continue;
              int runs = 0;
              bool last_across = false;
              for (const auto& posting : world->postings()[static_cast<std::size_t>(r)]) {
                const bool across = l.node_of(posting.peer) != l.node_of(r);
                if (runs == 0 || across != last_across) ++runs;
                last_across = across;
              }
              EXPECT_GT(runs, 4) << label << " rank " << r
                                 << ": the node and network phases do not alternate";
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, SimNodeAwareCollectives,
                         ::testing::Combine(::testing::ValuesIn(kLayouts), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<LayoutCase, bool>>& info) {
                           return std::string(std::get<0>(info.param).name) +
                                  (std::get<1>(info.param) ? "_node_arenas" : "_messages");
                         });

}  // namespace
