// Allreduce: ring, recursive doubling and Rabenseifner, all with the non-power-of-two fold
// (or none needed) and bitwise-identical results on every rank.
#include <algorithm>
#include <cstring>

#include <bit>
#include "blocks.hpp"
#include "collectives.hpp"
#include "collx/error.hpp"
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

// Recursive doubling and Rabenseifner: the same fold around their core phase, which reads
// `input` (the rank's data, with its folded partner's for a proxy) and leaves the result in
// a.recv on every core rank.
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
    // Reduce-scatter by recursive halving (core rank c ends with block c), then allgather by
    // recursive doubling, received straight into the output.
    const patterns::BlockLayout layout{a.count, fold.core_size()};
    co_await halving_reduce_scatter(op, fold, layout, input, a.recv, a.reduction, a.phases);
    co_await doubling_allgather(op, fold, layout, a.recv, a.reduction.element_size, a.phases[1]);
  }
  if (role == patterns::FoldRole::proxy) {
    co_await fold_return(op, messages, fold.fold_partner(rank), a.recv, a.count);
  }
}

// Binomial reduce to rank 0, then binomial broadcast: the classic latency-oriented tree.
Task allreduce_binomial(Operation& op, AllreduceArgs a) {
  if (trivial(op, a)) co_return;
  const ReduceArgs reduce{
      a.send, a.recv, a.count, a.reduction, 0, a.phases.part("reduce", 0, 2), Algorithm::ring};
  co_await reduce_task(op, reduce, Algorithm::binomial_tree);
  const BroadcastArgs broadcast{a.recv, a.count, a.reduction.element_size, 0,
                                a.phases.part("broadcast", 2, 2)};
  co_await broadcast_task(op, broadcast, Algorithm::binomial_tree);
}

// Double binary tree, pipelined: each half of the buffer is reduced up one binary tree and
// broadcast back down it, segment by segment, the down stream trailing the up stream. The
// second tree numbers the ranks backwards, so a rank that is a leaf in one tree is an inner node
// in the other and both directions of every rank's links carry traffic. The tree's root
// computes each final value once, so every rank gets the same bits.
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

Algorithm flat_allreduce(std::size_t bytes) {
  return bytes <= (std::size_t{32} << 10) ? Algorithm::recursive_doubling : Algorithm::rabenseifner;
}

// Hierarchical: a reduce inside each node to its leader (local rank 0), an allreduce of the
// leaders across nodes, a broadcast inside each node. The leaders' allreduce completes (and for
// avg divides) every value once, and the broadcast copies its bits, so every rank gets the same
// result. Any layout. The phases inside a node run through `node_arena` where the node has one
// (its turn held for the whole operation, see allreduce_hierarchical), else as binomial trees.
Task allreduce_hierarchical_in(Operation& op, AllreduceArgs a, SharedArena* node_arena) {
  if (trivial(op, a)) co_return;
  const std::size_t bytes = a.count * a.reduction.element_size;
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr) {
    co_await allreduce_task(op, a, flat_allreduce(bytes));
    co_return;
  }
  const std::span<const int> node = layout->members(layout->node_of(op.rank()));
  const bool leader = layout->local_rank(op.rank()) == 0;
  const Algorithm inside =
      node_arena != nullptr ? Algorithm::shared_memory : Algorithm::binomial_tree;
  // Partial sums inside a node: no avg division before the last combining step.
  Reduction partial = a.reduction;
  partial.divisor = 0;
  {
    const Operation::Group group(op, node, node_arena);
    const ReduceArgs reduce{
        a.send, a.recv, a.count, partial, 0, a.phases.part("node reduce", 0, 1), Algorithm::ring};
    co_await reduce_task(op, reduce, inside);
  }
  if (leader) {
    const Operation::Group group(op, layout->leaders());
    const AllreduceArgs across{a.recv, a.recv, a.count, a.reduction,
                               a.phases.part("across nodes", 1, 2)};
    co_await allreduce_task(op, across, flat_allreduce(bytes));
  }
  {
    const Operation::Group group(op, node, node_arena);
    const BroadcastArgs broadcast{a.recv, a.count, a.reduction.element_size, 0,
                                  a.phases.part("node broadcast", 3, 1)};
    co_await broadcast_task(op, broadcast, inside);
  }
}

