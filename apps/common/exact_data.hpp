// Inputs whose reduction is known exactly, for collx-bench's -c check and the tests.
//
// Every input element is a small integer, so every partial result is exactly representable in
// every type (bfloat16's 8-bit mantissa included, up to 64 ranks) and the result is the same
// in any combining order: a wrong element means a wrong algorithm, not rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collx/types.hpp"

namespace collx::verify {

// Value of element i of `rank`'s input for an `op` reduction over `nranks` ranks.
std::int64_t input_value(ReduceOp op, int rank, int nranks, std::size_t i);

// The exact reduction of element i over all ranks, as a double (integer types: before the
// wrap-around of the type, which expected_bits applies).
double expected_value(ReduceOp op, int nranks, std::size_t i);

// Fills `count` elements of `buffer` (of `type`) with this rank's input.
void fill_input(void* buffer, DataType type, ReduceOp op, int rank, int nranks, std::size_t count);

// Number of elements of `result` that differ (bitwise) from the exact reduction over `nranks`
// ranks. `first` is the index of result[0] in the full vector (for scattered results).
std::size_t count_wrong(const void* result, DataType type, ReduceOp op, int nranks,
                        std::size_t count, std::size_t first = 0);

// Writes the exact reduction of elements [first, first + count) into `out` (of `type`), for
// comparing many results against one expectation (memcmp) instead of recomputing it each time.
void fill_expected(void* out, DataType type, ReduceOp op, int nranks, std::size_t count,
                   std::size_t first = 0);

// Element `index` of `buffer` (of `type`) set to an integer value (wrapping for integer types,
// exact for the floating types within their integer range).
void store_integer(void* buffer, DataType type, std::size_t index, std::int64_t value);
// Element `index` set to exact_sum / nranks as the library's fused avg computes it.
void store_average(void* buffer, DataType type, std::size_t index, std::int64_t exact_sum,
                   int nranks);

// Fills a buffer with a rank-specific pattern (no reduction): element i of rank r.
void fill_pattern(void* buffer, DataType type, int rank, std::size_t count, std::size_t first = 0);
// Elements of `buffer` that differ from fill_pattern(rank, count, first).
std::size_t count_pattern_wrong(const void* buffer, DataType type, int rank, std::size_t count,
                                std::size_t first = 0);

}  // namespace collx::verify
