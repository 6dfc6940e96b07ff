// NodeLayout: which ranks of a communicator share a node, and the groups the node-aware
// algorithms run their parts on. Pure bookkeeping (no MPI): built from one key per rank (equal
// keys: same node) by the communicator (lib/src/api, MPI_Comm_split_type or COLLX_NODE_LAYOUT),
// or from node sizes by the simulated-rank tests.
//
// Nodes are numbered by their lowest rank; within a node, ranks keep the communicator's order
// (local rank 0 is the node's lowest rank: its leader).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace collx::patterns {

class NodeLayout {
 public:
  // One node holding `nranks` ranks.
  explicit NodeLayout(int nranks = 1) {
    const int sizes[1] = {std::max(nranks, 1)};
    *this = from_sizes(sizes);
  }

  // Consecutive blocks: node j holds the next sizes[j] ranks (every size >= 1).
  static NodeLayout from_sizes(std::span<const int> sizes) {
    std::vector<int> keys;
    for (std::size_t j = 0; j < sizes.size(); ++j)
      keys.insert(keys.end(), static_cast<std::size_t>(std::max(sizes[j], 0)), static_cast<int>(j));
    return from_keys(keys);
  }

  // keys[r]: any value, equal for ranks on one node.
  static NodeLayout from_keys(std::span<const int> keys) {
    NodeLayout l{Empty{}};
    l.node_of_.assign(keys.size(), -1);
    l.local_rank_.assign(keys.size(), 0);
    std::vector<int> first_key;  // node -> key
    std::vector<std::vector<int>> members;
    for (std::size_t r = 0; r < keys.size(); ++r) {
      const auto at = std::find(first_key.begin(), first_key.end(), keys[r]);
      const auto node = static_cast<std::size_t>(at - first_key.begin());
      if (at == first_key.end()) {
        first_key.push_back(keys[r]);
        members.emplace_back();
      }
      l.node_of_[r] = static_cast<int>(node);
      l.local_rank_[r] = static_cast<int>(members[node].size());
      members[node].push_back(static_cast<int>(r));
    }
    l.node_start_.assign(1, 0);
    l.ranks_.clear();
    for (const auto& m : members) {
      l.ranks_.insert(l.ranks_.end(), m.begin(), m.end());
      l.node_start_.push_back(static_cast<int>(l.ranks_.size()));
    }
    l.build_groups();
    return l;
  }

  int size() const { return static_cast<int>(node_of_.size()); }
  int nodes() const { return static_cast<int>(node_start_.size()) - 1; }
  int node_of(int rank) const { return node_of_[static_cast<std::size_t>(rank)]; }
  int local_rank(int rank) const { return local_rank_[static_cast<std::size_t>(rank)]; }
  int ranks_on(int node) const {
    return node_start_[static_cast<std::size_t>(node) + 1] -
           node_start_[static_cast<std::size_t>(node)];
  }
  int min_ranks_per_node() const { return min_per_node_; }
  int max_ranks_per_node() const { return max_per_node_; }
  // Every node holds the same number of ranks.
  bool uniform() const { return min_per_node_ == max_per_node_; }
  // Several nodes, and some node holds more than one rank: where a node-aware algorithm differs
  // from a flat one.
  bool hierarchical() const { return nodes() > 1 && max_per_node_ > 1; }

  // The ranks on `node`, ascending (local rank i is the i-th).
  std::span<const int> members(int node) const {
    return std::span<const int>(ranks_).subspan(
        static_cast<std::size_t>(node_start_[static_cast<std::size_t>(node)]),
        static_cast<std::size_t>(ranks_on(node)));
  }
  // Local rank 0 of every node, by node.
  std::span<const int> leaders() const { return peers(0); }
  // Local rank `local` of every node that has one, by node (the multi-leader form's groups).
  std::span<const int> peers(int local) const { return peers_[static_cast<std::size_t>(local)]; }

  // Every rank, local rank first: peers(0), then peers(1), ... (each by node). The order in
  // which the node-aware allgather and reduce_scatter lay out their blocks: the blocks of local
  // rank i's ranks, the block they move across nodes together, are contiguous.
  std::vector<int> by_local_rank() const {
    std::vector<int> order;
    order.reserve(node_of_.size());
    for (const auto& group : peers_)
      order.insert(order.end(), group.begin(), group.end());
    return order;
  }

  // "2 nodes x 2 ranks (uniform)", "2 nodes, 3+1 ranks (not uniform)".
  std::string describe() const {
    std::string out = std::to_string(nodes()) + (nodes() == 1 ? " node" : " nodes");
    if (uniform()) {
      out += " x ";
      out += std::to_string(max_per_node_);
      out += max_per_node_ == 1 ? " rank (uniform)" : " ranks (uniform)";
      return out;
    }
    out += ", ";
    for (int j = 0; j < nodes(); ++j) {
      if (j > 0) out += '+';
      out += std::to_string(ranks_on(j));
    }
    out += " ranks (not uniform)";
    return out;
  }

 private:
  struct Empty {};
  explicit NodeLayout(Empty) {}
  void build_groups() {
    min_per_node_ = nodes() > 0 ? size() : 0;
    max_per_node_ = 0;
    for (int j = 0; j < nodes(); ++j) {
      min_per_node_ = std::min(min_per_node_, ranks_on(j));
      max_per_node_ = std::max(max_per_node_, ranks_on(j));
    }
    peers_.assign(static_cast<std::size_t>(max_per_node_), {});
    for (int j = 0; j < nodes(); ++j) {
      const std::span<const int> m = members(j);
      for (std::size_t i = 0; i < m.size(); ++i)
        peers_[i].push_back(m[i]);
    }
  }

  std::vector<int> node_of_{0};
  std::vector<int> local_rank_{0};
  std::vector<int> node_start_{0, 1};  // CSR offsets of ranks_
  std::vector<int> ranks_{0};
  std::vector<std::vector<int>> peers_{{0}};
  int min_per_node_ = 1;
  int max_per_node_ = 1;
};

}  // namespace collx::patterns
