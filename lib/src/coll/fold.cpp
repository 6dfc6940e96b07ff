#include "fold.hpp"

#include "pipeline.hpp"

namespace collx::detail {

Task fold_out(Operation& op, FoldMessages fold, int proxy, const std::byte* data, std::size_t count,
              std::byte* result, std::size_t result_count) {
  if (fold.reduction != nullptr) {
    co_await send_for_reduction(op, proxy, data, count, *fold.reduction, fold.phases);
  } else {
    Transfer send;
    op.send(send, data, count * fold.element_size, proxy, fold.phases[0]);
    co_await op.wait(send);
  }
  Transfer recv;
  op.recv(recv, result, result_count * fold.element_size, proxy, fold.phases[fold.result_phase]);
  co_await op.wait(recv);
}

Task fold_in(Operation& op, FoldMessages fold, int folded, std::byte* dst, const std::byte* own,
             std::size_t count) {
  if (fold.reduction != nullptr) {
    co_await exchange_reduce(op, {.peer = folded,
                                  .dst = dst,
                                  .local = own,
                                  .recv_elems = count,
                                  .local_is_lower = false,
                                  .reduction = fold.reduction,
                                  .phases = fold.phases});
  } else {
    Transfer recv;
    op.recv(recv, dst, count * fold.element_size, folded, fold.phases[0]);
    co_await op.wait(recv);
  }
}

Task fold_return(Operation& op, FoldMessages fold, int folded, const std::byte* result,
                 std::size_t count) {
  Transfer send;
  op.send(send, result, count * fold.element_size, folded, fold.phases[fold.result_phase]);
  co_await op.wait(send);
}

namespace {
// A core rank's number in the steps' order, and back (bit reversal is its own inverse).
int ordered(int core, int steps, PairOrder order) {
  return order == PairOrder::near_first ? patterns::reverse_bits(core, steps) : core;
}
}  // namespace

Task halving_reduce_scatter(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                            const std::byte* input, std::byte* dst, const Reduction& reduction,
                            Phases phases, PairOrder order) {
  const std::size_t elem = reduction.element_size;
  const int core_size = fold.core_size();
  const int steps = patterns::log2_exact(core_size);
  const int core = ordered(fold.core_rank(op.rank()), steps, order);
  const std::byte* current = input;
  for (int s = 0; s < steps; ++s) {
    const auto step = patterns::halving_step(core, core_size, s);
    const std::size_t keep = layout.offset(step.keep_first) * elem;
    const std::size_t send = layout.offset(step.send_first) * elem;
    co_await exchange_reduce(op, {.peer = fold.rank_of_core(ordered(step.peer_core, steps, order)),
                                  .send = current + send,
                                  .send_elems = layout.length(step.send_first, step.blocks),
                                  .dst = dst + keep,
                                  .local = current + keep,
                                  .recv_elems = layout.length(step.keep_first, step.blocks),
                                  .local_is_lower = step.lower,
                                  .finalize = s == steps - 1,
                                  .reduction = &reduction,
                                  .phases = phases});
    current = dst;
  }
}

Task doubling_allgather(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                        std::byte* buffer, std::size_t element_size, int phase, PairOrder order) {
  const int steps = patterns::log2_exact(fold.core_size());
  const int core = ordered(fold.core_rank(op.rank()), steps, order);
  for (int s = 0; s < steps; ++s) {
    const auto step = patterns::doubling_gather_step(core, s);
    const int peer = fold.rank_of_core(ordered(step.peer_core, steps, order));
    Transfer send;
    Transfer recv;
    op.recv(recv, buffer + layout.offset(step.recv_first) * element_size,
            layout.length(step.recv_first, step.blocks) * element_size, peer, phase);
    op.send(send, buffer + layout.offset(step.send_first) * element_size,
            layout.length(step.send_first, step.blocks) * element_size, peer, phase);
    co_await op.wait(send, recv);
  }
}

void AcrossNodes::post(Transfer& send, Transfer& recv, std::byte* region,
                       std::span<const std::size_t> blocks, std::byte* received, int e) const {
  const Operation::Group group(op, peers);
  const bool halving = e < steps();
  const auto h = patterns::halving_step(node, nodes, halving ? e : 2 * steps() - 1 - e);
  const std::size_t elem = reduction->element_size;
  const auto at = [&](int first) {
    return region + blocks[static_cast<std::size_t>(first)] * elem;
  };
  const auto bytes = [&](int first) {
    return (blocks[static_cast<std::size_t>(first + h.blocks)] -
            blocks[static_cast<std::size_t>(first)]) *
           elem;
  };
  if (halving) {
    op.recv(recv, received, bytes(h.keep_first), h.peer_core, phases[0]);
    op.send(send, at(h.send_first), bytes(h.send_first), h.peer_core, phases[0]);
  } else {
    op.recv(recv, at(h.send_first), bytes(h.send_first), h.peer_core, phases[1]);
    op.send(send, at(h.keep_first), bytes(h.keep_first), h.peer_core, phases[1]);
  }
}

void AcrossNodes::combine(std::byte* region, std::span<const std::size_t> blocks,
                          const std::byte* received, int e) const {
  const auto h = patterns::halving_step(node, nodes, e);
  const std::size_t first = blocks[static_cast<std::size_t>(h.keep_first)];
  std::byte* own = region + first * reduction->element_size;
  reduction->combine(own, h.lower ? own : received, h.lower ? received : own,
                     blocks[static_cast<std::size_t>(h.keep_first + h.blocks)] - first,
                     e == steps() - 1);
}

}  // namespace collx::detail
