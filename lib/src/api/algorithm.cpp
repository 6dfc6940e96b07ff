#include "collx/algorithm.hpp"

#include <algorithm>
#include <array>
#include <vector>

#include "registry.hpp"

namespace collx {

namespace {

#define COLLX_NAME(name) #name,
constexpr std::string_view kCollectiveNames[] = {COLLX_COLLECTIVE_LIST(COLLX_NAME)};
constexpr std::string_view kAlgorithmNames[] = {COLLX_ALGORITHM_LIST(COLLX_NAME)};
#undef COLLX_NAME

// The algorithm lists, one per collective, in the registry's row order.
const std::array<std::vector<Algorithm>, kCollectiveCount>& lists() {
  static const auto built = [] {
    std::array<std::vector<Algorithm>, kCollectiveCount> out;
    for (const detail::AlgorithmRow& row : detail::registry())
      if (!row.mpi_library) out[static_cast<std::size_t>(row.collective)].push_back(row.algorithm);
    return out;
  }();
  return built;
}

}  // namespace

std::string_view to_string(Collective collective) {
  const auto i = static_cast<std::size_t>(collective);
  return i < std::size(kCollectiveNames) ? kCollectiveNames[i] : "invalid";
}

std::string_view to_string(Algorithm algorithm) {
  if (algorithm == Algorithm::automatic) return "auto";
  const auto i = static_cast<std::size_t>(algorithm);
  return i < std::size(kAlgorithmNames) ? kAlgorithmNames[i] : "invalid";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kCollectiveNames); ++i) {
    if (kCollectiveNames[i] == name) return static_cast<Collective>(i);
  }
  if (name == "bcast") return Collective::broadcast;
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kAlgorithmNames); ++i) {
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  }
  if (name == "auto") return Algorithm::automatic;
  if (name == "shm") return Algorithm::shared_memory;
  return std::nullopt;
}

std::span<const Algorithm> algorithms_of(Collective collective) {
  const auto i = static_cast<std::size_t>(detail::schedules_of(collective));
  if (i >= kCollectiveCount) return {};
  return lists()[i];
}

bool implements(Collective collective, Algorithm algorithm) {
  return detail::find_row(collective, algorithm) != nullptr;
}

}  // namespace collx
