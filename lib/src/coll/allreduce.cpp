// Allreduce: ring, recursive doubling and Rabenseifner, all with the non-power-of-two fold
// (or none needed) and bitwise-identical results on every rank.
#include <algorithm>

#include <bit>
#include "blocks.hpp"
#include "collectives.hpp"
#include "fold.hpp"
#include "pipeline.hpp"
#include "recursive.hpp"
#include "registry.hpp"
#include "ring.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

// p == 1 or nothing to reduce: the result is the input.
bool trivial(Operation& op, const AllreduceArgs& a) {
  if (a.count == 0) return true;
  if (op.size() > 1) return false;
  if (a.send != a.recv) op.copy(a.recv, a.send, a.count * a.reduction.element_size);
  return true;
}

}  // namespace

Task allreduce_ring(Operation& op, AllreduceArgs a) {
  if (trivial(op, a)) co_return;
  const int p = op.size();
  co_await ring_stream(op, {.ring = {op.rank(), p, 1},
                            .layout = {a.count, p},
                            .input = a.send,
                            .output = a.recv,
                            .reduction = &a.reduction,
                            .element_size = a.reduction.element_size,
                            .first_step = 0,
                            .end_step = 2 * (p - 1),
                            .phases = a.phases});
}

// Recursive doubling and Rabenseifner share the fold around their core phase, which reads
// `input` and leaves the result in a.recv on every core rank.
enum class FoldedCore { recursive_doubling, rabenseifner };

template <FoldedCore kCore>
Task allreduce_folded(Operation& op, AllreduceArgs a) {
  if (trivial(op, a)) co_return;
  const patterns::Fold fold{op.size()};
  const int rank = op.rank();
  const patterns::FoldRole role = fold.role(rank);
  const FoldMessages messages{&a.reduction, a.reduction.element_size, a.phases, 0};
  if (role == patterns::FoldRole::folded) {
    co_await fold_out(op, messages, fold.fold_partner(rank), a.send, a.count, a.recv, a.count);
    co_return;
  }
  if (role == patterns::FoldRole::proxy) {
    co_await fold_in(op, messages, fold.fold_partner(rank), a.recv, a.send, a.count);
  }
  const std::byte* input = role == patterns::FoldRole::proxy ? a.recv : a.send;
  if constexpr (kCore == FoldedCore::recursive_doubling) {
    const std::byte* current = input;
    const int core = fold.core_rank(rank);
    const int steps = patterns::log2_exact(fold.core_size());
    for (int s = 0; s < steps; ++s) {
      const auto step = patterns::doubling_step(core, s);
      co_await exchange_reduce(op, {.peer = fold.rank_of_core(step.peer_core),
                                    .send = current,
                                    .send_elems = a.count,
                                    .dst = a.recv,
                                    .local = current,
                                    .recv_elems = a.count,
                                    .local_is_lower = step.lower,
                                    .finalize = s == steps - 1,
                                    .reduction = &a.reduction,
                                    .phases = a.phases});
      current = a.recv;
    }
  } else {
    // Reduce-scatter by recursive halving, then allgather by recursive doubling, received
    // straight into the output; neighbours first (the halves inside a node, PairOrder).
    const patterns::BlockLayout layout{a.count, fold.core_size()};
    co_await halving_reduce_scatter(op, fold, layout, input, a.recv, a.reduction, a.phases,
                                    PairOrder::near_first);
    co_await doubling_allgather(op, fold, layout, a.recv, a.reduction.element_size, a.phases[1],
                                PairOrder::near_first);
  }
  if (role == patterns::FoldRole::proxy) {
    co_await fold_return(op, messages, fold.fold_partner(rank), a.recv, a.count);
  }
}

// Binomial reduce to rank 0, then binomial broadcast: the classic latency-oriented tree.
Task allreduce_binomial(Operation& op, AllreduceArgs a) {
  if (trivial(op, a)) co_return;
  const auto [reduce_phases, broadcast_phases] = a.phases.split({{"reduce", 2}, {"broadcast", 2}});
  const ReduceArgs reduce{a.send, a.recv, a.count, a.reduction, 0, reduce_phases, Algorithm::ring};
  co_await reduce_task(op, reduce, Algorithm::binomial_tree);
  const BroadcastArgs broadcast{a.recv, a.count, a.reduction.element_size, 0, broadcast_phases};
  co_await broadcast_task(op, broadcast, Algorithm::binomial_tree);
}

