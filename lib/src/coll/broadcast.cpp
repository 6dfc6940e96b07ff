// Broadcast: binomial tree, k-nomial tree, pipelined chain, linear, scatter + allgather (van de
// Geijn) and the node-aware hierarchical broadcast.
#include <algorithm>
#include <bit>
#include <deque>
#include <span>
#include <vector>

#include "collectives.hpp"
#include "pipeline.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;
using patterns::segment_count;
using patterns::TreePlace;

// Which children of a tree are on another node (tree_broadcast): as the node layout says where
// the algorithm sees the whole communicator (else none known), or all (hierarchical's heads).
enum class Across { by_layout, all };

std::vector<unsigned char> children_across(Operation& op, std::span<const int> children,
                                           Across mode) {
  if (mode == Across::all) return std::vector<unsigned char>(children.size(), 1);
  const patterns::NodeLayout* nodes = op.transport().node_layout();
  if (op.in_group() || nodes == nullptr || nodes->size() != op.size() || nodes->nodes() < 2)
    return {};
  std::vector<unsigned char> across(children.size());
  const int mine = nodes->node_of(op.rank());
  for (std::size_t c = 0; c < children.size(); ++c)
    across[c] = nodes->node_of(children[c]) != mine ? 1 : 0;
  return across;
}

// Receive the buffer from the parent (none at the root) segment by segment and forward each
// segment to every child as soon as it is in. With one segment, children across nodes get it
// one at a time, largest subtree first (at once they would share the node's link); children on
// this node are posted at once, first.
Task tree_broadcast(Operation& op, BroadcastArgs a, TreePlace place, Across mode) {
  const std::size_t bytes = a.count * a.element_size;
  if (bytes == 0) co_return;
  const int parent = place.parent;
  const std::span<const int> children = place.children.span();
  const std::vector<unsigned char> across = children_across(op, children, mode);
  // Segments only pay where some rank forwards what it receives; with two ranks one message
  // saves the per-segment handshakes.
  const int nseg = op.size() == 2 ? 1 : segment_count(bytes, op.segment_bytes());
  const BlockLayout segments{a.count, nseg};
  const int depth = std::min(std::max(1, op.pipeline_depth()), nseg);
  const std::size_t fanout = children.size();
  TransferArray recvs(parent >= 0 ? static_cast<std::size_t>(nseg) : 0);
  TransferArray sends(static_cast<std::size_t>(nseg) * fanout);
  auto where = [&](int k) { return a.buffer + segments.offset(k) * a.element_size; };
  auto length = [&](int k) { return segments.length(k) * a.element_size; };
  if (parent >= 0) {
    for (int k = 0; k < depth; ++k)
      op.recv(recvs[k], where(k), length(k), parent, a.phases[0]);
  }
  for (int k = 0; k < nseg; ++k) {
    if (parent >= 0) {
      co_await op.wait(recvs[k]);
      if (k + depth < nseg)
        op.recv(recvs[k + depth], where(k + depth), length(k + depth), parent, a.phases[0]);
    }
    if (nseg == 1 && !across.empty()) {
      for (std::size_t c = 0; c < fanout; ++c) {
        if (!across[c]) op.send(sends[c], where(k), length(k), children[c], a.phases[0]);
      }
      for (std::size_t c = 0; c < fanout; ++c) {
        if (!across[c]) continue;
        op.send(sends[c], where(k), length(k), children[c], a.phases[0]);
        co_await op.wait(sends[c]);
      }
      continue;
    }
    for (std::size_t c = 0; c < fanout; ++c) {
      op.send(sends[static_cast<std::size_t>(k) * fanout + c], where(k), length(k), children[c],
              a.phases[0]);
    }
    // Keep at most `depth` segments' sends in flight.
    if (k >= depth) {
      for (std::size_t c = 0; c < fanout; ++c) {
        co_await op.wait(sends[static_cast<std::size_t>(k - depth) * fanout + c]);
      }
    }
  }
  for (auto& s : sends)
    co_await op.wait(s);
}

