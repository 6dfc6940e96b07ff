// Which samples a rank trains on: one permutation per epoch shared by every rank (a function of
// the seed and the epoch only), cut into global batches, each batch cut into one contiguous
// share per rank, so the union of a step's shares is exactly the single-process batch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace collx::train {

struct Range {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
  bool empty() const { return end == begin; }
  friend bool operator==(const Range&, const Range&) = default;
};

// Part `index` of `total` items cut into `parts` contiguous parts whose sizes differ by at most
// one (the larger parts last): [total * index / parts, total * (index + 1) / parts).
Range split_evenly(std::size_t total, std::size_t parts, std::size_t index);

// Fisher-Yates shuffle of 0 .. rows-1 from a generator seeded with (seed, epoch).
std::vector<std::uint32_t> epoch_permutation(std::size_t rows, std::uint64_t seed,
                                             std::int64_t epoch);

// Every sample once per epoch: the last batch holds the remainder (it may be smaller).
std::size_t steps_per_epoch(std::size_t rows, std::size_t batch);
// Positions [begin, end) of the permutation that form global batch `step` of an epoch.
Range batch_positions(std::size_t rows, std::size_t batch, std::size_t step);
// The part of a global batch that `rank` trains on.
inline Range rank_slice(Range batch, int rank, int nranks) {
  const Range part =
      split_evenly(batch.size(), static_cast<std::size_t>(nranks), static_cast<std::size_t>(rank));
  return {batch.begin + part.begin, batch.begin + part.end};
}

}  // namespace collx::train
