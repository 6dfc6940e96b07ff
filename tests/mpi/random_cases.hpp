// Random integer-valued inputs for reductions, reproducible on every rank, with the exact
// reduction over all ranks computed locally.
#pragma once

#include <cstdint>
#include <vector>

#include "collx/algorithm.hpp"
#include "collx/types.hpp"
#include "exact_data.hpp"

namespace collx::testing {

// Random small integers, the same on every rank for a given (seed, rank): every rank can
// rebuild every other rank's input and compute the exact reduction itself.
inline std::int64_t random_input(ReduceOp op, bool is_unsigned, std::uint64_t seed, int rank,
                                 std::size_t i) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull +
                    static_cast<std::uint64_t>(rank) * 0xBF58476D1CE4E5B9ull +
                    i * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return static_cast<std::int64_t>(x % 4);  // sum <= 3 * 8: exact even in bfloat16
    case ReduceOp::prod:
      return x % 5 == 0 ? 2 : 1;  // products of up to 8 ranks <= 256
    case ReduceOp::min:
    case ReduceOp::max:
      return is_unsigned ? static_cast<std::int64_t>(x % 101)
                         : static_cast<std::int64_t>(x % 101) - 50;
  }
  return 0;
}

struct Case {
  std::vector<std::byte> input;
  std::vector<std::byte> expected;
};

inline Case make_case(DataType type, ReduceOp op, std::size_t count, int rank, int nranks,
                      std::uint64_t seed) {
  const bool is_unsigned =
      type == DataType::uint8 || type == DataType::uint32 || type == DataType::uint64;
  Case c;
  c.input.resize(count * collx::size_of(type));
  c.expected.resize(count * collx::size_of(type));
  for (std::size_t i = 0; i < count; ++i) {
    collx::verify::store_integer(c.input.data(), type, i,
                                 random_input(op, is_unsigned, seed, rank, i));
    std::int64_t acc = random_input(op, is_unsigned, seed, 0, i);
    for (int r = 1; r < nranks; ++r) {
      const std::int64_t v = random_input(op, is_unsigned, seed, r, i);
      if (op == ReduceOp::sum || op == ReduceOp::avg) acc += v;
      if (op == ReduceOp::prod) acc *= v;
      if (op == ReduceOp::min) acc = v < acc ? v : acc;
      if (op == ReduceOp::max) acc = v > acc ? v : acc;
    }
    if (op == ReduceOp::avg) {
      collx::verify::store_average(c.expected.data(), type, i, acc, nranks);
    } else {
      collx::verify::store_integer(c.expected.data(), type, i, acc);
    }
  }
  return c;
}

// Roots every rooted collective is tested with: the first, the middle and the last rank.
inline std::vector<int> test_roots(int p) {
  std::vector<int> r{0};
  if (p > 2) r.push_back(p / 2);
  if (p > 1) r.push_back(p - 1);
  return r;
}

// A collective's algorithms with auto at the end.
inline std::vector<Algorithm> algorithms_with_auto(Collective c) {
  const auto algos = algorithms_of(c);
  std::vector<Algorithm> out(algos.begin(), algos.end());
  out.push_back(Algorithm::automatic);
  return out;
}

}  // namespace collx::testing
