// The non-power-of-two fold (patterns::Fold) around the recursive doubling and halving cores of
// allreduce, allgather and reduce_scatter, and the two core loops they share. Each is one
// coroutine that its callers co_await, so the three collectives post the same messages in the
// same order through one piece of code.
#pragma once

#include <cstddef>

#include "blocks.hpp"
#include "operation.hpp"
#include "recursive.hpp"
#include "reduction.hpp"

namespace collx::detail {

// What crosses the fold for one collective. Before the core phase a folded rank hands its data
// to its proxy on phases[0]: with a reduction, in the segments the proxy's exchange_reduce
// combines as "folded op proxy's own" (the folded rank stands for the lower rank); without one,
// the proxy receives it as it is. After the core phase the proxy hands the folded rank its
// result on phases[result_phase]. Counts are in elements of `element_size` bytes.
struct FoldMessages {
  const Reduction* reduction = nullptr;
  std::size_t element_size = 1;
  Phases phases;
  int result_phase = 0;
};

// The folded rank: `count` elements of `data` to `proxy`, then `result_count` elements of the
// result from it into `result`.
Task fold_out(Operation& op, FoldMessages fold, int proxy, const std::byte* data, std::size_t count,
              std::byte* result, std::size_t result_count);
// The proxy before the core phase: `count` elements from `folded` into `dst` (reduced with
// `own`, which may not overlap `dst`, when the collective reduces).
Task fold_in(Operation& op, FoldMessages fold, int folded, std::byte* dst, const std::byte* own,
             std::size_t count);
// The proxy after the core phase: `count` elements of `result` to `folded`.
Task fold_return(Operation& op, FoldMessages fold, int folded, const std::byte* result,
                 std::size_t count);

// Which pairs the halving and doubling steps below meet in first. far_first: the halving's
// first step (half the buffer) pairs core ranks c and c ^ (core_size / 2), and core rank c ends
// with block c (what a reduce-scatter needs). near_first: the steps run on the core ranks'
// bit-reversed numbers, so the halving's largest exchanges pair neighbours (c ^ 1, then c ^ 2,
// ...) and only its last, smallest ones the ranks farthest apart; core rank c ends with block
// reverse_bits(c), which an allgather over the same order gathers back. With ranks placed in
// blocks on nodes (8 per node: ranks 0-7 on the first), near_first keeps the halves and quarters
// inside a node and sends a node's link 1/k of what far_first sends through it (MPICH's order;
// docs/SCALE.md, "Rabenseifner's pairs").
enum class PairOrder { far_first, near_first };

// Recursive halving over the core ranks (patterns::halving_step) on the core_size() blocks of
// `layout`: afterwards core rank c holds block c (far_first) or block reverse_bits(c)
// (near_first) of the reduction at its place in `dst`. The first step reads `input`, later ones
// `dst`; the last step applies the reduction's finalize. Uses phase 0 of `phases`.
Task halving_reduce_scatter(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                            const std::byte* input, std::byte* dst, const Reduction& reduction,
                            Phases phases, PairOrder order = PairOrder::far_first);
// Recursive doubling over the core ranks (patterns::doubling_gather_step): the block each core
// rank holds after halving_reduce_scatter in the same `order` reaches every core rank. Every
// message uses tag `phase`.
Task doubling_allgather(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                        std::byte* buffer, std::size_t element_size, int phase,
                        PairOrder order = PairOrder::far_first);

}  // namespace collx::detail
