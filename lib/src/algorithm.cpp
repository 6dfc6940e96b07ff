#include "collx/algorithm.hpp"

#include <algorithm>
#include <array>
#include <string>

namespace collx {

namespace {

constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames = {
    "allreduce", "broadcast", "reduce",   "allgather", "reduce_scatter", "reduce_scatter_v",
    "gather",    "scatter",   "alltoall", "barrier",   "sendrecv"};

constexpr std::array<std::string_view, kAlgorithmCount> kAlgorithmNames = {"auto",
                                                                           "ring",
                                                                           "recursive_doubling",
                                                                           "rabenseifner",
                                                                           "recursive_halving",
                                                                           "binomial_tree",
                                                                           "pipelined_chain",
                                                                           "scatter_allgather",
                                                                           "double_binary_tree",
                                                                           "bruck",
                                                                           "pairwise",
                                                                           "linear",
                                                                           "dissemination",
                                                                           "direct"};

// What each collective implements today; a new algorithm is added here when it lands.
constexpr Algorithm kAllreduce[] = {Algorithm::ring, Algorithm::recursive_doubling,
                                    Algorithm::rabenseifner};

}  // namespace

std::string_view to_string(Collective collective) {
  const auto i = static_cast<std::size_t>(collective);
  return i < kCollectiveNames.size() ? kCollectiveNames[i] : "invalid";
}

std::string_view to_string(Algorithm algorithm) {
  const auto i = static_cast<std::size_t>(algorithm);
  return i < kAlgorithmNames.size() ? kAlgorithmNames[i] : "invalid";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (std::size_t i = 0; i < kCollectiveNames.size(); ++i) {
    if (kCollectiveNames[i] == name) return static_cast<Collective>(i);
  }
  if (name == "bcast") return Collective::broadcast;
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (std::size_t i = 0; i < kAlgorithmNames.size(); ++i) {
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  }
  if (name == "automatic") return Algorithm::automatic;
  return std::nullopt;
}

std::span<const Algorithm> algorithms_of(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return kAllreduce;
    default:
      return {};
  }
}

bool implements(Collective collective, Algorithm algorithm) {
  const auto algos = algorithms_of(collective);
  return std::find(algos.begin(), algos.end(), algorithm) != algos.end();
}

}  // namespace collx