// The trees: binomial, k-nomial (radix kKnomialRadix: log4 p levels, up to three children a
// level) and the pipelined chain.
template <Algorithm kTree>
Task broadcast_tree(Operation& op, BroadcastArgs a) {
  const int rank = op.rank();
  const int p = op.size();
  return tree_broadcast(op, a,
                        kTree == Algorithm::pipelined_chain ? patterns::chain_place(rank, a.root, p)
                        : kTree == Algorithm::binomial_tree
                            ? patterns::binomial_place(rank, a.root, p)
                            : patterns::knomial_place(rank, a.root, p, patterns::kKnomialRadix),
                        Across::by_layout);
}

// Linear (a flat tree): the root sends the whole buffer to every rank at once; for few ranks
// and latency-bound sizes the p - 1 sends' latencies overlap.
Task broadcast_linear(Operation& op, BroadcastArgs a) {
  const int p = op.size();
  const std::size_t bytes = a.count * a.element_size;
  if (p == 1 || bytes == 0) co_return;
  if (op.rank() != a.root) {
    Transfer recv;
    op.recv(recv, a.buffer, bytes, a.root, a.phases[0]);
    co_await op.wait(recv);
    co_return;
  }
  TransferArray sends(static_cast<std::size_t>(p - 1));
  for (int v = 1; v < p; ++v)
    op.send(sends[static_cast<std::size_t>(v - 1)], a.buffer, bytes, (a.root + v) % p, a.phases[0]);
  for (int v = 1; v < p; ++v)
    co_await op.wait(sends[static_cast<std::size_t>(v - 1)]);
}

// The allgather half of scatter + allgather by recursive doubling (p a power of two): at
// distance m, virtual rank v swaps the m blocks of its aligned group with v ^ m's. A rank
// whose scatter subtree already covers its partner's group skips that receive (span(v) > m).
Task doubling_allgather_after_scatter(Operation& op, const BroadcastArgs& a,
                                      const patterns::BlockLayout& blocks, int vrank, int phase) {
  const int p = op.size();
  const std::size_t elem = a.element_size;
  const patterns::BinomialTree tree{vrank, p};
  for (int m = 1; m < p; m <<= 1) {
    const patterns::BinomialTree partner{vrank ^ m, p};
    const int peer = patterns::to_real(partner.vrank, a.root, p);
    const int mine = vrank & ~(m - 1);
    const int theirs = partner.vrank & ~(m - 1);
    Transfer send;
    Transfer recv;
    if (partner.span() <= m) {
      op.send(send, a.buffer + blocks.offset(mine) * elem, blocks.length(mine, m) * elem, peer,
              phase);
    }
    if (tree.span() <= m) {
      op.recv(recv, a.buffer + blocks.offset(theirs) * elem, blocks.length(theirs, m) * elem, peer,
              phase);
    }
    co_await op.wait(send, recv);
  }
}

// van de Geijn: the root's p blocks are scattered down a binomial tree, then an allgather
// completes them (recursive doubling on a power of two below
// model::kScatterAllgatherDoublingBytes, else the ring): about 2n bytes per rank, not n log p.
Task broadcast_scatter_allgather(Operation& op, BroadcastArgs a) {
  const int p = op.size();
  if (p == 1 || a.count == 0) co_return;
  const std::size_t elem = a.element_size;
  const BlockLayout blocks{a.count, p};
  const patterns::BinomialTree tree{patterns::to_virtual(op.rank(), a.root, p), p};
  const auto [scatter_phases, ring_phases] =
      a.phases.split({{"scatter", 1}, {"allgather ring", 2}});
  // Scatter: this rank's subtree blocks [v, v + subtree) arrive from the parent at once.
  if (tree.parent() >= 0) {
    Transfer recv;
    op.recv(recv, a.buffer + blocks.offset(tree.vrank) * elem,
            blocks.length(tree.vrank, tree.subtree_size()) * elem,
            patterns::to_real(tree.parent(), a.root, p), scatter_phases[0]);
    co_await op.wait(recv);
  }
  std::deque<Transfer> sends;
  for (int child_vrank : tree.children_largest_first()) {
    const patterns::BinomialTree child{child_vrank, p};
    sends.emplace_back();
    op.send(sends.back(), a.buffer + blocks.offset(child.vrank) * elem,
            blocks.length(child.vrank, child.subtree_size()) * elem,
            patterns::to_real(child.vrank, a.root, p), scatter_phases[0]);
  }
  for (auto& s : sends)
    co_await op.wait(s);
  if (std::has_single_bit(static_cast<unsigned>(p)) &&
      a.count * elem < model::kScatterAllgatherDoublingBytes) {
    co_await doubling_allgather_after_scatter(op, a, blocks, tree.vrank, ring_phases[0]);
    co_return;
  }
  co_await ring_stream(op, {.ring = {tree.vrank, p, 0},
                            .rotation = a.root,
                            .layout = blocks,
                            .input = a.buffer,
                            .output = a.buffer,
                            .element_size = elem,
                            .first_step = p - 1,
                            .end_step = 2 * (p - 1),
                            .phases = ring_phases});
}