// Double binary tree, pipelined: each half reduced up and broadcast down its binary tree; the
// second tree is mirrored so leaves of one are inner nodes of the other. Each tree's root
// completes every value once: the same bits on every rank.
Task allreduce_double_binary_tree(Operation& op, AllreduceArgs a) {
  if (trivial(op, a)) co_return;
  const int p = op.size();
  const std::size_t elem = a.reduction.element_size;
  const patterns::BlockLayout halves{a.count, 2};
  struct Lane {
    patterns::BinaryTree tree;
    bool mirrored = false;
    std::size_t first = 0;  // first element of this lane's half
    patterns::BlockLayout segments;
    int real(int vrank) const { return mirrored ? patterns::mirror(vrank, tree.size) : vrank; }
  };
  const int nseg = patterns::segment_count(halves.length(0) * elem, op.segment_bytes());
  const int depth = std::min(std::max(1, op.pipeline_depth()), nseg);
  const int rank = op.rank();
  Lane lanes[2] = {
      {{rank, p}, false, 0, {halves.length(0), nseg}},
      {{patterns::mirror(rank, p), p}, true, halves.offset(1), {halves.length(1), nseg}},
  };
  const std::size_t slot_bytes = lanes[0].segments.length(0) * elem;
  // Receive slots: lane x child x depth.
  ScratchBuffer slots = op.scratch(2 * 2 * static_cast<std::size_t>(depth) * slot_bytes);
  auto slot = [&](int lane, int child, int k) {
    return slots.data() +
           (static_cast<std::size_t>((lane * 2 + child) * depth + k % depth)) * slot_bytes;
  };
  const auto units = static_cast<std::size_t>(nseg);
  TransferArray child_recvs(2 * 2 * units);  // [lane][child][k]
  TransferArray up_sends(2 * units);         // [lane][k]
  TransferArray down_recvs(2 * units);
  TransferArray down_sends(2 * 2 * units);  // [lane][child][k]
  auto at = [&](int lane, int child, int k) {
    return static_cast<std::size_t>((lane * 2 + child)) * units + static_cast<std::size_t>(k);
  };
  auto up_phase = [&](int lane) { return a.phases[2 * lane]; };
  auto down_phase = [&](int lane) { return a.phases[2 * lane + 1]; };
  auto seg_offset = [&](const Lane& l, int k) { return (l.first + l.segments.offset(k)) * elem; };
  auto post_child_recv = [&](int lane, int child, int k) {
    const Lane& l = lanes[lane];
    op.recv(child_recvs[at(lane, child, k)], slot(lane, child, k), l.segments.length(k) * elem,
            l.real(l.tree.child(child)), up_phase(lane));
  };
  for (int lane = 0; lane < 2; ++lane) {
    for (int child = 0; child < lanes[lane].tree.child_count(); ++child) {
      for (int k = 0; k < depth; ++k)
        post_child_recv(lane, child, k);
    }
  }
  auto up = [&](int lane, int k) -> Task {
    const Lane& l = lanes[lane];
    const std::size_t offset = seg_offset(l, k);
    const std::size_t n = l.segments.length(k);
    const bool is_root = l.tree.parent() < 0;
    const std::byte* accumulated = a.send + offset;
    for (int child = 0; child < l.tree.child_count(); ++child) {
      co_await op.wait(child_recvs[at(lane, child, k)]);
      a.reduction.combine(a.recv + offset, accumulated, slot(lane, child, k), n,
                          is_root && child + 1 == l.tree.child_count());
      accumulated = a.recv + offset;
      if (k + depth < nseg) post_child_recv(lane, child, k + depth);
    }
    if (!is_root) {
      op.send(up_sends[static_cast<std::size_t>(lane) * units + static_cast<std::size_t>(k)],
              accumulated, n * elem, l.real(l.tree.parent()), up_phase(lane));
    }
  };
  auto down = [&](int lane, int k) -> Task {
    const Lane& l = lanes[lane];
    const std::size_t offset = seg_offset(l, k);
    const std::size_t bytes = l.segments.length(k) * elem;
    const std::size_t index = static_cast<std::size_t>(lane) * units + static_cast<std::size_t>(k);
    if (l.tree.parent() >= 0) {
      // The final value overwrites what went up: that send must be done.
      co_await op.wait(up_sends[index]);
      op.recv(down_recvs[index], a.recv + offset, bytes, l.real(l.tree.parent()), down_phase(lane));
      co_await op.wait(down_recvs[index]);
    }
    for (int child = 0; child < l.tree.child_count(); ++child) {
      op.send(down_sends[at(lane, child, k)], a.recv + offset, bytes, l.real(l.tree.child(child)),
              down_phase(lane));
    }
  };
  // The down stream trails by about the tree's height, so the up stream keeps flowing.
  const int lag = std::bit_width(static_cast<unsigned>(p)) + 1;
  for (int s = 0; s < nseg + lag; ++s) {
    for (int lane = 0; lane < 2; ++lane) {
      if (s < nseg) co_await up(lane, s);
      if (s >= lag) co_await down(lane, s - lag);
    }
  }
  for (auto& t : down_sends)
    co_await op.wait(t);
}

