// Reduce: binomial tree, and Rabenseifner (a reduce-scatter, ring or recursive halving, then a
// binomial gather of the blocks to the root), and the node-aware hierarchical reduce.

#include <bit>
#include <optional>

#include "collectives.hpp"
#include "pipeline.hpp"
#include "recursive.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

// Rabenseifner's reduce over bit-reversed places up to this size (reduce_rabenseifner): docs/
// SCALE.md, "Reduce at scale", has where it leads and where the butterfly's form does.
constexpr std::size_t kReversedReduceBytes = std::size_t{64} << 10;

// Children are combined smallest subtree first, "accumulated (lower) op child's (higher)", the
// root's last combine fusing the avg division; messages are segmented as exchange_reduce does.
// With one segment per child, all children's receives are posted before the first wait, so a
// child done early sends at once. Combine order, and bits, are fixed.
Task reduce_binomial(Operation& op, ReduceArgs a) {
  const int p = op.size();
  const std::size_t elem = a.reduction.element_size;
  const std::size_t bytes = a.count * elem;
  const bool is_root = op.rank() == a.root;
  if (a.count == 0) co_return;
  if (p == 1) {
    if (a.send != a.recv) op.copy(a.recv, a.send, bytes);
    co_return;
  }
  const patterns::BinomialTree tree{patterns::to_virtual(op.rank(), a.root, p), p};
  const patterns::RankList children = tree.children_smallest_first();
  const auto n = static_cast<std::size_t>(children.size());
  const bool one_segment = patterns::segment_count(bytes, op.segment_bytes()) == 1;
  // A small host call keeps accumulator and messages in the frame, as exchange_reduce keeps its
  // message (words: alignas is not honoured in a coroutine frame), not in pool scratch.
  std::uint64_t words[ExchangeReduceAwaiter::kInlineBytes / sizeof(std::uint64_t)];
  const bool in_frame = one_segment && !op.device_memory() && bytes * (n + 1) <= sizeof words;
  std::byte* const frame_bytes = reinterpret_cast<std::byte*>(words);
  // The root's accumulator is its output buffer.
  ScratchBuffer scratch;
  std::byte* accumulator = a.recv;
  if (!is_root && n > 0) {
    if (!in_frame) scratch = op.scratch(bytes);
    accumulator = in_frame ? frame_bytes : scratch.data();
  }
  const std::byte* current = a.send;
  if (n > 1 && one_segment) {
    // One message per child, as each child's send_for_reduction sends it.
    ScratchBuffer pooled;
    if (!in_frame) pooled = op.scratch(bytes * n);
    std::byte* const received = in_frame ? frame_bytes + bytes : pooled.data();
    TransferArray recvs(n);
    for (std::size_t c = 0; c < n; ++c) {
      op.recv(recvs[c], received + c * bytes, bytes,
              patterns::to_real(children[static_cast<int>(c)], a.root, p), a.phases[0]);
    }
    for (std::size_t c = 0; c < n; ++c) {
      co_await op.wait(recvs[c]);
      a.reduction.combine(accumulator, current, received + c * bytes, a.count,
                          is_root && c + 1 == n);
      current = accumulator;
    }
  } else {
    for (int c = 0; c < children.size(); ++c) {
      co_await exchange_reduce(op, {.peer = patterns::to_real(children[c], a.root, p),
                                    .send = nullptr,
                                    .send_elems = 0,
                                    .dst = accumulator,
                                    .local = current,
                                    .recv_elems = a.count,
                                    .local_is_lower = true,
                                    .finalize = is_root && c + 1 == children.size(),
                                    .reduction = &a.reduction,
                                    .phases = a.phases});
      current = accumulator;
    }
  }
  if (is_root) co_return;  // from two ranks on the root has children: its output holds the sum
  const int parent = patterns::to_real(tree.parent(), a.root, p);
  co_await send_for_reduction(op, parent, current, a.count, a.reduction, a.phases);
}

