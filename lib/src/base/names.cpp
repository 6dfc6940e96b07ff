// The names of collectives and algorithms (COLLX_COLLECTIVE_LIST, COLLX_ALGORITHM_LIST): what
// to_string prints and the parsers read. Which collective implements which algorithm is the
// registry's (coll/registry.cpp: algorithms_of, implements).
#include "collx/algorithm.hpp"

#include <iterator>

namespace collx {

namespace {

#define COLLX_NAME(name) #name,
constexpr std::string_view kCollectiveNames[] = {COLLX_COLLECTIVE_LIST(COLLX_NAME)};
constexpr std::string_view kAlgorithmNames[] = {COLLX_ALGORITHM_LIST(COLLX_NAME)};
#undef COLLX_NAME

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

}  // namespace collx
