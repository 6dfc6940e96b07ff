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
                                                                           "direct",
                                                                           "shared_memory"};

// What each collective implements; the first is the fallback when no table row matches.
constexpr Algorithm kAllreduce[] = {Algorithm::ring, Algorithm::recursive_doubling,
                                    Algorithm::rabenseifner, Algorithm::binomial_tree,
                                    Algorithm::double_binary_tree};
constexpr Algorithm kBroadcast[] = {Algorithm::binomial_tree, Algorithm::pipelined_chain,
                                    Algorithm::scatter_allgather, Algorithm::shared_memory};
constexpr Algorithm kReduce[] = {Algorithm::binomial_tree, Algorithm::rabenseifner,
                                 Algorithm::shared_memory};
constexpr Algorithm kAllgather[] = {Algorithm::ring, Algorithm::recursive_doubling,
                                    Algorithm::bruck, Algorithm::shared_memory};
constexpr Algorithm kReduceScatter[] = {Algorithm::ring, Algorithm::recursive_halving};
constexpr Algorithm kGatherScatter[] = {Algorithm::binomial_tree, Algorithm::linear};
constexpr Algorithm kAlltoall[] = {Algorithm::pairwise, Algorithm::bruck};
constexpr Algorithm kBarrier[] = {Algorithm::dissemination};
constexpr Algorithm kSendrecv[] = {Algorithm::direct};

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
  if (name == "shm") return Algorithm::shared_memory;
  return std::nullopt;
}

std::span<const Algorithm> algorithms_of(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return kAllreduce;
    case Collective::broadcast:
      return kBroadcast;
    case Collective::reduce:
      return kReduce;
    case Collective::allgather:
      return kAllgather;
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_v:
      return kReduceScatter;
    case Collective::gather:
    case Collective::scatter:
      return kGatherScatter;
    case Collective::alltoall:
      return kAlltoall;
    case Collective::barrier:
      return kBarrier;
    case Collective::sendrecv:
      return kSendrecv;
  }
  return {};
}

bool implements(Collective collective, Algorithm algorithm) {
  const auto algos = algorithms_of(collective);
  return std::find(algos.begin(), algos.end(), algorithm) != algos.end();
}

}  // namespace collx