Task reduce_rabenseifner(Operation& op, ReduceArgs a) {
  const int p = op.size();
  if (a.count == 0) co_return;
  const std::size_t elem = a.reduction.element_size;
  const patterns::BlockLayout blocks{a.count, p};
  std::vector<std::size_t> offsets = offsets_of(blocks);
  const auto [scatter_phases, gather_phases] =
      a.phases.split({{"reduce_scatter", 2}, {"gather", 1}});
  const patterns::NodeLayout* nodes = op.transport().node_layout();
  const bool many_nodes = !op.in_group() && nodes != nullptr && nodes->size() == p &&
                          nodes->nodes() >= model::kManyNodes;
  // On many nodes of one rank (p a power of two, up to kReversedReduceBytes) MPICH's order: the
  // reduce over the ranks in bit-reversed order (place v: rank reverse_bits(v)), where recursive
  // halving pairs neighbours first with the largest halves, as the butterfly does, and the
  // gather's largest share goes between neighbours last, not across the farthest pair. Else the
  // butterfly on many nodes (faster on nodes of several ranks), or the caller's choice (the
  // selector's for a reduce_scatter_v). All leave block v on place v.
  std::vector<int> places;
  if (many_nodes && nodes->nodes() == p && std::has_single_bit(static_cast<unsigned>(p)) &&
      a.count * elem <= kReversedReduceBytes) {
    const int bits = std::countr_zero(static_cast<unsigned>(p));
    for (int v = 0; v < p; ++v)
      places.push_back(patterns::reverse_bits(v, bits));
  }
  std::optional<Operation::Group> reversed;
  if (!places.empty()) reversed.emplace(op, places);
  ScratchBuffer block = op.scratch(blocks.length(op.rank()) * elem);
  const ReduceScatterArgs scatter{a.send, block.data(), offsets, a.reduction, scatter_phases};
  co_await reduce_scatter_task(op, scatter,
                               !places.empty() ? Algorithm::recursive_halving
                               : many_nodes    ? Algorithm::butterfly
                                               : a.scatter_algorithm);
  const int root = places.empty() ? a.root : places[static_cast<std::size_t>(a.root)];
  const GatherArgs gather{block.data(), a.recv, offsets, elem, root, gather_phases};
  co_await gather_task(op, gather, Algorithm::binomial_tree);
}

// The flat reduce across nodes (and where node_split is null). At most three tag phases.
Algorithm flat_reduce(const Operation&, const ReduceArgs& a) {
  return a.count * a.reduction.element_size <= model::kFlatReduceTreeBytes
             ? Algorithm::binomial_tree
             : Algorithm::rabenseifner;
}

// Hierarchical: a reduce inside each node to its head (the root on the root's node, else the
// leader), then across nodes to the root, which alone completes the result. Any layout.
Task reduce_hierarchical_in(Operation& op, ReduceArgs a, const patterns::NodeLayout& layout,
                            SharedArena* node_arena) {
  if (a.count == 0) co_return;
  const int node = layout.node_of(op.rank());
  const std::vector<int> heads = node_heads(layout, a.root);
  const int head = heads[static_cast<std::size_t>(node)];
  // The node's partial sum: in the root's output on the root, in scratch on another head.
  ScratchBuffer scratch;
  std::byte* node_sum = a.recv;
  if (op.rank() == head && op.rank() != a.root) {
    scratch = op.scratch(a.count * a.reduction.element_size);
    node_sum = scratch.data();
  }
  const Reduction partial = a.reduction.partial();
  const auto [node_reduce, across_nodes] =
      a.phases.split({{"node reduce", 1}, {"across nodes", 3}});
  {
    const Operation::Group group(op, layout.members(node), node_arena);
    const ReduceArgs inside{a.send,      node_sum,       a.count, partial, layout.local_rank(head),
                            node_reduce, Algorithm::ring};
    co_await reduce_task(
        op, inside, node_arena != nullptr ? Algorithm::shared_memory : Algorithm::binomial_tree);
  }
  if (op.rank() == head) {
    const Operation::Group group(op, heads);
    const ReduceArgs across{
        node_sum,     node_sum,       a.count, a.reduction, layout.node_of(a.root),
        across_nodes, Algorithm::ring};
    co_await reduce_task(op, across, flat_reduce(op, across));
  }
}

}  // namespace

std::span<const AlgorithmRow> reduce_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(reduce, binomial_tree, reduce_binomial, 1),
      segments_keep_bits(COLLX_ROW(reduce, rabenseifner, reduce_rabenseifner, 3)),
      COLLX_ROW(reduce, shared_memory, reduce_shared_memory, 1, Algorithm::binomial_tree),
      COLLX_ROW(reduce, hierarchical,
                (with_node_arena<Collective::reduce, reduce_hierarchical_in, flat_reduce>), 4),
  };
  return rows;
}

}  // namespace collx::detail
