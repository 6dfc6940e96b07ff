// The blocks of the arena's reductions: which part of a buffer each rank reduces, cut into
// pieces that a round of the pipeline handles.
//
// Rank r owns block r of the buffer (offsets[r] .. offsets[r+1] elements: its reduce_scatter
// block, or its 1/p of an allreduce). Round k handles piece k of every block: at most
// `piece` elements from the block's start + k * piece. All ranks derive the same rounds and
// pieces from the same offsets, so a piece is always where its readers look for it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace collx::patterns {

struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t length() const { return end - begin; }
};

// `count` elements of `element_size` bytes in `nblocks` blocks that start on whole `line`s of
// bytes where the element size divides the line (so each rank's vector loop starts aligned as
// the buffer is), as even as whole lines allow; the last block takes the ragged tail. Returns
// nblocks + 1 prefix sums.
inline std::vector<std::size_t> line_aligned_offsets(std::size_t count, std::size_t element_size,
                                                     int nblocks, std::size_t line = 64) {
  const std::size_t unit =
      element_size > 0 && line % element_size == 0 ? line / element_size : std::size_t{1};
  const std::size_t units = (count + unit - 1) / unit;
  const auto p = static_cast<std::size_t>(nblocks);
  std::vector<std::size_t> offsets(p + 1);
  for (std::size_t b = 0; b <= p; ++b)
    offsets[b] = std::min(count, units * b / p * unit);
  offsets[p] = count;
  return offsets;
}

// Piece `round` of block `block`: empty once the block has fewer rounds than the longest.
inline ElementRange piece_of(std::span<const std::size_t> offsets, int block, std::size_t round,
                             std::size_t piece) {
  const auto b = static_cast<std::size_t>(block);
  const std::size_t begin = std::min(offsets[b + 1], offsets[b] + round * piece);
  return {begin, std::min(offsets[b + 1], begin + piece)};
}

// Rounds needed for the longest block (0 when every block is empty).
inline std::size_t rounds_of(std::span<const std::size_t> offsets, std::size_t piece) {
  std::size_t longest = 0;
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b)
    longest = std::max(longest, offsets[b + 1] - offsets[b]);
  return (longest + piece - 1) / piece;
}

// Elements per piece: `target_bytes` of them, but no more than fit `nblocks` pieces side by
// side in `capacity_bytes` (a ring slot holds one piece per block); 0 when not even one
// element per block fits.
inline std::size_t piece_elements(std::size_t target_bytes, std::size_t capacity_bytes, int nblocks,
                                  std::size_t element_size) {
  const std::size_t per_block = capacity_bytes / static_cast<std::size_t>(nblocks);
  return std::min(target_bytes, per_block) / element_size;
}

}  // namespace collx::patterns
