// Reduce-scatter (equal or per-rank block lengths): ring, and recursive halving with the
// non-power-of-two fold. Rank r ends with block r of the reduction.
#include <cstring>

#include "collectives.hpp"
#include "collx/error.hpp"
#include "pipeline.hpp"
#include "recursive.hpp"
#include "registry.hpp"
#include "ring.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;

// The block this rank keeps; when recv aliases send (in place) the result is built elsewhere
// and copied in at the end, after every send from `send` is done.
struct Destination {
  ScratchBuffer staging;
  std::byte* target = nullptr;
};
Destination destination(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks) {
  const std::size_t bytes = blocks.length(op.rank()) * a.reduction.element_size;
  const std::byte* send_end = a.send + blocks.count() * a.reduction.element_size;
  const bool aliased = a.recv + bytes > a.send && a.recv < send_end && bytes > 0;
  Destination d;
  if (aliased) {
    d.staging = op.scratch(bytes);
    d.target = d.staging.data();
  } else {
    d.target = a.recv;
  }
  return d;
}

void finish(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks,
            const Destination& d) {
  if (d.target != a.recv) {
    op.copy(a.recv, d.target, blocks.length(op.rank()) * a.reduction.element_size);
  }
}

// One rank: its block is its input.
void copy_own_block(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks,
                    const Destination& d) {
  const std::size_t elem = a.reduction.element_size;
  op.move(d.target, a.send + blocks.offset(op.rank()) * elem, blocks.length(op.rank()) * elem);
}

Task reduce_scatter_ring(Operation& op, ReduceScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  Destination d = destination(op, a, blocks);
  const int p = op.size();
  if (p == 1) {
    copy_own_block(op, a, blocks, d);
  } else if (blocks.count() > 0) {
    // Intermediate sums live in two block-sized buffers; the owned block is finished in place.
    ScratchBuffer partial = op.scratch(
        p > 2 ? ring_partial_bytes(blocks, a.reduction.element_size, op.segment_bytes()) : 0);
    co_await ring_stream(op, {.ring = {op.rank(), p, 0},
                              .layout = blocks,
                              .input = a.send,
                              .output = nullptr,
                              .partial = partial.data(),
                              .owned_output = d.target,
                              .reduction = &a.reduction,
                              .element_size = a.reduction.element_size,
                              .first_step = 0,
                              .end_step = p - 1,
                              .phases = a.phases});
  }
  finish(op, a, blocks, d);
}

Task reduce_scatter_recursive_halving(Operation& op, ReduceScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  Destination d = destination(op, a, blocks);
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t elem = a.reduction.element_size;
  if (p == 1 || blocks.count() == 0) {
    if (p == 1) copy_own_block(op, a, blocks, d);
    finish(op, a, blocks, d);
    co_return;
  }
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  if (role == patterns::FoldRole::folded) {
    // Hand everything to the proxy (in the segments its receive-and-reduce expects), then get
    // this rank's finished block back.
    const int proxy = fold.fold_partner(rank);
    co_await exchange_reduce(op, {.peer = proxy,
                                  .send = a.send,
                                  .send_elems = blocks.count(),
                                  .reduction = &a.reduction,
                                  .phases = a.phases});
    Transfer recv;
    op.recv(recv, d.target, blocks.length(rank) * elem, proxy, a.phases[1]);
    co_await op.wait(recv);
    finish(op, a, blocks, d);
    co_return;
  }
  // The full-length accumulator: what this rank has reduced so far.
  ScratchBuffer accumulator = op.scratch(blocks.count() * elem);
  const std::byte* current = a.send;
  if (role == patterns::FoldRole::proxy) {
    co_await exchange_reduce(op, {.peer = fold.fold_partner(rank),
                                  .dst = accumulator.data(),
                                  .local = a.send,
                                  .recv_elems = blocks.count(),
                                  .local_is_lower = false,
                                  .reduction = &a.reduction,
                                  .phases = a.phases});
    current = accumulator.data();
  }
  // Core rank c's share is the blocks of the ranks it stands for: contiguous.
  const int core_size = fold.core_size();
  std::vector<std::size_t> core_offsets(static_cast<std::size_t>(core_size) + 1);
  for (int c = 0; c < core_size; ++c) {
    core_offsets[static_cast<std::size_t>(c)] = blocks.offset(fold.first_rank_of_core(c));
  }
  core_offsets.back() = blocks.count();
  const BlockLayout core_blocks(core_offsets);
  const int core = fold.core_rank(rank);
  const int steps = patterns::log2_exact(core_size);
  for (int s = 0; s < steps; ++s) {
    const auto step = patterns::halving_step(core, core_size, s);
    const std::size_t keep = core_blocks.offset(step.keep_first) * elem;
    const std::size_t send = core_blocks.offset(step.send_first) * elem;
    co_await exchange_reduce(op, {.peer = fold.rank_of_core(step.peer_core),
                                  .send = current + send,
                                  .send_elems = core_blocks.length(step.send_first, step.blocks),
                                  .dst = accumulator.data() + keep,
                                  .local = current + keep,
                                  .recv_elems = core_blocks.length(step.keep_first, step.blocks),
                                  .local_is_lower = step.lower,
                                  .finalize = s == steps - 1,
                                  .reduction = &a.reduction,
                                  .phases = a.phases});
    current = accumulator.data();
  }
  // This rank's block out of the accumulator; a proxy also returns its folded partner's.
  op.copy(d.target, current + blocks.offset(rank) * elem, blocks.length(rank) * elem);
  if (role == patterns::FoldRole::proxy) {
    const int folded = fold.fold_partner(rank);
    Transfer send;
    op.send(send, current + blocks.offset(folded) * elem, blocks.length(folded) * elem, folded,
            a.phases[1]);
    co_await op.wait(send);
  }
  finish(op, a, blocks, d);
}

}  // namespace

std::span<const AlgorithmRow> reduce_scatter_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::reduce_scatter>(Algorithm::ring, reduce_scatter_ring,
                                      model::reduce_scatter_ring),
      row<Collective::reduce_scatter>(Algorithm::recursive_halving,
                                      reduce_scatter_recursive_halving,
                                      model::reduce_scatter_recursive_halving),
  };
  return rows;
}

}  // namespace collx::detail
