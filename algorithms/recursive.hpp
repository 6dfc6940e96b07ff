// Recursive doubling and halving over a power-of-two core, with the non-power-of-two fold.
//
// With p = 2^k + e ranks (0 <= e < 2^k), the first 2e ranks pair up before the core phase:
// each even rank of those hands its data to the odd rank above it (its proxy) and sits out;
// after the core phase the proxy hands the result back. The 2^k remaining ranks are renumbered
// 0 .. 2^k-1 in rank order, so a lower "core rank" always stands for lower original ranks and
// combining "lower op upper" gives every rank the same bits.
#pragma once

#include <bit>
#include <cstddef>
#include <span>

#include "blocks.hpp"

namespace collx::patterns {

inline int floor_pow2(int n) {
  return static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
}

inline int log2_exact(int pow2) {
  return std::countr_zero(static_cast<unsigned>(pow2));
}

enum class FoldRole {
  core,    // takes part in the core phase with its own data only
  proxy,   // takes part in the core phase for itself and the rank below it
  folded,  // hands its data to rank+1 before the core phase, gets the result after
};

struct Fold {
  int size = 1;

  int core_size() const { return floor_pow2(size); }
  int extra() const { return size - core_size(); }
  FoldRole role(int rank) const {
    if (rank >= 2 * extra()) return FoldRole::core;
    return rank % 2 == 0 ? FoldRole::folded : FoldRole::proxy;
  }
  // The rank a folded rank hands its data to, or a proxy receives from.
  int fold_partner(int rank) const { return rank % 2 == 0 ? rank + 1 : rank - 1; }
  // Position in the core phase; -1 for a folded rank.
  int core_rank(int rank) const {
    if (rank < 2 * extra()) return rank % 2 == 0 ? -1 : rank / 2;
    return rank - extra();
  }
  int rank_of_core(int core) const { return core < extra() ? 2 * core + 1 : core + extra(); }
  // The lowest rank whose data core rank `core` holds (the folded partner for a proxy): core
  // rank c stands for the ranks [first_rank_of_core(c), first_rank_of_core(c + 1)).
  int first_rank_of_core(int core) const { return core < extra() ? 2 * core : core + extra(); }

  // The blocks of `blocks` (block r belongs to rank r) grouped by core rank: core block c is the
  // blocks of the ranks core rank c stands for, which are contiguous, so any window of core
  // ranks is one contiguous range of the buffer. `offsets` (core_size() + 1 values, the
  // caller's) receives the prefix sums.
  BlockLayout core_layout(const BlockLayout& blocks, std::span<std::size_t> offsets) const {
    const int core = core_size();
    for (int c = 0; c < core; ++c)
      offsets[static_cast<std::size_t>(c)] = blocks.offset(first_rank_of_core(c));
    offsets[static_cast<std::size_t>(core)] = blocks.count();
    return BlockLayout(std::span<const std::size_t>(offsets));
  }
};

// Recursive doubling: at step s (mask = 2^s) core rank c pairs with c ^ mask.
struct DoublingStep {
  int peer_core = 0;
  bool lower = false;  // true when this rank's data is the left operand of "lower op upper"
};
inline DoublingStep doubling_step(int core, int step) {
  const int mask = 1 << step;
  return {core ^ mask, (core & mask) == 0};
}

// `value` with its low `bits` bits in reverse order (0 <= value < 2^bits): running the
// halving and doubling steps below on core rank reverse_bits(c, k) instead of c pairs real
// ranks at distance 1 first, then 2, 4, ... (near_first in coll/fold.hpp).
inline int reverse_bits(int value, int bits) {
  int out = 0;
  for (int b = 0; b < bits; ++b)
    out |= ((value >> b) & 1) << (bits - 1 - b);
  return out;
}

// Recursive halving over 2^k blocks (Rabenseifner's reduce-scatter). Steps go from distance
// 2^(k-1) down to 1; at each, the rank keeps one half of its current window of blocks, sends
// the other half to its peer and reduces the peer's copy of the kept half into its own. After
// the last step core rank c holds block c.
struct HalvingStep {
  int peer_core = 0;
  bool lower = false;
  int keep_first = 0;  // first block of the half kept
  int send_first = 0;  // first block of the half sent
  int blocks = 0;      // blocks in each half
};
inline HalvingStep halving_step(int core, int core_size, int step) {
  const int mask = core_size >> (step + 1);
  const int window_first = core & ~(2 * mask - 1);
  const bool lower = (core & mask) == 0;
  const int low_half = window_first;
  const int high_half = window_first + mask;
  return {core ^ mask, lower, lower ? low_half : high_half, lower ? high_half : low_half, mask};
}

// Recursive-doubling allgather over 2^k blocks after the halving: at step s (distance 2^s) the
// rank sends its window of 2^s blocks and receives the peer's adjacent window.
struct GatherStep {
  int peer_core = 0;
  int send_first = 0;
  int recv_first = 0;
  int blocks = 0;
};
inline GatherStep doubling_gather_step(int core, int step) {
  const int mask = 1 << step;
  const int mine = core & ~(mask - 1);
  return {core ^ mask, mine, mine ^ mask, mask};
}

}  // namespace collx::patterns
