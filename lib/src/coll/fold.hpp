// The non-power-of-two fold (patterns::Fold) around the recursive doubling and halving cores of
// allreduce, allgather and reduce_scatter, the two core loops they share, and the node-aware
// pipelines' halving and doubling across nodes (AcrossNodes).
#pragma once

#include <bit>
#include <cstddef>
#include <span>

#include "blocks.hpp"
#include "operation.hpp"
#include "recursive.hpp"
#include "reduction.hpp"

namespace collx::detail {

// What crosses the fold for one collective: before the core phase the folded rank's data goes
// to its proxy on phases[0] (with a reduction, in exchange_reduce's segments, the folded rank
// standing for the lower); after it the proxy returns the result on phases[result_phase].
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

// Which pairs the halving and doubling steps meet first. far_first: core ranks c and
// c ^ (core_size / 2) first, and core rank c ends with block c. near_first: the steps run on
// bit-reversed core numbers, so the largest exchanges pair neighbours (c ^ 1, c ^ 2, ...) and
// core rank c ends with block reverse_bits(c), which a doubling allgather in the same order
// gathers back; with ranks placed in blocks on nodes the big halves stay inside a node.
enum class PairOrder { far_first, near_first };

// Recursive halving over the core ranks on the core_size() blocks of `layout`: afterwards core
// rank c holds block c (far_first) or reverse_bits(c) (near_first) of the reduction at its
// place in `dst`. The first step reads `input`, later ones `dst`. Uses phase 0 of `phases`.
Task halving_reduce_scatter(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                            const std::byte* input, std::byte* dst, const Reduction& reduction,
                            Phases phases, PairOrder order = PairOrder::far_first);
// Recursive doubling over the core ranks: the block each holds after halving_reduce_scatter in
// the same `order` reaches every core rank, on tag `phase`.
Task doubling_allgather(Operation& op, patterns::Fold fold, patterns::BlockLayout layout,
                        std::byte* buffer, std::size_t element_size, int phase,
                        PairOrder order = PairOrder::far_first);

// The exchanges across 2^L nodes of the pipelined node-aware schedules, among the ranks of one
// local rank (`peers`, by node). A node segment's region, `blocks` (nodes + 1 offsets, elements),
// is reduced by recursive halving (exchanges e < L, far pairs first, on phases[0]), which leaves
// block v on node v, and for an allreduce gathered back by recursive doubling (exchanges
// L <= e < 2L, on phases[1]). A halving exchange receives the peer's partial of the half this
// rank keeps into `received`; combine() reduces it once the exchange is done.
struct AcrossNodes {
  Operation& op;
  std::span<const int> peers;
  int node = 0;
  int nodes = 1;
  Phases phases;
  const Reduction* reduction = nullptr;
  int steps() const { return std::countr_zero(static_cast<unsigned>(nodes)); }
  void post(Transfer& send, Transfer& recv, std::byte* region, std::span<const std::size_t> blocks,
            std::byte* received, int e) const;
  void combine(std::byte* region, std::span<const std::size_t> blocks, const std::byte* received,
               int e) const;
};

}  // namespace collx::detail
