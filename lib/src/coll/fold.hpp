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

// Recursive halving over the core ranks (patterns::halving_step) on the core_size() blocks of
// `layout`: afterwards core rank c holds block c of the reduction at its place in `dst`. The
// first step reads `input`, later ones `dst`; the last step applies the reduction's finalize.
// Uses phase 0 of `phases`.
Task halving_reduce_scatter(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                            const std::byte* input, std::byte* dst, const Reduction& reduction,
                            Phases phases);
// Recursive doubling over the core ranks (patterns::doubling_gather_step): block c of `layout`
// in `buffer`, held by core rank c, reaches every core rank. Every message uses tag `phase`.
Task doubling_allgather(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                        std::byte* buffer, std::size_t element_size, int phase);

}  // namespace collx::detail
