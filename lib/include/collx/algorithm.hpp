// Collectives and the algorithms that implement them.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace collx {

enum class Collective {
  allreduce,
  broadcast,
  reduce,
  allgather,
  reduce_scatter,
  reduce_scatter_v,
  gather,
  scatter,
  alltoall,
  barrier,
  sendrecv,
};
inline constexpr int kCollectiveCount = 11;

enum class Algorithm {
  automatic,  // chosen by the selector (tuning table, COLLX_ALGO)
  ring,
  recursive_doubling,
  rabenseifner,
  recursive_halving,
  binomial_tree,
  pipelined_chain,
  scatter_allgather,
  double_binary_tree,
  bruck,
  pairwise,
  linear,
  dissemination,
  direct,
  // Through a segment every rank maps (ranks on one node, host memory; elsewhere the
  // collective's point-to-point algorithm runs instead, see docs/ALGORITHMS.md).
  shared_memory,
};
inline constexpr int kAlgorithmCount = 15;

std::string_view to_string(Collective collective);
std::string_view to_string(Algorithm algorithm);
std::optional<Collective> parse_collective(std::string_view name);
// Accepts the names printed by to_string and "auto".
std::optional<Algorithm> parse_algorithm(std::string_view name);

// The algorithms a collective implements (never contains Algorithm::automatic).
std::span<const Algorithm> algorithms_of(Collective collective);
bool implements(Collective collective, Algorithm algorithm);

}  // namespace collx