const patterns::NodeLayout* node_split(Operation& op) {
  const patterns::NodeLayout* layout = op.transport().node_layout();
  if (layout == nullptr || op.in_group() || layout->size() != op.size()) return nullptr;
  return layout->hierarchical() ? layout : nullptr;
}

// The flat allreduce across nodes (and where node_split is null): two tag phases.
Algorithm flat_allreduce(std::size_t bytes) {
  return bytes <= model::kFlatAllreduceDoublingBytes ? Algorithm::recursive_doubling
                                                     : Algorithm::rabenseifner;
}

// The node-aware allreduces on 2^L nodes, pipelined in node segments: the allreduce across nodes
// of one segment (Rabenseifner: L halving then L doubling exchanges, AcrossNodes) overlaps the
// node phases of its neighbours. Segment c posts exchange e at iteration c + e and runs its last
// node phase at c + 2L. multi_leader (`by_blocks`) carries one block per local rank; hierarchical,
// the whole segment through the leader. Every element is completed on one rank: the same bits
// everywhere.
struct NodeAwareForm {
  bool by_blocks = true;  // multi_leader's blocks; false: hierarchical's leaders carry it all
  Algorithm inside = Algorithm::ring;  // the node phases' algorithm
  Phases node_first, across, node_last;
  std::span<const int> node;  // this rank's node
  SharedArena* arena;         // the node's, or null
  int k = 1;                  // blocks per node
  int carrier = 0;            // this rank's block (by_blocks), else 0
  // Who crosses the network with this rank, by node: its local rank's peers, or the leaders.
  bool crosses = true;
  std::span<const int> peers{};
};

// The node's first phase: a reduce-scatter leaving this rank's block (by_blocks), or a reduce
// to the leader.
Task node_first_phase(Operation& op, const NodeAwareForm& form, const std::byte* in,
                      std::byte* block, std::size_t count, const std::vector<std::size_t>& offsets,
                      const Reduction& partial) {
  const Operation::Group group(op, form.node, form.arena);
  if (form.by_blocks) {
    const ReduceScatterArgs scatter{in, block, offsets, partial, form.node_first};
    co_await reduce_scatter_task(op, scatter, form.inside);
  } else {
    const ReduceArgs reduce{in, block, count, partial, 0, form.node_first, Algorithm::ring};
    co_await reduce_task(op, reduce, form.inside);
  }
}

// The node's last phase: the allgather of the blocks (by_blocks), or the leader's broadcast.
Task node_last_phase(Operation& op, const NodeAwareForm& form, const std::byte* block,
                     std::byte* out, std::size_t count, const std::vector<std::size_t>& offsets,
                     std::size_t elem) {
  const Operation::Group group(op, form.node, form.arena);
  if (form.by_blocks) {
    const AllgatherArgs gather{block, out, offsets, elem, form.node_last};
    co_await allgather_task(
        op, gather,
        form.inside == Algorithm::butterfly ? Algorithm::recursive_doubling : form.inside);
  } else {
    const BroadcastArgs broadcast{out, count, elem, 0, form.node_last};
    co_await broadcast_task(op, broadcast, form.inside);
  }
}

