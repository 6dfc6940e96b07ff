// Algorithm selection: explicit option, then COLLX_ALGO, then the decision table.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>

#include "collx/algorithm.hpp"
#include "collx/tuning.hpp"

namespace collx::detail {

// A rule's max_ranks that matches every rank count (as kAnyBytes matches every size).
inline constexpr int kAnyRanks = std::numeric_limits<int>::max();

// The table compiled into the library: lib/data/builtin-rules.json, each row with the
// measurement it rests on (docs/results/README.md, "What auto's rules and the defaults rest on").
std::span<const TuningRule> builtin_rules();
std::span<const TuningRule> builtin_rules_of(Collective collective);

// What `auto` picks for this call from `rules`. Rows naming an algorithm that runs through the
// shared arena count only where `shared_memory` (the ranks share an arena and the buffers are host
// memory).
Algorithm select_from(std::span<const TuningRule> rules, Collective collective, std::size_t bytes,
                      int nranks, bool shared_memory = false);

// Where a communicator's ranks are (its node layout, as the table sees it).
struct NodeShape {
  int nodes = 1;
  int max_per_node = 1;  // ranks on the fullest node
  bool uniform = true;   // every node holds as many ranks
  // Several nodes, more than one rank on some: where the node-aware algorithms split (with one
  // rank per node they run their flat forms; the node rules apply from two nodes on).
  bool spans_nodes() const { return nodes > 1 && max_per_node > 1; }
};

// Rows for ranks on several nodes, read before the table: for `collective` on messages of
// `min_bytes` to `max_bytes`, `algorithm`, on uniform nodes (or any layout, uniform_only false)
// where some node holds several ranks, or with one_per_node where every node holds one (every
// hop crosses the network); on at most `max_nodes` (0: any) and at least `min_nodes` nodes;
// where the fullest node holds at least `min_per_node` ranks.
struct NodeRule {
  Collective collective;
  std::size_t min_bytes;
  std::size_t max_bytes;
  bool uniform_only;
  Algorithm algorithm;
  bool one_per_node = false;
  int max_nodes = 0;
  int min_nodes = 0;
  int min_per_node = 0;
};
std::span<const NodeRule> node_rules();
// What the node rules pick for the call, or Algorithm::automatic where none applies.
Algorithm select_for_nodes(Collective collective, std::size_t bytes, const NodeShape& nodes);

// The algorithm a call runs: `requested` unless automatic, then COLLX_ALGO, then a tuning
// file's rows, then the node rules (ranks on several nodes), then the table. Throws
// ErrorCode::unsupported if the collective does not implement the requested algorithm.
Algorithm resolve_algorithm(Collective collective, Algorithm requested, std::size_t bytes,
                            int nranks, int rank, bool shared_memory = false,
                            const NodeShape& nodes = {});

// Whether auto's choice for the call comes from the node rules or the table (neither
// COLLX_ALGO nor a tuning file's row decides it): the calls the autotuner may try candidates for.
bool table_decides(Collective collective, std::size_t bytes, int nranks, bool shared_memory);

std::string describe_rules(std::span<const TuningRule> rules);
std::string describe_node_rules();

}  // namespace collx::detail