Task allreduce_hierarchical(Operation& op, AllreduceArgs a) {
  return with_node_arena<AllreduceArgs, allreduce_hierarchical_in>(op, std::move(a));
}

// Multi-leader on two nodes, pipelined: the buffer in chunks (each rank's slice of one is a
// segment), and the slices' allreduce across the two nodes in flight while the node works on the
// neighbouring chunks, so the phases inside a node and across nodes overlap chunk by chunk.
// Across two nodes the allreduce of a slice is Rabenseifner's at two ranks, in two exchanges:
// each side sends the half of its partial slice that the other completes and receives the half
// it completes (X1), combines node 0's partial with node 1's (avg divided), and sends its
// completed half back (X2). Chunk c's X1 is in flight while the node reduce-scatters chunk c + 1;
// its X2 while the node allgathers chunk c - 1 and reduce-scatters chunk c + 2. Each half is
// completed on one side only and copied: the same bits on every rank.
Task allreduce_multi_leader_two_nodes(Operation& op, const AllreduceArgs& a,
                                      const patterns::NodeLayout& layout, SharedArena* node_arena,
                                      std::size_t chunk) {
  const std::size_t elem = a.reduction.element_size;
  const std::span<const int> node = layout.members(layout.node_of(op.rank()));
  const int local = layout.local_rank(op.rank());
  const int k = static_cast<int>(node.size());
  // The ranks of this local rank, node 0's first: this rank is number node_of(rank) of them.
  const std::span<const int> peers = layout.peers(local);
  const int side = layout.node_of(op.rank());
  const int other = 1 - side;
  const Algorithm inside = node_arena != nullptr ? Algorithm::shared_memory : Algorithm::ring;
  Reduction partial = a.reduction;
  partial.divisor = 0;
  const Phases node_scatter = a.phases.part("node reduce_scatter", 0, 2);
  const Phases across = a.phases.part("across nodes", 2, 2);
  const Phases node_gather = a.phases.part("node allgather", 4, 2);
  struct Chunk {
    std::size_t begin = 0;
    std::vector<std::size_t> offsets;  // the k slices, within the chunk
    std::byte* slice = nullptr;        // this rank's, in recv
    // The slice's two halves, the one side 0 completes and the one side 1 completes.
    std::byte* half[2] = {nullptr, nullptr};
    std::size_t half_count[2] = {0, 0};
  };
  const auto chunk_at = [&](std::size_t c) {
    Chunk ch;
    ch.begin = c * chunk;
    ch.offsets = offsets_of(patterns::BlockLayout{std::min(chunk, a.count - ch.begin), k});
    const auto i = static_cast<std::size_t>(local);
    ch.slice = a.recv + (ch.begin + ch.offsets[i]) * elem;
    const std::size_t n = ch.offsets[i + 1] - ch.offsets[i];
    ch.half_count[0] = n / 2;
    ch.half_count[1] = n - n / 2;
    ch.half[0] = ch.slice;
    ch.half[1] = ch.slice + ch.half_count[0] * elem;
    return ch;
  };
  const std::size_t chunks = (a.count + chunk - 1) / chunk;
  // The other side's partial of the half this side completes (X1's receive).
  ScratchBuffer received = op.scratch(((chunk / static_cast<std::size_t>(k)) / 2 + 2) * elem);
  Transfer x1_send, x1_recv;
  // X2 of chunk c and of chunk c - 1 are in flight at once: by parity.
  Transfer x2_send[2], x2_recv[2];
  std::vector<Chunk> window(3);  // chunks c, c - 1, c - 2, by c % 3
  const auto at = [&](std::size_t c) -> Chunk& { return window[c % 3]; };
  for (std::size_t c = 0; c < chunks + 2; ++c) {
    if (c < chunks) {
      at(c) = chunk_at(c);
      const Chunk& now = at(c);
      const Operation::Group group(op, node, node_arena);
      const ReduceScatterArgs scatter{a.send + now.begin * elem, now.slice, now.offsets, partial,
                                      node_scatter};
      co_await reduce_scatter_task(op, scatter, inside);
    }
    if (c >= 1 && c - 1 < chunks) {
      // Chunk c - 1: complete this side's half, send it back.
      co_await op.wait(x1_send, x1_recv);
      const Chunk& done = at(c - 1);
      std::byte* mine = done.half[side];
      const std::byte* lower = side == 0 ? mine : received.data();
      const std::byte* upper = side == 0 ? received.data() : mine;
      a.reduction.combine(mine, lower, upper, done.half_count[side], true);
      const Operation::Group group(op, peers);
      const std::size_t parity = (c - 1) % 2;
      op.recv(x2_recv[parity], done.half[other], done.half_count[other] * elem, other, across[1]);
      op.send(x2_send[parity], mine, done.half_count[side] * elem, other, across[1]);
    }
    if (c < chunks) {
      const Chunk& now = at(c);
      const Operation::Group group(op, peers);
      op.recv(x1_recv, received.data(), now.half_count[side] * elem, other, across[0]);
      op.send(x1_send, now.half[other], now.half_count[other] * elem, other, across[0]);
    }
    if (c >= 2) {
      const std::size_t parity = (c - 2) % 2;
      co_await op.wait(x2_send[parity], x2_recv[parity]);
      const Chunk& done = at(c - 2);
      const Operation::Group group(op, node, node_arena);
      const AllgatherArgs gather{done.slice, a.recv + done.begin * elem, done.offsets, elem,
                                 node_gather};
      co_await allgather_task(op, gather, inside);
    }
  }
}

