// Algorithm selection: explicit option, then COLLX_ALGO, then the decision table.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx::detail {

// One row of a decision table: for `collective` on [min_ranks, max_ranks] ranks and messages
// of at most `max_bytes` bytes (the whole buffer, as collx-bench counts size), use `algorithm`.
// The first matching row wins.
struct SelectionRule {
  Collective collective;
  int min_ranks;
  int max_ranks;
  std::size_t max_bytes;
  Algorithm algorithm;
};
inline constexpr std::size_t kAnySize = std::numeric_limits<std::size_t>::max();
inline constexpr int kAnyRanks = std::numeric_limits<int>::max();

// The table compiled into the library (derived from collx-bench runs, see docs/PERFORMANCE.md).
std::span<const SelectionRule> builtin_rules();
std::span<const SelectionRule> builtin_rules_of(Collective collective);

// What `auto` picks for this call from `rules`. Rows naming Algorithm::shared_memory count only
// where `shared_memory` (the ranks share a segment and the buffers are host memory).
Algorithm select_from(std::span<const SelectionRule> rules, Collective collective,
                      std::size_t bytes, int nranks, bool shared_memory = false);

// The algorithm a call runs: `requested` unless automatic, then COLLX_ALGO, then the table.
// Throws ErrorCode::unsupported if the collective does not implement the requested algorithm.
Algorithm resolve_algorithm(Collective collective, Algorithm requested, std::size_t bytes,
                            int nranks, int rank, bool shared_memory = false);

std::string describe_rules(std::span<const SelectionRule> rules);

}  // namespace collx::detail
