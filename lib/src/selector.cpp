#include "selector.hpp"

#include <string>

#include "collx/error.hpp"
#include "config.hpp"

namespace collx::detail {

namespace {

// Allreduce rows from collx-bench on the development machine (2-core AMD EPYC, Open MPI 4.1.4
// shared memory); the measurements are in docs/PERFORMANCE.md. A final catch-all row per
// collective keeps every size covered.
constexpr SelectionRule kBuiltinRules[] = {
    {Collective::allreduce, 1, 2, 8 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 1, 2, kAnySize, Algorithm::ring},
    {Collective::allreduce, 3, kAnyRanks, 16 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 3, kAnyRanks, 1 << 20, Algorithm::rabenseifner},
    {Collective::allreduce, 3, kAnyRanks, kAnySize, Algorithm::ring},
};

}  // namespace

std::span<const SelectionRule> builtin_rules() {
  return kBuiltinRules;
}

Algorithm select_from(std::span<const SelectionRule> rules, Collective collective,
                      std::size_t bytes, int nranks) {
  for (const auto& rule : rules) {
    if (rule.collective == collective && nranks >= rule.min_ranks && nranks <= rule.max_ranks &&
        bytes <= rule.max_bytes) {
      return rule.algorithm;
    }
  }
  const auto algos = algorithms_of(collective);
  return algos.empty() ? Algorithm::automatic : algos.front();
}

Algorithm resolve_algorithm(Collective collective, Algorithm requested, std::size_t bytes,
                            int nranks, int rank) {
  if (requested == Algorithm::automatic) {
    if (const auto forced = config().algorithm[static_cast<int>(collective)]) return *forced;
    return select_from(builtin_rules(), collective, bytes, nranks);
  }
  if (!implements(collective, requested)) {
    throw Error(ErrorCode::unsupported, to_string(collective), rank,
                "no algorithm \"" + std::string(to_string(requested)) + "\" for this collective");
  }
  return requested;
}

std::string describe_rules(std::span<const SelectionRule> rules) {
  std::string out;
  for (const auto& rule : rules) {
    out += std::string(to_string(rule.collective)) + "  ranks " + std::to_string(rule.min_ranks) +
           ".." +
           (rule.max_ranks == kAnyRanks ? std::string("any") : std::to_string(rule.max_ranks)) +
           "  bytes <= " +
           (rule.max_bytes == kAnySize ? std::string("any") : std::to_string(rule.max_bytes)) +
           "  -> " + std::string(to_string(rule.algorithm)) + "\n";
  }
  return out;
}

}  // namespace collx::detail