Task allreduce_node_aware(Operation& op, const AllreduceArgs& a, const patterns::NodeLayout& layout,
                          std::size_t segment, const NodeAwareForm form) {
  const std::size_t elem = a.reduction.element_size;
  const int nodes = layout.nodes();
  const AcrossNodes across{op,    form.peers,  layout.node_of(op.rank()),
                           nodes, form.across, &a.reduction};
  // One node segment: node phase, the flat allreduce across nodes, node phase.
  const bool pipelined = segment < a.count;
  const int steps = pipelined ? 2 * across.steps() : 0;
  const Reduction partial = a.reduction.partial();
  // The node segments in flight, their storage reused by the node segment 2L + 1 later.
  struct NodeSegment {
    std::size_t begin = 0;
    std::size_t count = 0;
    std::vector<std::size_t> offsets;  // the k blocks, within the node segment
    std::vector<std::size_t> region;   // the carried block's `nodes` blocks
    std::byte* block = nullptr;        // what this rank carries across, in recv
    ScratchBuffer received;  // the peer's partial of the half this rank keeps at a halving
    Transfer send, recv;
  };
  std::vector<NodeSegment> window(static_cast<std::size_t>(steps) + 1);
  if (form.crosses && pipelined) {
    // A kept half: half the carried block, and at most one element more per node.
    const std::size_t half =
        segment / static_cast<std::size_t>(form.k) / 2 + 2 + static_cast<std::size_t>(nodes);
    for (NodeSegment& ch : window)
      ch.received = op.scratch(half * elem);
  }
  const auto at = [&](std::size_t c) -> NodeSegment& { return window[c % window.size()]; };
  const auto start = [&](std::size_t c) -> Task {
    NodeSegment& ch = at(c);
    ch.begin = c * segment;
    ch.count = std::min(segment, a.count - ch.begin);
    ch.offsets = offsets_of(patterns::BlockLayout{ch.count, form.k});
    const auto i = static_cast<std::size_t>(form.carrier);
    ch.block = a.recv + (ch.begin + ch.offsets[i]) * elem;
    ch.region = offsets_of(patterns::BlockLayout{ch.offsets[i + 1] - ch.offsets[i], nodes});
    const std::byte* const in = a.send + ch.begin * elem;
    co_await node_first_phase(op, form, in, ch.block, ch.count, ch.offsets, partial);
    if (pipelined) {
      if (form.crosses) across.post(ch.send, ch.recv, ch.block, ch.region, ch.received.data(), 0);
      co_return;
    }
    if (form.crosses) {
      const Operation::Group group(op, form.peers);
      const std::size_t n = ch.offsets[i + 1] - ch.offsets[i];
      const AllreduceArgs flat{ch.block, ch.block, n, a.reduction, form.across};
      co_await allreduce_task(op, flat, flat_allreduce(n * elem));
    }
    co_await node_last_phase(op, form, ch.block, a.recv, ch.count, ch.offsets, elem);
  };
  const auto step = [&](std::size_t c, int e) -> Task {
    NodeSegment& ch = at(c);
    if (form.crosses) {
      co_await op.wait(ch.send, ch.recv);
      if (e <= across.steps()) across.combine(ch.block, ch.region, ch.received.data(), e - 1);
      if (e < steps) across.post(ch.send, ch.recv, ch.block, ch.region, ch.received.data(), e);
    }
    if (e < steps) co_return;
    std::byte* const out = a.recv + ch.begin * elem;
    co_await node_last_phase(op, form, ch.block, out, ch.count, ch.offsets, elem);
  };
  co_await staggered((a.count + segment - 1) / segment, steps, start, step);
}

// The node segment (elements) of a pipelined node-aware allreduce, or 0: nodes a power of two,
// host memory, more than one node segment. A carrier's share is at least four segments (smaller
// ones lost more in handoffs than the overlap gave), a 16th of a segment on many nodes.
std::size_t pipelined_segment(const Operation& op, const AllreduceArgs& a,
                              const patterns::NodeLayout& layout, int carriers_per_node) {
  if (!std::has_single_bit(static_cast<unsigned>(layout.nodes())) || op.device_memory()) return 0;
  const auto k = static_cast<std::size_t>(carriers_per_node);
  const std::size_t most = a.count / static_cast<std::size_t>(model::kMostNodeSegments);
  std::size_t segment = std::max({4 * op.segment_bytes() * k / a.reduction.element_size, most, k});
  if (a.count <= segment && layout.nodes() >= model::kManyNodes) {
    segment =
        std::max({op.segment_bytes() / model::kManyNodesPieceDivisor * k / a.reduction.element_size,
                  most, k});
  }
  return a.count > segment ? segment : 0;
}

