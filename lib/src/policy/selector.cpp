#include "selector.hpp"

#include <mpi.h>  // MPICH_VERSION: whose protocol steps the allreduce rows follow

#include <string>

#include "collx/error.hpp"
#include "config.hpp"
#include "tuning.hpp"

namespace collx::detail {

namespace {

// Allreduce rows from collx-bench sweeps (8 B .. 64 MiB by factors of 2, every algorithm,
// median of 3 runs); the machine, the sweep and its result: docs/results/sweep-*.csv and the
// notebook in git (docs/PERFORMANCE.md at cc55b41, "Where auto's table comes from"). The edges
// follow Open MPI's 4 KiB eager limit: a 4 KiB exchange is a rendezvous, so at 4 KiB the algorithms
// that send halves or p-ths win. The last row of each rank range catches every larger size.
constexpr SelectionRule kBuiltinRules[] = {
    // Two ranks with a shared arena, under either MPI (no message is sent): recursive doubling
    // up to 256 B, then the arena's sliced allreduce to 32 KiB
    // (docs/PERFORMANCE.md, "One node, two ranks: auto against Open MPI").
    {Collective::allreduce, 1, 2, 256, Algorithm::recursive_doubling},
    {Collective::allreduce, 1, 2, 32 << 10, Algorithm::shared_memory},
#if defined(MPICH_VERSION)
    // MPICH over UCX (ch4:ucx) sends a message above UCX's rendezvous threshold (between 8 and
    // 16 KiB on one node; UCX_RNDV_THRESH) by rendezvous, where Open MPI's step is at 4 KiB: at
    // 2 ranks recursive doubling to 8 KiB, then Rabenseifner (8 KiB halves) where a doubling
    // exchange would be a rendezvous; larger sizes as below (docs/PERFORMANCE.md, MPICH).
    {Collective::allreduce, 1, 2, 8 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 1, 2, 16 << 10, Algorithm::rabenseifner},
#endif
    // 1-2 ranks
    {Collective::allreduce, 1, 2, 2 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 1, 2, 4 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 1, 2, 4 << 20, Algorithm::recursive_doubling},
    {Collective::allreduce, 1, 2, kAnySize, Algorithm::ring},
    // 3 and 4 ranks on one node (a shared arena) from 16 KiB: the arena's sliced allreduce,
    // which beat every message algorithm and MPI_Allreduce there on a quiet machine
    // (docs/results/onenode-np34-allreduce.csv); 5 ranks and more were not measured
    // (two cores) and keep the message algorithms.
    // 3 ranks
    {Collective::allreduce, 3, 3, 2 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 3, 3, 8 << 10, Algorithm::ring},
    {Collective::allreduce, 3, 3, kAnySize, Algorithm::shared_memory},
    {Collective::allreduce, 3, 3, 64 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 3, 3, kAnySize, Algorithm::ring},
    // 4 ranks
    {Collective::allreduce, 4, 4, 2 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 4, 4, 4 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 4, 4, 8 << 10, Algorithm::ring},
    {Collective::allreduce, 4, 4, kAnySize, Algorithm::shared_memory},
    {Collective::allreduce, 4, 4, 64 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 4, 4, 256 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 4, 4, 2 << 20, Algorithm::ring},
    {Collective::allreduce, 4, 4, kAnySize, Algorithm::rabenseifner},
    // 5-7 ranks
    {Collective::allreduce, 5, 7, 2 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 5, 7, 16 << 10, Algorithm::ring},
    {Collective::allreduce, 5, 7, 64 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 5, 7, 256 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 5, 7, kAnySize, Algorithm::ring},
    // 8 ranks and more
    {Collective::allreduce, 8, kAnyRanks, 2 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 8, kAnyRanks, 4 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 8, kAnyRanks, 8 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 8, kAnyRanks, 16 << 10, Algorithm::ring},
    {Collective::allreduce, 8, kAnyRanks, 32 << 10, Algorithm::recursive_doubling},
    {Collective::allreduce, 8, kAnyRanks, 256 << 10, Algorithm::rabenseifner},
    {Collective::allreduce, 8, kAnyRanks, 2 << 20, Algorithm::ring},
    {Collective::allreduce, 8, kAnyRanks, kAnySize, Algorithm::rabenseifner},
    // The other collectives: collx-bench -a all sweeps at 2 and 4 ranks (8 B .. 32 MiB by
    // factors of 4, 5 runs, medians; scripts/perf-sweep.sh, rows suggested by
    // scripts/selector_rows.py, docs/results/sweep-*.csv). Rows measured at 4 ranks serve
    // 3 ranks and up; gather and scatter go back to the binomial tree from 9 ranks, where the
    // root's p-1 messages of the linear form cost more than log p (docs/ALGORITHMS.md).
    // Rows naming shared_memory count only where the communicator has a shared arena (all
    // ranks on one node, host buffers; see select_from); elsewhere the next matching row
    // decides. Broadcast, reduce and allgather rows: scripts/selector_rows.py over the
    // shared-memory sweep of the notebook in git (docs/PERFORMANCE.md at cc55b41, "Status
    // against the goals (issues 3 and 4)"), 5 interleaved runs, medians;
    // allgather at 3+ ranks takes shared_memory above 512 B (at 64 MiB, 4 ranks: 1.77-1.97x MPI
    // in each of 5 runs since its rings change their stores, the ring 0.92-1.01x).
    // Allgather at two ranks takes shared_memory at every size: above 256 KiB since its rings
    // change their stores, and hand blocks over directly, while plain stores are slow
    // (ring_stores.hpp): 1.2-1.6x MPI in runs in the machine's fast state, about parity (the
    // ring's figure) in its slow state, 1.4-1.8x from 16 MiB in both (docs/PERFORMANCE.md, "Why
    // the arena, and the VM's slow state"); at 64-256 KiB since blocks of 32-64 KiB are read
    // directly (1.04-1.18x MPI at 64-128 KiB where the ring ran 0.9-1.0x;
    // docs/results/alltoall-arena-vs-pairwise.csv).
    // At two ranks, broadcast, reduce and allgather take the arena from 8 B (one slot per
    // producer for a small call, run in place: 2-10x MPI's time at
    // 8 B-32 KiB, docs/PERFORMANCE.md, "One node, two ranks: auto against Open MPI"); broadcast
    // to 32 KiB, then the binomial tree (docs/results/broadcast-np2-tree-vs-arena.csv).
    {Collective::broadcast, 1, 2, 32 << 10, Algorithm::shared_memory},
    {Collective::broadcast, 1, 2, 256 << 10, Algorithm::binomial_tree},
    {Collective::broadcast, 1, kAnyRanks, kAnySize, Algorithm::shared_memory},
    {Collective::broadcast, 1, kAnyRanks, kAnySize, Algorithm::binomial_tree},
    {Collective::reduce, 3, kAnyRanks, 128, Algorithm::binomial_tree},
    {Collective::reduce, 1, 2, kAnySize, Algorithm::shared_memory},
    {Collective::reduce, 3, kAnyRanks, 32 << 10, Algorithm::shared_memory},
    {Collective::reduce, 3, kAnyRanks, 128 << 10, Algorithm::binomial_tree},
    {Collective::reduce, 3, kAnyRanks, kAnySize, Algorithm::shared_memory},
    {Collective::reduce, 1, 2, kAnySize, Algorithm::binomial_tree},
    {Collective::reduce, 3, kAnyRanks, 32 << 20, Algorithm::binomial_tree},
    {Collective::reduce, 3, kAnyRanks, kAnySize, Algorithm::rabenseifner},
    {Collective::allgather, 1, 2, kAnySize, Algorithm::shared_memory},
    {Collective::allgather, 1, 2, kAnySize, Algorithm::ring},
    {Collective::allgather, 3, kAnyRanks, 512, Algorithm::recursive_doubling},
    {Collective::allgather, 3, kAnyRanks, kAnySize, Algorithm::shared_memory},
    {Collective::allgather, 3, kAnyRanks, 256 << 10, Algorithm::recursive_doubling},
    {Collective::allgather, 3, kAnyRanks, kAnySize, Algorithm::ring},
    // Reduce-scatter at two ranks: the arena's blocking form to 8 KiB in all (docs/PERFORMANCE.md,
    // "One node, two ranks: auto against Open MPI"); at 3 and 4 ranks on one node from 16 KiB:
    // the arena's, as allreduce's (same runs); 5 ranks and more unmeasured.
    {Collective::reduce_scatter, 1, 2, 8 << 10, Algorithm::shared_memory},
    {Collective::reduce_scatter, 1, 2, 32 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter, 1, 2, kAnySize, Algorithm::ring},
    {Collective::reduce_scatter, 3, 4, 8 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter, 3, 4, kAnySize, Algorithm::shared_memory},
    {Collective::reduce_scatter, 3, kAnyRanks, 64 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter, 3, kAnyRanks, kAnySize, Algorithm::ring},
    {Collective::reduce_scatter_v, 1, 2, 8 << 10, Algorithm::shared_memory},
    {Collective::reduce_scatter_v, 1, 2, 32 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter_v, 1, 2, kAnySize, Algorithm::ring},
    {Collective::reduce_scatter_v, 3, 4, 8 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter_v, 3, 4, kAnySize, Algorithm::shared_memory},
    {Collective::reduce_scatter_v, 3, kAnyRanks, 64 << 10, Algorithm::recursive_halving},
    {Collective::reduce_scatter_v, 3, kAnyRanks, kAnySize, Algorithm::ring},
    // Gather and scatter at two ranks through the arena to 32 KiB in all (one slot per block;
    // docs/PERFORMANCE.md, "Gather, scatter and alltoall"); 3+ ranks not measured with it.
    {Collective::gather, 1, 2, 32 << 10, Algorithm::shared_memory},
    {Collective::gather, 1, 8, kAnySize, Algorithm::linear},
    {Collective::gather, 9, kAnyRanks, kAnySize, Algorithm::binomial_tree},
    {Collective::scatter, 1, 2, 32 << 10, Algorithm::shared_memory},
    {Collective::scatter, 1, 8, kAnySize, Algorithm::linear},
    {Collective::scatter, 9, kAnyRanks, kAnySize, Algorithm::binomial_tree},
    // Alltoall at two ranks: pairwise (one exchange) to 256 B, where the
    // arena is no faster; above, the arena (its blocks of 32-64 KiB read directly), 1.1-2.9x
    // MPI's time under Open MPI and MPICH (docs/PERFORMANCE.md, "Gather, scatter and alltoall").
    {Collective::alltoall, 1, 2, 256, Algorithm::pairwise},
    {Collective::alltoall, 1, 2, kAnySize, Algorithm::shared_memory},
    {Collective::alltoall, 1, 2, kAnySize, Algorithm::pairwise},
    {Collective::alltoall, 1, kAnyRanks, 512, Algorithm::bruck},
    // At 3-4 ranks the arena from 4 MiB (1.07-1.40x MPI's time under Open MPI, 1.66-5.35x under
    // MPICH, 4 ranks on 2 cores); below it lost to pairwise at 64 KiB-1 MiB under Open MPI.
    {Collective::alltoall, 3, 4, 2 << 20, Algorithm::pairwise},
    {Collective::alltoall, 3, 4, kAnySize, Algorithm::shared_memory},
    {Collective::alltoall, 1, kAnyRanks, kAnySize, Algorithm::pairwise},
    {Collective::barrier, 1, kAnyRanks, kAnySize, Algorithm::dissemination},
};

// Ranks on several nodes with more than one on some. Allreduce above 64 KiB: multi_leader where
// every node holds as many ranks (each rank's link carries 1/k of the bytes that cross nodes,
// and the k ranks of a node reduce their slices side by side; cost model: docs/ALGORITHMS.md,
// "Across nodes"). Not yet measured on real nodes: the edge is the model's and Open MPI's TCP
// eager limit (64 KiB); on the emulated cluster it took 1.17x and 1.39x MPI_Allreduce's speed at
// 2 and 16 MiB (2x2). Up to 2 KiB, and layouts whose nodes differ, take the flat table
// (recursive doubling's first log2 k steps stay inside a node); 2-64 KiB: see below.
// Broadcast up to 1 MiB and reduce up to 16 KiB, any layout: hierarchical (the buffer crosses
// into each node once, the other hops stay inside nodes). Up to there the cost model predicts
// it fastest for every layout from 2x2 to 64x8 ranks and every machine tried: a 100 Gb/s, 2 us
// network with this machine's calibrated links inside a node or the model's defaults, and the
// emulated cluster's (0.5 GB/s, 250 us). Above, the pipelined chain (broadcast, from 2 MiB) and
// Rabenseifner (reduce, from 32 KiB) win on the fast networks: the flat table. The broadcast's
// lower edge is measured against the model: up to 256 B the binomial tree took 1.23-1.64x
// MPI_Bcast's speed at 2x2 where hierarchical took 0.95-1.47x, from 512 B hierarchical led
// (1.68-2.47x against 1.09-1.40x; two sets of 6 runs,
// docs/results/cluster-broadcast-small-2x2.csv), so up to 256 B the flat table, and auto's
// trials, decide. Allgather and reduce_scatter keep the flat table (but for the measured
// reduce_scatter rule below): their hierarchical rows win on the slow network but on the fast
// ones only in a window (about 4 KiB to 1 MiB) that moves with the layout.
// Allreduce from 2 KiB to 64 KiB on uniform nodes: hierarchical, and on two nodes multi_leader.
// Measured, not modelled: on the emulated cluster at 2 nodes x 2 ranks (idle, medians of 3;
// docs/results/cluster-node-aware-idle.csv) hierarchical took 1.12x and 2.00x
// MPI_Allreduce's speed at 4 and 32 KiB where the one-node table's Rabenseifner and recursive
// doubling took 0.74x and 1.32x; at 8 and 64 B recursive doubling stays ahead (0.96-1.04x
// against 0.83-0.96x), hence the lower edge. multi_leader then took hierarchical's place on two
// nodes (2x2: 1.01-1.69x against 0.86-1.40x at 2-64 KiB, six runs; the goal runs of three
// sessions the same way) but not on four (4x2: 0.87-1.31x against 1.07-1.70x at 4-64 KiB):
// docs/results/cluster-allreduce-node-rule.csv.
// Many nodes (8 and more, each of its links crossing a fat tree's switches): rows from SimGrid's
// SMPI, measured on simulated clusters of 8 to 128 nodes (docs/SCALE.md, "What the simulation
// taught the selector"); the rows above were measured on 2-4 emulated nodes and keep those.
// Allreduce on nodes of several ranks from 8 KiB to 2 MiB: Rabenseifner, whose pairs start
// inside a node (PairOrder::near_first: each node's link carries 1/k of the bytes, and only
// log2(nodes) of its steps cross the network) where hierarchical funnels the node's whole buffer
// through one rank's link and multi_leader adds two node phases; above 2 MiB those phases
// pay for themselves (multi_leader). With one rank per node, above 256 KiB: Rabenseifner, whose
// 2 log2 p steps beat the ring's 2 (p - 1) latencies up to the largest sizes measured. Reduce
// from 512 KiB (one rank per node: 256 KiB): Rabenseifner, which sends each byte across the
// network about twice where the binomial tree sends the whole buffer log2 p times.
// Reduce-scatter on nodes of several ranks from 8 KiB to 2 MiB: hierarchical (the flat
// recursive halving pairs ranks on other nodes first, and the ring's p - 1 steps are latency);
// with one rank per node above 64 KiB: recursive halving, log2 p steps against the ring's p - 1.
constexpr NodeRule kNodeRules[] = {
    {Collective::reduce_scatter, (std::size_t{8} << 10) + 1, std::size_t{2} << 20, true,
     Algorithm::hierarchical, false, 0, 8},
    {Collective::reduce_scatter, (std::size_t{64} << 10) + 1, kAnySize, true,
     Algorithm::recursive_halving, true, 0, 8},
    {Collective::allreduce, (std::size_t{8} << 10) + 1, std::size_t{2} << 20, true,
     Algorithm::rabenseifner, false, 0, 8},
    {Collective::allreduce, (std::size_t{256} << 10) + 1, kAnySize, true, Algorithm::rabenseifner,
     true, 0, 8},
    {Collective::reduce, (std::size_t{512} << 10) + 1, kAnySize, true, Algorithm::rabenseifner,
     false, 0, 8},
    {Collective::reduce, (std::size_t{256} << 10) + 1, kAnySize, false, Algorithm::rabenseifner,
     true, 0, 8},
    {Collective::allreduce, (std::size_t{2} << 10) + 1, std::size_t{64} << 10, true,
     Algorithm::multi_leader, false, 2},
    {Collective::allreduce, (std::size_t{2} << 10) + 1, std::size_t{64} << 10, true,
     Algorithm::hierarchical},
    {Collective::allreduce, (std::size_t{64} << 10) + 1, kAnySize, true, Algorithm::multi_leader},
    {Collective::broadcast, std::size_t{256} + 1, std::size_t{1} << 20, false,
     Algorithm::hierarchical},
    {Collective::reduce, 0, std::size_t{16} << 10, false, Algorithm::hierarchical},
    // One rank per node, allreduce to 32 KiB: recursive doubling (log2 p messages of the whole
    // buffer, each a network hop) where the one-node table has Rabenseifner at 4 KiB and the
    // ring at 8 KiB for 4 ranks, which lost to MPI_Allreduce at 4 nodes x 1 rank on the
    // emulated cluster; above, to 256 KiB, Rabenseifner, where the one-node table's recursive
    // doubling lost at 64 KiB (docs/results/cluster-goal-runs-allreduce.csv and
    // cluster-allreduce-4x1-rule.csv).
    {Collective::allreduce, 0, std::size_t{32} << 10, true, Algorithm::recursive_doubling, true},
    {Collective::allreduce, (std::size_t{32} << 10) + 1, std::size_t{256} << 10, true,
     Algorithm::rabenseifner, true},
    // One rank on each of up to 4 nodes, broadcast to 32 KiB: linear (the root's sends at
    // once, one level) where the binomial tree's two levels took 0.66-0.92x MPI_Bcast's speed
    // at 8-32 KiB on the emulated cluster at 4 nodes x 1 rank and linear 0.98-1.02x
    // (docs/results/cluster-broadcast-linear.csv); from 8 B to 4 KiB, with both
    // latency paths sending at once, linear took 1.05-1.92x and the tree 0.87-1.17x in calls
    // two at a time, where in runs of 50 calls the tree led at 8-512 B (auto's trials decide
    // between them, from a common start: autotune.hpp, docs/results/cluster-436e633.csv).
    // Measured, not modelled: the cost model counts the root's p-1 sends one after the other, where
    // on the network their latencies overlap; it is measured on 4 nodes only, so more nodes keep
    // the tree (whose levels grow as log2 p where the root's sends grow as p).
    {Collective::broadcast, 0, std::size_t{32} << 10, true, Algorithm::linear, true, 4},
    // Reduce-scatter from 4 KiB to 512 KiB on two nodes holding as many ranks each (more than
    // one): hierarchical, inside the window (about 4 KiB to 1 MiB) where the cost model has it
    // ahead on fast networks too. Measured on the emulated cluster at 2 nodes x 2 ranks
    // (docs/results/cluster-reduce-scatter-2x2.csv): 1.09-1.39x
    // MPI_Reduce_scatter_block's speed at 4-64 KiB in 7 runs where the flat table's recursive
    // halving took 0.93-1.17x, 2.79x at 256 KiB against the ring's 2.39x (3 runs); at 1 MiB the
    // ring was ahead (3.94x against 3.62x), at 1 KiB recursive halving (1.01x against 0.75x): the
    // edges. More nodes are unmeasured: the flat table.
    {Collective::reduce_scatter, std::size_t{4} << 10, std::size_t{512} << 10, true,
     Algorithm::hierarchical, false, 2},
};

}  // namespace

std::span<const NodeRule> node_rules() {
  return kNodeRules;
}

Algorithm select_for_nodes(Collective collective, std::size_t bytes, const NodeShape& nodes) {
  if (nodes.nodes < 2) return Algorithm::automatic;
  const bool one_per_node = nodes.max_per_node == 1;
  for (const NodeRule& rule : kNodeRules) {
    if (rule.collective == collective && rule.one_per_node == one_per_node &&
        bytes >= rule.min_bytes && bytes <= rule.max_bytes &&
        (nodes.uniform || !rule.uniform_only) &&
        (rule.max_nodes == 0 || nodes.nodes <= rule.max_nodes) && nodes.nodes >= rule.min_nodes) {
      return rule.algorithm;
    }
  }
  return Algorithm::automatic;
}

std::string describe_node_rules() {
  std::string out;
  for (const NodeRule& rule : kNodeRules) {
    out += std::string(to_string(rule.collective)) + "  ranks on several nodes, bytes " +
           std::to_string(rule.min_bytes) + ".." +
           (rule.max_bytes == kAnySize ? std::string("any") : std::to_string(rule.max_bytes)) +
           "  -> " + std::string(to_string(rule.algorithm)) +
           (rule.max_nodes > 0 ? "  on up to " + std::to_string(rule.max_nodes) + " nodes" : "") +
           (rule.min_nodes > 0 ? "  on " + std::to_string(rule.min_nodes) + " nodes or more" : "") +
           (rule.one_per_node   ? "  (one rank on every node)"
            : rule.uniform_only ? "  (as many ranks on every node; otherwise the table below)"
                                : "") +
           "\n";
  }
  return out;
}

std::span<const SelectionRule> builtin_rules() {
  return kBuiltinRules;
}

// The built-in rows of one collective (they are contiguous in the table): every call selects,
// so it scans its own rows only.
std::span<const SelectionRule> builtin_rules_of(Collective collective) {
  struct Index {
    std::span<const SelectionRule> rows[kCollectiveCount];
    Index() {
      const std::span<const SelectionRule> all = kBuiltinRules;
      for (std::size_t i = 0; i < all.size();) {
        std::size_t j = i;
        while (j < all.size() && all[j].collective == all[i].collective)
          ++j;
        rows[static_cast<int>(all[i].collective)] = all.subspan(i, j - i);
        i = j;
      }
    }
  };
  static const Index index;
  return index.rows[static_cast<int>(collective)];
}

namespace {
bool matches(const SelectionRule& rule, Collective collective, std::size_t bytes, int nranks,
             bool shared_memory) {
  return rule.collective == collective && nranks >= rule.min_ranks && nranks <= rule.max_ranks &&
         bytes <= rule.max_bytes && (shared_memory || rule.algorithm != Algorithm::shared_memory);
}
}  // namespace

Algorithm select_from(std::span<const SelectionRule> rules, Collective collective,
                      std::size_t bytes, int nranks, bool shared_memory) {
  for (const auto& rule : rules) {
    if (matches(rule, collective, bytes, nranks, shared_memory)) return rule.algorithm;
  }
  const auto algos = algorithms_of(collective);
  return algos.empty() ? Algorithm::automatic : algos.front();
}

Algorithm resolve_algorithm(Collective collective, Algorithm requested, std::size_t bytes,
                            int nranks, int rank, bool shared_memory, const NodeShape& nodes) {
  if (requested == Algorithm::automatic) {
    if (const auto forced = config().algorithm[static_cast<int>(collective)]) return *forced;
    if (const TuningTable* tuned = active_tuning()) {
      for (const auto& rule : tuned->rules) {
        if (matches(rule, collective, bytes, nranks, shared_memory)) return rule.algorithm;
      }
    }
    if (const Algorithm across = select_for_nodes(collective, bytes, nodes);
        across != Algorithm::automatic) {
      return across;
    }
    return select_from(builtin_rules_of(collective), collective, bytes, nranks, shared_memory);
  }
  if (!implements(collective, requested)) {
    throw Error(ErrorCode::unsupported, to_string(collective), rank,
                "no algorithm \"" + std::string(to_string(requested)) + "\" for this collective");
  }
  return requested;
}

bool table_decides(Collective collective, std::size_t bytes, int nranks, bool shared_memory) {
  if (config().algorithm[static_cast<int>(collective)]) return false;
  if (const TuningTable* tuned = active_tuning()) {
    for (const auto& rule : tuned->rules) {
      if (matches(rule, collective, bytes, nranks, shared_memory)) return false;
    }
  }
  return true;
}

std::string describe_rules(std::span<const SelectionRule> rules) {
  std::string out;
  for (const auto& rule : rules) {
    out += std::string(to_string(rule.collective)) + "  ranks " + std::to_string(rule.min_ranks) +
           ".." +
           (rule.max_ranks == kAnyRanks ? std::string("any") : std::to_string(rule.max_ranks)) +
           "  bytes <= " +
           (rule.max_bytes == kAnySize ? std::string("any") : std::to_string(rule.max_bytes)) +
           "  -> " + std::string(to_string(rule.algorithm)) +
           (rule.algorithm == Algorithm::shared_memory ? "  (ranks sharing a segment)" : "") + "\n";
  }
  return out;
}

}  // namespace collx::detail