// Multi-leader: with k ranks on every node, a reduce-scatter inside each node leaves slice i of
// the node's sum on local rank i; the ranks of local rank i allreduce slice i across nodes; an
// allgather inside each node assembles the slices. Every rank's link across nodes carries 1/k
// of the buffer. Slice i is completed once, by its allreduce across nodes, and copied by the
// allgather: the same bits on every rank. The phases inside a node run through `node_arena`
// where the node has one, else as rings. Where the nodes hold different numbers of ranks it
// runs the hierarchical schedule.
Task allreduce_multi_leader_in(Operation& op, AllreduceArgs a, SharedArena* node_arena) {
  if (trivial(op, a)) co_return;
  const std::size_t elem = a.reduction.element_size;
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr) {
    co_await allreduce_task(op, a, flat_allreduce(a.count * elem));
    co_return;
  }
  if (!layout->uniform()) {
    co_await allreduce_hierarchical_in(op, a, node_arena);
    co_return;
  }
  const std::span<const int> node = layout->members(layout->node_of(op.rank()));
  const int local = layout->local_rank(op.rank());
  const int k = static_cast<int>(node.size());
  if (layout->nodes() == 2 && !op.device_memory()) {
    // Each rank's slice of a chunk four segments or more, and about 8 chunks at most: with slices
    // of one segment the chunks' messages and handoffs cost more than the overlap gave on the
    // emulated cluster (docs/PERFORMANCE.md, "Overlap across two nodes").
    const std::size_t chunk = std::max({4 * op.segment_bytes() * static_cast<std::size_t>(k) / elem,
                                        a.count / 8, static_cast<std::size_t>(k)});
    if (a.count > chunk) {
      co_await allreduce_multi_leader_two_nodes(op, a, *layout, node_arena, chunk);
      co_return;
    }
  }
  const std::vector<std::size_t> offsets = offsets_of(patterns::BlockLayout{a.count, k});
  const auto i = static_cast<std::size_t>(local);
  std::byte* const slice = a.recv + offsets[i] * elem;
  const std::size_t slice_count = offsets[i + 1] - offsets[i];
  const Algorithm inside = node_arena != nullptr ? Algorithm::shared_memory : Algorithm::ring;
  Reduction partial = a.reduction;
  partial.divisor = 0;
  {
    const Operation::Group group(op, node, node_arena);
    const ReduceScatterArgs scatter{a.send, slice, offsets, partial,
                                    a.phases.part("node reduce_scatter", 0, 2)};
    co_await reduce_scatter_task(op, scatter, inside);
  }
  {
    const Operation::Group group(op, layout->peers(local));
    const AllreduceArgs across{slice, slice, slice_count, a.reduction,
                               a.phases.part("across nodes", 2, 2)};
    co_await allreduce_task(op, across, flat_allreduce(slice_count * elem));
  }
  {
    const Operation::Group group(op, node, node_arena);
    const AllgatherArgs gather{slice, a.recv, offsets, elem, a.phases.part("node allgather", 4, 2)};
    co_await allgather_task(op, gather, inside);
  }
}

