// How a buffer of `count` elements is cut into blocks and segments.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

namespace collx::patterns {

// `count` elements in `nblocks` contiguous blocks. Either even (lengths differ by at most one:
// the first count % nblocks blocks carry the extra element) or given by explicit offsets (the
// prefix sums of per-block counts, nblocks + 1 values, owned by the caller). Every rank computes
// the same layout, so the two ends of a message always agree on its length (zero included).
class BlockLayout {
 public:
  BlockLayout() = default;
  // The divisions happen once here: offsets and lengths are asked for on every message.
  BlockLayout(std::size_t count, int nblocks)
      : count_(count),
        nblocks_(nblocks),
        base_(count / static_cast<std::size_t>(nblocks)),
        remainder_(count % static_cast<std::size_t>(nblocks)) {}
  explicit BlockLayout(std::span<const std::size_t> offsets)
      : count_(offsets.back()), nblocks_(static_cast<int>(offsets.size()) - 1), offsets_(offsets) {}

  std::size_t count() const { return count_; }
  int nblocks() const { return nblocks_; }
  std::size_t offset(int block) const {
    if (!offsets_.empty()) return offsets_[static_cast<std::size_t>(block)];
    const auto b = static_cast<std::size_t>(block);
    return b * base_ + std::min(b, remainder_);
  }
  std::size_t length(int block) const {
    if (!offsets_.empty()) return offset(block + 1) - offset(block);
    return base_ + (static_cast<std::size_t>(block) < remainder_ ? 1 : 0);
  }
  // Elements of the blocks [first, first + n).
  std::size_t length(int first, int n) const { return offset(first + n) - offset(first); }
  std::size_t max_length() const {
    if (offsets_.empty()) return length(0);
    std::size_t longest = 0;
    for (int b = 0; b < nblocks_; ++b)
      longest = std::max(longest, length(b));
    return longest;
  }

 private:
  std::size_t count_ = 0;
  int nblocks_ = 1;
  std::size_t base_ = 0;
  std::size_t remainder_ = 0;
  std::span<const std::size_t> offsets_;
};

// A block of `length` elements moved in `segments` pieces of near-equal length (the same rule
// as BlockLayout, so the pieces of one block are known to both ends without negotiation).
inline int segment_count(std::size_t length_bytes, std::size_t segment_bytes) {
  if (segment_bytes == 0 || length_bytes <= segment_bytes) return 1;
  return static_cast<int>((length_bytes + segment_bytes - 1) / segment_bytes);
}

}  // namespace collx::patterns
