#include "sampler.hpp"

#include <numeric>

#include "random.hpp"

namespace collx::train {

Range split_evenly(std::size_t total, std::size_t parts, std::size_t index) {
  // 128-bit products: total * index must not overflow for any real data set size.
  const auto cut = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned __int128>(total) * i / parts);
  };
  return {cut(index), cut(index + 1)};
}

std::vector<std::uint32_t> epoch_permutation(std::size_t rows, std::uint64_t seed,
                                             std::int64_t epoch) {
  std::vector<std::uint32_t> order(rows);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  Random random(mix64(seed) ^ mix64(0xE90C4ull + static_cast<std::uint64_t>(epoch)));
  for (std::size_t i = rows; i > 1; --i) {
    const std::size_t j = random.below(i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::size_t steps_per_epoch(std::size_t rows, std::size_t batch) {
  return (rows + batch - 1) / batch;
}

Range batch_positions(std::size_t rows, std::size_t batch, std::size_t step) {
  const std::size_t begin = step * batch;
  return {begin, begin + batch < rows ? begin + batch : rows};
}

}  // namespace collx::train