Task allreduce_multi_leader(Operation& op, AllreduceArgs a) {
  return with_node_arena<AllreduceArgs, allreduce_multi_leader_in>(op, std::move(a));
}

// ---- the latency-bound path (see run_collective) ----
// A blocking recursive doubling of at most kLatencyPathBytes, run straight through the
// transport with no coroutine or Operation: at 8 bytes the call must cost barely more than its
// messages (MPI's own MPI_Allreduce is the yardstick). Same pattern, same fold, same canonical
// order as allreduce_folded<FoldedCore::recursive_doubling>, so the result is the same bits.
bool allreduce_recursive_doubling_now(Transport& t, int tag_base, const AllreduceArgs& a) {
  const int tag = tag_base + a.phases[0];
  const int p = t.size();
  const int rank = t.rank();
  const std::size_t bytes = a.count * a.reduction.element_size;
  if (bytes > kLatencyPathBytes) return false;
  if (p == 1 || bytes == 0) {
    if (a.send != a.recv && bytes > 0) std::memcpy(a.recv, a.send, bytes);
    return true;
  }
  alignas(64) std::byte received[kLatencyPathBytes];
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  if (role == patterns::FoldRole::folded) {
    t.send_blocking(a.send, bytes, fold.fold_partner(rank), tag);
    t.recv_blocking(a.recv, bytes, fold.fold_partner(rank), tag);
    return true;
  }
  const std::byte* current = a.send;
  if (role == patterns::FoldRole::proxy) {
    t.recv_blocking(received, bytes, fold.fold_partner(rank), tag);
    a.reduction.combine(a.recv, received, a.send, a.count, false);
    current = a.recv;
  }
  const int core = fold.core_rank(rank);
  const int steps = patterns::log2_exact(fold.core_size());
  for (int s = 0; s < steps; ++s) {
    const auto step = patterns::doubling_step(core, s);
    t.sendrecv_blocking(current, received, bytes, fold.rank_of_core(step.peer_core), tag);
    a.reduction.combine(a.recv, step.lower ? current : received, step.lower ? received : current,
                        a.count, s == steps - 1);
    current = a.recv;
  }
  if (role == patterns::FoldRole::proxy)
    t.send_blocking(a.recv, bytes, fold.fold_partner(rank), tag);
  return true;
}

std::span<const AlgorithmRow> allreduce_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::allreduce>(Algorithm::ring, allreduce_ring, model::allreduce_ring),
      row<Collective::allreduce>(
          Algorithm::recursive_doubling, allreduce_folded<FoldedCore::recursive_doubling>,
          model::allreduce_recursive_doubling, allreduce_recursive_doubling_now),
      row<Collective::allreduce>(Algorithm::rabenseifner,
                                 allreduce_folded<FoldedCore::rabenseifner>,
                                 model::allreduce_rabenseifner),
      row<Collective::allreduce>(Algorithm::binomial_tree, allreduce_binomial,
                                 model::allreduce_binomial_tree),
      row<Collective::allreduce>(Algorithm::double_binary_tree, allreduce_double_binary_tree,
                                 model::allreduce_double_binary_tree),
      row<Collective::allreduce>(Algorithm::shared_memory, allreduce_shared_memory,
                                 model::allreduce_shared_memory, allreduce_shared_memory_now,
                                 Algorithm::ring),
      row<Collective::allreduce>(Algorithm::hierarchical, allreduce_hierarchical,
                                 model::allreduce_hierarchical),
      row<Collective::allreduce>(Algorithm::multi_leader, allreduce_multi_leader,
                                 model::allreduce_multi_leader),
  };
  return rows;
}

}  // namespace collx::detail
