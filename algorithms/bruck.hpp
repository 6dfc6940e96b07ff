// Bruck's allgather and alltoall: ceil(log2 p) steps for any rank count, on a copy of the buffer
// rotated so that this rank's own block comes first (position i holds the block of rank + i).
// In the step of distance d = 2^k a rank sends to rank - d (allgather) or rank + d (alltoall)
// and receives from the other side.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "blocks.hpp"
#include "ring.hpp"  // wrap()
#include "tree.hpp"  // dissemination_rounds(), pairwise_step()

namespace collx::patterns {

inline int bruck_steps(int size) {
  return dissemination_rounds(size);
}

// The rotation: the block at position `position` of `rank`'s rotated copy, and its inverse.
inline int bruck_block_at(int rank, int position, int size) {
  return wrap(rank + position, size);
}
inline int bruck_position_of(int rank, int block, int size) {
  return wrap(block - rank, size);
}

// The rotated copy's layout for blocks of any length: position i has the length of block
// bruck_block_at(rank, i). `offsets` (size + 1 values, the caller's) receives its prefix sums.
inline BlockLayout bruck_rotated_layout(int rank, const BlockLayout& blocks,
                                        std::span<std::size_t> offsets) {
  const int size = blocks.nblocks();
  offsets[0] = 0;
  for (int i = 0; i < size; ++i) {
    offsets[static_cast<std::size_t>(i) + 1] =
        offsets[static_cast<std::size_t>(i)] + blocks.length(bruck_block_at(rank, i, size));
  }
  return BlockLayout(std::span<const std::size_t>(offsets));
}

// Allgather, step of distance `distance`: the rank holds positions [0, distance) and sends the
// first `blocks` of them to `send_to`, while `blocks` positions arrive from `recv_from` into
// [distance, distance + blocks). After the last step it holds every position.
struct BruckGatherStep {
  int send_to = 0;
  int recv_from = 0;
  int blocks = 0;
};
inline BruckGatherStep bruck_allgather_step(int rank, int size, int distance) {
  return {wrap(rank - distance, size), wrap(rank + distance, size),
          std::min(distance, size - distance)};
}

// Alltoall, step of distance `distance`: the positions whose index has that bit set go to
// rank + distance (packed into one message) and the same positions arrive from rank - distance.
inline PairwiseStep bruck_alltoall_step(int rank, int size, int distance) {
  return pairwise_step(rank, size, distance);
}
inline bool bruck_alltoall_moves(int position, int distance) {
  return (position & distance) != 0;
}
// After the last alltoall step, position i holds what rank - i sent to this rank.
inline int bruck_alltoall_source(int rank, int position, int size) {
  return wrap(rank - position, size);
}

}  // namespace collx::patterns