// Hierarchical: reduce to the node leader, allreduce of the leaders across nodes, broadcast in
// the node. Multi-leader (`kByBlocks`, as many ranks on every node, else hierarchical): node
// reduce-scatter, allreduce of block i across nodes by the ranks of local rank i, node allgather.
// Each value is completed once and copied: the same bits everywhere. Node phases run through
// `node_arena` where there is one; on 2^L nodes a buffer of several node segments is pipelined.
template <bool kByBlocks>
Task allreduce_node_aware_in(Operation& op, AllreduceArgs a, SharedArena* node_arena) {
  if (trivial(op, a)) co_return;
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr) {
    co_await allreduce_task(op, a, flat_allreduce(a.count * a.reduction.element_size));
    co_return;
  }
  const bool by_blocks = kByBlocks && layout->uniform();
  const auto [first, across, last] =
      by_blocks
          ? a.phases.split({{"node reduce_scatter", 2}, {"across nodes", 2}, {"node allgather", 2}})
          : a.phases.split({{"node reduce", 1}, {"across nodes", 2}, {"node broadcast", 1}});
  const int k =
      by_blocks ? static_cast<int>(layout->members(layout->node_of(op.rank())).size()) : 1;
  const std::size_t segment = pipelined_segment(op, a, *layout, k);
  if (by_blocks && node_arena == nullptr && layout->nodes() >= model::kManyNodes &&
      !std::has_single_bit(static_cast<unsigned>(layout->nodes())) &&
      a.count * a.reduction.element_size <= 4 * op.segment_bytes() * static_cast<std::size_t>(k)) {
    // The many-node pipeline of these sizes runs on 2^L nodes only; on others the flat
    // allreduce, whose pairs start inside a node, beat the unpipelined phases in the simulation.
    co_await allreduce_task(op, a, flat_allreduce(a.count * a.reduction.element_size));
    co_return;
  }
  const int local = layout->local_rank(op.rank());
  // Node phases on messages run the butterfly where halving_inside_node says so.
  const bool halving =
      by_blocks && segment > 0 &&
      halving_inside_node(op, *layout,
                          segment / static_cast<std::size_t>(k) * a.reduction.element_size);
  const NodeAwareForm form{.by_blocks = by_blocks,
                           .inside = node_arena != nullptr ? Algorithm::shared_memory
                                     : !by_blocks          ? Algorithm::binomial_tree
                                     : halving             ? Algorithm::butterfly
                                                           : Algorithm::ring,
                           .node_first = first,
                           .across = across,
                           .node_last = last,
                           .node = layout->members(layout->node_of(op.rank())),
                           .arena = node_arena,
                           .k = k,
                           .carrier = by_blocks ? local : 0,
                           .crosses = by_blocks || local == 0,
                           .peers = layout->peers(by_blocks ? local : 0)};
  co_await allreduce_node_aware(op, a, *layout, segment > 0 ? segment : a.count, form);
}

std::span<const AlgorithmRow> allreduce_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::allreduce>(Algorithm::ring, allreduce_ring, model::allreduce_ring, 2),
      row<Collective::allreduce>(Algorithm::recursive_doubling,
                                 allreduce_folded<FoldedCore::recursive_doubling>,
                                 model::allreduce_recursive_doubling, 1),
      row<Collective::allreduce>(Algorithm::rabenseifner,
                                 allreduce_folded<FoldedCore::rabenseifner>,
                                 model::allreduce_rabenseifner, 2),
      row<Collective::allreduce>(Algorithm::binomial_tree, allreduce_binomial,
                                 model::allreduce_binomial_tree, 4),
      row<Collective::allreduce>(Algorithm::double_binary_tree, allreduce_double_binary_tree,
                                 model::allreduce_double_binary_tree, 4),
      row<Collective::allreduce>(Algorithm::shared_memory, allreduce_shared_memory,
                                 model::allreduce_shared_memory, 2, Algorithm::ring),
      row<Collective::allreduce>(Algorithm::hierarchical,
                                 with_node_arena<AllreduceArgs, allreduce_node_aware_in<false>>,
                                 model::allreduce_hierarchical, 4),
      row<Collective::allreduce>(Algorithm::multi_leader,
                                 with_node_arena<AllreduceArgs, allreduce_node_aware_in<true>>,
                                 model::allreduce_multi_leader, 6),
  };
  return rows;
}

}  // namespace collx::detail