// The flat broadcast across nodes (and where node_split is null). At most three tag phases.
Algorithm flat_broadcast(const Operation& op, const BroadcastArgs& a) {
  return a.count * a.element_size <= model::kFlatBroadcastTreeBytes || op.size() <= 3
             ? Algorithm::binomial_tree
             : Algorithm::scatter_allgather;
}

// Hierarchical: across nodes from the root to every node's head, then inside each node from
// it (through `node_arena` where there is one, else a binomial tree). Any layout.
Task broadcast_hierarchical_in(Operation& op, BroadcastArgs a, const patterns::NodeLayout& layout,
                               SharedArena* node_arena) {
  if (a.count * a.element_size == 0) co_return;
  const int node = layout.node_of(op.rank());
  const std::vector<int> heads = node_heads(layout, a.root);
  const int head = heads[static_cast<std::size_t>(node)];
  const auto [across_nodes, node_broadcast] =
      a.phases.split({{"across nodes", 3}, {"node broadcast", 1}});
  if (op.rank() == head) {
    const Operation::Group group(op, heads);
    const BroadcastArgs across{a.buffer, a.count, a.element_size, layout.node_of(a.root),
                               across_nodes};
    const Algorithm flat = flat_broadcast(op, across);
    if (flat == Algorithm::binomial_tree) {
      const TreePlace place = patterns::binomial_place(op.rank(), across.root, op.size());
      co_await tree_broadcast(op, across, place, Across::all);
    } else {
      co_await broadcast_task(op, across, flat);
    }
  }
  {
    const Operation::Group group(op, layout.members(node), node_arena);
    const BroadcastArgs inside{a.buffer, a.count, a.element_size, layout.local_rank(head),
                               node_broadcast};
    co_await broadcast_task(
        op, inside, node_arena != nullptr ? Algorithm::shared_memory : Algorithm::binomial_tree);
  }
}

}  // namespace

std::vector<int> node_heads(const patterns::NodeLayout& layout, int root) {
  const std::span<const int> leaders = layout.leaders();
  std::vector<int> heads(leaders.begin(), leaders.end());
  heads[static_cast<std::size_t>(layout.node_of(root))] = root;
  return heads;
}

std::span<const AlgorithmRow> broadcast_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(broadcast, binomial_tree, broadcast_tree<Algorithm::binomial_tree>, 1),
      COLLX_ROW(broadcast, pipelined_chain, broadcast_tree<Algorithm::pipelined_chain>, 1),
      COLLX_ROW(broadcast, linear, broadcast_linear, 1),
      COLLX_ROW(broadcast, scatter_allgather, broadcast_scatter_allgather, 3),
      COLLX_ROW(broadcast, shared_memory, broadcast_shared_memory, 1, Algorithm::binomial_tree),
      COLLX_ROW(broadcast, hierarchical,
                (with_node_arena<Collective::broadcast, broadcast_hierarchical_in, flat_broadcast>),
                4),
      COLLX_ROW(broadcast, knomial_tree, broadcast_tree<Algorithm::knomial_tree>, 1),
  };
  return rows;
}

}  // namespace collx::detail
