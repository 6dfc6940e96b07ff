// Collectives and the algorithms that implement them.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace collx {

// The names, in one list each: the enums, their counts and the names that to_string prints
// and COLLX_ALGO parses are all derived from these.
#define COLLX_COLLECTIVE_LIST(X)                                                                 \
  X(allreduce)                                                                                   \
  X(broadcast)                                                                                   \
  X(reduce)                                                                                      \
  X(allgather) X(reduce_scatter) X(reduce_scatter_v) X(gather) X(scatter) X(alltoall) X(barrier) \
      X(sendrecv)

// Which collective implements which algorithm is the registry's (algorithms_of below).
// `automatic` ("auto") lets the selector choose; shared_memory runs through an arena every rank
// maps (one node, host memory; elsewhere a point-to-point algorithm runs instead). `mpi` is the
// MPI library's own collective: one of auto's candidates, not one of collx's algorithms.
#define COLLX_ALGORITHM_LIST(X)                                                                 \
  X(automatic)                                                                                  \
  X(ring)                                                                                       \
  X(recursive_doubling)                                                                         \
  X(rabenseifner) X(recursive_halving) X(binomial_tree) X(pipelined_chain) X(scatter_allgather) \
      X(double_binary_tree) X(bruck) X(pairwise) X(linear) X(dissemination) X(direct)           \
          X(shared_memory) X(hierarchical) X(multi_leader) X(mpi) X(butterfly) X(knomial_tree)

#define COLLX_ENUMERATOR(name) name,
#define COLLX_PLUS_ONE(name) +1
enum class Collective { COLLX_COLLECTIVE_LIST(COLLX_ENUMERATOR) };
inline constexpr int kCollectiveCount = 0 COLLX_COLLECTIVE_LIST(COLLX_PLUS_ONE);
enum class Algorithm { COLLX_ALGORITHM_LIST(COLLX_ENUMERATOR) };
inline constexpr int kAlgorithmCount = 0 COLLX_ALGORITHM_LIST(COLLX_PLUS_ONE);
#undef COLLX_ENUMERATOR
#undef COLLX_PLUS_ONE

std::string_view to_string(Collective collective);
std::string_view to_string(Algorithm algorithm);
std::optional<Collective> parse_collective(std::string_view name);
// Accepts the names printed by to_string and "auto".
std::optional<Algorithm> parse_algorithm(std::string_view name);

// The algorithms a collective implements, from the algorithm registry (never contains
// Algorithm::automatic nor Algorithm::mpi, the MPI library's own); the first is the fallback
// when no selection rule matches.
std::span<const Algorithm> algorithms_of(Collective collective);
bool implements(Collective collective, Algorithm algorithm);
// Whether the collective's `algorithm` runs through an arena its ranks share (ranks on one node,
// host memory; elsewhere another of the collective's algorithms runs in its place).
bool runs_through_arena(Collective collective, Algorithm algorithm);

}  // namespace collx
