// Allreduce: ring, recursive doubling and Rabenseifner, all with the non-power-of-two fold
// (or none needed) and bitwise-identical results on every rank.
#include <algorithm>
#include <array>
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
Algorithm flat_allreduce(const Operation&, const AllreduceArgs& a) {
  return a.count * a.reduction.element_size <= model::kFlatAllreduceDoublingBytes
             ? Algorithm::recursive_doubling
             : Algorithm::rabenseifner;
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
// `node_arena` where there is one. On 2^L nodes a buffer of several node segments is pipelined:
// the allreduce across nodes of one node segment (Rabenseifner: L halving then L doubling
// exchanges, AcrossNodes) overlaps the node phases of its neighbours; node segment c posts
// exchange e at iteration c + e and runs its last node phase at c + 2L.
template <bool kByBlocks>
Task allreduce_node_aware(Operation& op, AllreduceArgs a, const patterns::NodeLayout& layout,
                          SharedArena* node_arena) {
  if (trivial(op, a)) co_return;
  const std::size_t elem = a.reduction.element_size;
  const int nodes = layout.nodes();
  const bool by_blocks = kByBlocks && layout.uniform();
  const std::array<Phases, 3> phases =
      by_blocks
          ? a.phases.split({{"node reduce_scatter", 2}, {"across nodes", 2}, {"node allgather", 2}})
          : a.phases.split({{"node reduce", 1}, {"across nodes", 2}, {"node broadcast", 1}});
  // Blocks per node segment: one per local rank (by_blocks), else the leader's one.
  const int k = by_blocks ? static_cast<int>(layout.members(layout.node_of(op.rank())).size()) : 1;
  const std::size_t pipelined_at = pipelined_segment(op, a, layout, k);
  if (by_blocks && node_arena == nullptr && nodes >= model::kManyNodes &&
      !std::has_single_bit(static_cast<unsigned>(nodes)) &&
      a.count * elem <= 4 * op.segment_bytes() * static_cast<std::size_t>(k)) {
    // The many-node pipeline of these sizes runs on 2^L nodes only; on others the flat
    // allreduce, whose pairs start inside a node, beat the unpipelined phases in the simulation.
    co_await allreduce_task(op, a, flat_allreduce(op, a));
    co_return;
  }
  const bool pipelined = pipelined_at > 0;
  const std::size_t segment = pipelined ? pipelined_at : a.count;
  const int local = layout.local_rank(op.rank());
  // The node phases' algorithm: on messages the butterfly where halving_inside_node says so.
  const Algorithm inside =
      node_arena != nullptr ? Algorithm::shared_memory
      : !by_blocks          ? Algorithm::binomial_tree
      : pipelined && halving_inside_node(op, layout, segment / static_cast<std::size_t>(k) * elem)
          ? Algorithm::butterfly
          : Algorithm::ring;
  const std::span<const int> node = layout.members(layout.node_of(op.rank()));
  const auto carrier = static_cast<std::size_t>(by_blocks ? local : 0);  // this rank's block
  // Who crosses the network with this rank, by node: its local rank's peers, or the leaders.
  const bool crosses = by_blocks || local == 0;
  const std::span<const int> peers = layout.peers(by_blocks ? local : 0);
  const AcrossNodes across{op, peers, layout.node_of(op.rank()), nodes, phases[1], &a.reduction};
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
  if (crosses && pipelined) {
    // A kept half: half the carried block, and at most one element more per node.
    const std::size_t half =
        segment / static_cast<std::size_t>(k) / 2 + 2 + static_cast<std::size_t>(nodes);
    for (NodeSegment& ch : window)
      ch.received = op.scratch(half * elem);
  }
  const auto at = [&](std::size_t c) -> NodeSegment& { return window[c % window.size()]; };
  // The node's last phase: the allgather of the blocks (by_blocks), or the leader's broadcast.
  const auto node_last_phase = [&](const NodeSegment& ch) -> Task {
    const Operation::Group group(op, node, node_arena);
    std::byte* const out = a.recv + ch.begin * elem;
    if (by_blocks) {
      const AllgatherArgs gather{ch.block, out, ch.offsets, elem, phases[2]};
      co_await allgather_task(
          op, gather, inside == Algorithm::butterfly ? Algorithm::recursive_doubling : inside);
    } else {
      const BroadcastArgs broadcast{out, ch.count, elem, 0, phases[2]};
      co_await broadcast_task(op, broadcast, inside);
    }
  };
  const auto start = [&](std::size_t c) -> Task {
    NodeSegment& ch = at(c);
    ch.begin = c * segment;
    ch.count = std::min(segment, a.count - ch.begin);
    ch.offsets = offsets_of(patterns::BlockLayout{ch.count, k});
    ch.block = a.recv + (ch.begin + ch.offsets[carrier]) * elem;
    const std::size_t carried = ch.offsets[carrier + 1] - ch.offsets[carrier];
    ch.region = offsets_of(patterns::BlockLayout{carried, nodes});
    {
      // The node's first phase: a reduce-scatter leaving this rank's block, or a reduce to the
      // leader.
      const Operation::Group group(op, node, node_arena);
      const std::byte* const in = a.send + ch.begin * elem;
      if (by_blocks) {
        const ReduceScatterArgs scatter{in, ch.block, ch.offsets, partial, phases[0]};
        co_await reduce_scatter_task(op, scatter, inside);
      } else {
        const ReduceArgs reduce{in, ch.block, ch.count, partial, 0, phases[0], Algorithm::ring};
        co_await reduce_task(op, reduce, inside);
      }
    }
    if (pipelined) {
      if (crosses) across.post(ch.send, ch.recv, ch.block, ch.region, ch.received.data(), 0);
      co_return;
    }
    if (crosses) {
      const Operation::Group group(op, peers);
      const AllreduceArgs flat{ch.block, ch.block, carried, a.reduction, phases[1]};
      co_await allreduce_task(op, flat, flat_allreduce(op, flat));
    }
    co_await node_last_phase(ch);
  };
  const auto step = [&](std::size_t c, int e) -> Task {
    NodeSegment& ch = at(c);
    if (crosses) {
      co_await op.wait(ch.send, ch.recv);
      if (e <= across.steps()) across.combine(ch.block, ch.region, ch.received.data(), e - 1);
      if (e < steps) across.post(ch.send, ch.recv, ch.block, ch.region, ch.received.data(), e);
    }
    if (e == steps) co_await node_last_phase(ch);
  };
  co_await staggered((a.count + segment - 1) / segment, steps, start, step);
}

std::span<const AlgorithmRow> allreduce_rows() {
  static const AlgorithmRow rows[] = {
      segments_keep_bits(COLLX_ROW(allreduce, ring, allreduce_ring, 2)),
      COLLX_ROW(allreduce, recursive_doubling, allreduce_folded<FoldedCore::recursive_doubling>, 1),
      segments_keep_bits(
          COLLX_ROW(allreduce, rabenseifner, allreduce_folded<FoldedCore::rabenseifner>, 2)),
      COLLX_ROW(allreduce, binomial_tree, allreduce_binomial, 4),
      segments_keep_bits(COLLX_ROW(allreduce, double_binary_tree, allreduce_double_binary_tree, 4)),
      COLLX_ROW(allreduce, shared_memory, allreduce_shared_memory, 2, Algorithm::ring),
      COLLX_ROW(
          allreduce, hierarchical,
          (with_node_arena<Collective::allreduce, allreduce_node_aware<false>, flat_allreduce>), 4),
      COLLX_ROW(
          allreduce, multi_leader,
          (with_node_arena<Collective::allreduce, allreduce_node_aware<true>, flat_allreduce>), 6),
  };
  return rows;
}

}  // namespace collx::detail
