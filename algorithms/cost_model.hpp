// The alpha-beta-gamma cost model of every algorithm: what a collective costs in message
// latencies (alpha), bytes on the wire (beta) and bytes reduced (gamma), for any rank count and
// size. Pure arithmetic, the same structure as the algorithms' patterns (steps, fold, segments),
// so predictions can be made for machines and rank counts we do not have. Spread over nodes, a
// schedule's steps are priced where they run (LogGP-style): inside a node over its loopback
// (each message in flight at its bandwidth), across nodes at the network's latency (a switch
// tier's where the partners share one) with the bytes of every rank of a node that crosses at
// once through the node's one link, and the sends a rank posts at once at the sender's overhead
// each; pipelined phases move side by side (Cost).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx::model {

// How the ranks start the calls a measurement times (collx-bench: the MPI library's barrier, then
// Machine::calls calls, each rank timing from when it leaves the barrier and the slowest rank's
// time counted): at once, or as they leave a dissemination barrier (Bruck's, which Open MPI's
// selection takes for some communicator sizes: in round k rank r hears from rank r - 2^k).
// Entered at once, that barrier still releases its ranks apart wherever some rounds' partners
// are on other nodes and others on the same one: rank 0 hears from the far end of the
// communicator in every round and leaves last, rank p-1 first.
enum class Start { together, dissemination };

struct Machine {
  double alpha = 1e-6;   // seconds per message (latency + software overhead)
  double beta = 1e-10;   // seconds per byte moved between two ranks (1 / link bandwidth)
  double gamma = 1e-10;  // seconds per byte reduced (one input byte of a two-input reduction)
  double copy = 5e-11;   // seconds per byte copied locally (pack / unpack / rotate)
  std::size_t segment_bytes = 256 << 10;  // pipelined algorithms' segment size
  // Every rank on one node: the shared_memory algorithms are candidates (their cost is copies
  // and counter handshakes, `alpha` each, no bytes on a wire). Off for network predictions.
  bool one_node = false;
  // Ranks on `nodes` nodes, in blocks of p / nodes: `alpha` and `beta` are then the links
  // inside a node and these the network between nodes (per message; per byte through a node's
  // link, which its ranks share when they send across nodes at once). A flat algorithm on
  // several nodes pays these for every message; the node-aware ones for their part across
  // nodes only.
  int nodes = 1;
  double alpha_inter = 2e-6;  // 2 us
  double beta_inter = 8e-11;  // 100 Gb/s
  // Seconds between two messages one rank sends back to back (LogP's gap: the sender's software
  // and its adapter's injection per message). A rank that posts many sends at once (the linear
  // broadcast's root) pays it per message while their latencies overlap; a chain of steps pays
  // `alpha` per step instead. SimGrid's SMPI charges none (smpi/os and smpi/ois are 0 on the
  // platforms of docs/SCALE.md).
  double overhead = 1e-6;
  // A tier of the network between nodes: `switch_nodes` consecutive nodes under one switch (0:
  // no such tier), `alpha_switch` the latency between two of them (a fat tree's leaf: two
  // links instead of four). A step whose partners are all under one switch pays it instead of
  // `alpha_inter`.
  int switch_nodes = 0;
  double alpha_switch = 1e-6;
  // A send of fewer bytes completes at its sender once the library has taken it (an eager
  // protocol; SMPI's detached sends, below smpi/send-is-detached-thresh), a larger one only
  // once it is delivered. It decides whether a rank's send holds it back from its next call.
  std::size_t eager_bytes = std::size_t{64} << 10;
  // Calls timed back to back, the time of a call being their mean (collx-bench's loop: -n). 1:
  // one call from a common start, its critical path. From the second call on, an algorithm
  // whose calls overlap (Entry::stream) costs its stream period per call instead.
  int calls = 1;
  // How the ranks start those calls (start_delay); seconds() and cost() time calls that start
  // together.
  Start start = Start::together;
};

// What one rank does on the critical path: messages, bytes sent, bytes reduced, bytes copied.
// `inter_messages` and `inter_bytes`: the messages and bytes that cross between nodes.
// Where the ranks are spread over several nodes, a flat algorithm's `messages` and `bytes` are
// taken to cross nodes, every rank of a node at once through its link (the registry's cost());
// the algorithms whose steps are known to stay inside a node or to cross it put those steps
// in the fields below themselves and leave `messages` and `bytes` empty:
// - `inter_bytes`: bytes through the busiest node's one link (per direction), every rank of the
//   node that crosses at once counted: a step in which all k ranks of a node send m bytes to
//   other nodes puts k m through it.
// - `local_messages`, `local_bytes`: steps inside a node, over its loopback: `alpha` each, and
//   bytes at 1/`beta`, each message in flight at the loopback's full bandwidth (a copy per
//   message; SMPI's loopback is not shared between its messages), so a segmented step with d
//   segments in flight moves its bytes d times as fast: `local_bytes` holds bytes / d.
// - `beside_bytes`: bytes inside a node that move while the node's link carries `inter_bytes`
//   (a root sending to its own node's ranks and across at once; the phases of a node-aware
//   pipeline): only the longer of the two counts.
// - `posted`: messages a rank posts one after the other while their latencies overlap (the
//   linear broadcast's root): `overhead` each.
struct Cost {
  double messages = 0;
  double bytes = 0;
  double reduced = 0;
  double copied = 0;
  double inter_messages = 0;
  double inter_bytes = 0;
  double local_messages = 0;
  double local_bytes = 0;
  double beside_bytes = 0;
  double posted = 0;
  // Of `inter_messages`, the steps whose partners all lie in aligned groups of 2^i nodes
  // (recursive doubling's rank xor d, a binomial level): under one switch where 2^i <=
  // Machine::switch_nodes.
  static constexpr int kSpans = 24;
  double inter_within[kSpans] = {};
  double seconds(const Machine& m) const {
    const double link = inter_bytes * m.beta_inter;
    const double beside = beside_bytes * m.beta;
    double near = 0;
    for (int i = 0; i < kSpans && (1 << i) <= m.switch_nodes; ++i)
      near += inter_within[i];
    return messages * m.alpha + bytes * m.beta + reduced * m.gamma + copied * m.copy +
           inter_messages * m.alpha_inter + near * (m.alpha_switch - m.alpha_inter) +
           (link > beside ? link : beside) + local_messages * m.alpha + local_bytes * m.beta +
           posted * m.overhead;
  }
};

// The rank count and size a cost is asked for, with the quantities every formula uses.
struct Shape {
  double p = 1;         // ranks
  double n = 0;         // bytes, as collx-bench counts them (for gathering collectives the whole
                        // gathered buffer)
  double segment = 0;   // the pipelined algorithms' segment size
  double lg = 0;        // ceil(log2 p)
  double core = 1;      // the largest power of two <= p (the fold's core)
  double lg_core = 0;   // log2 core
  double nodes = 1;     // nodes the ranks are on (in blocks)
  double per_node = 1;  // ranks per node: ceil(p / nodes)
  double eager = 0;     // Machine::eager_bytes (set for Entry::stream only)
  static Shape of(int p, double n, std::size_t segment_bytes, int nodes = 1);
};

// Constants the schedules (lib/src/coll) and their models share.
// The flat algorithms the node-aware ones run across nodes (and in their stead on one node, or
// with one rank per node): up to these sizes the latency form, above them the bandwidth form.
// Recursive doubling up to, Rabenseifner above:
inline constexpr std::size_t kFlatAllreduceDoublingBytes = std::size_t{32} << 10;
// The binomial tree up to (or on up to 3 ranks), scatter + allgather above:
inline constexpr std::size_t kFlatBroadcastTreeBytes = std::size_t{256} << 10;
// Scatter + allgather's allgather half on a power-of-two number of ranks: recursive doubling
// (log2 p steps) below this size, the ring (p - 1 steps) from it, as MPICH's broadcast splits them.
inline constexpr std::size_t kScatterAllgatherDoublingBytes = std::size_t{512} << 10;
inline constexpr std::size_t kFlatReduceTreeBytes = std::size_t{64} << 10;      // else Rabenseifner
inline constexpr std::size_t kFlatAllgatherBruckBytes = std::size_t{64} << 10;  // else ring
inline constexpr std::size_t kFlatReduceScatterHalvingBytes = std::size_t{64} << 10;  // else ring
// On this many nodes and more (2^L of them, several ranks on each, no arena: measured in SimGrid's
// simulation only, docs/SCALE.md "Pipelines across many nodes"), the node-aware pipelines of
// allreduce (multi_leader) and reduce_scatter (hierarchical) cut the buffer into node segments
// whose piece per carrier is at least 1/kManyNodesPieceDivisor of a segment (16 KiB by default;
// on fewer nodes four segments), at most kMostNodeSegments of them: their 2 log2 N (log2 N)
// exchanges across nodes are latency-bound at those sizes, and the node's phases on the next
// node segment hide them. Their phases inside a node of 2^j ranks take the butterfly and
// recursive doubling (j steps) instead of the ring (2^j - 1 steps).
inline constexpr int kManyNodes = 8;
inline constexpr std::size_t kManyNodesPieceDivisor = 16;
inline constexpr int kMostNodeSegments = 8;
// The arena's block reductions: rank r reduces block r in pieces of
// this many bytes, at most a p-th of a ring slot, one counter handoff per piece and phase. Small
// enough that a piece is reduced while it is in the cache its producer just wrote it from (p
// pieces in a core's L2), large enough that the two handoffs per round stay cheap
// (docs/results/arena-piece-bytes.csv).
inline constexpr std::size_t kPieceBytes = std::size_t{256} << 10;
// Segments in flight in the segmented schedules (exchange_reduce, ring_stream, the trees'
// forwarding, pairwise's steps): the library's default pipeline depth
// (lib/src/api/communicator.cpp).
inline constexpr int kPipelineDepth = 4;

// The model of one algorithm: its cost on the critical path and its steps in words
// (docs/ALGORITHMS.md). Each registry row (lib/src/coll/registry.hpp) points at its entry.
struct Entry {
  Cost (*cost)(const Shape&) = nullptr;
  const char* description = "";
  // Its cost splits what crosses between nodes itself (Cost::inter_*); a flat algorithm's cost
  // on several nodes is all across nodes.
  bool node_aware = false;
  // Where consecutive calls overlap: what each rank that may be the busiest does per call once
  // calls follow each other (one Cost per candidate; the period is the slowest of them, at most
  // the call's own cost). Null, or no candidates: the next call waits on this one's critical
  // path, so a call in a stream costs what one call costs.
  void (*stream)(const Shape&, std::vector<Cost>&) = nullptr;
};

// The entries, one per (collective, algorithm).
extern const Entry allreduce_ring, allreduce_recursive_doubling, allreduce_rabenseifner,
    allreduce_binomial_tree, allreduce_double_binary_tree, allreduce_shared_memory,
    allreduce_hierarchical, allreduce_multi_leader;
extern const Entry broadcast_binomial_tree, broadcast_pipelined_chain, broadcast_linear,
    broadcast_scatter_allgather, broadcast_shared_memory, broadcast_hierarchical,
    broadcast_knomial_tree;
extern const Entry reduce_binomial_tree, reduce_rabenseifner, reduce_shared_memory,
    reduce_hierarchical;
extern const Entry allgather_ring, allgather_recursive_doubling, allgather_bruck,
    allgather_shared_memory, allgather_hierarchical;
extern const Entry reduce_scatter_ring, reduce_scatter_recursive_halving, reduce_scatter_butterfly,
    reduce_scatter_shared_memory, reduce_scatter_hierarchical;
extern const Entry gather_binomial_tree, gather_linear, gather_shared_memory, scatter_binomial_tree,
    scatter_linear, scatter_shared_memory;
extern const Entry alltoall_pairwise, alltoall_bruck, alltoall_shared_memory;
extern const Entry barrier_dissemination, barrier_hierarchical, sendrecv_direct;
// The MPI library's own collective (Algorithm::mpi): not modelled (the trials measure it), so
// the model never ranks it first.
extern const Entry mpi_library;

// What follows reads the entries through the algorithm registry (implemented beside it, in
// lib/src/coll/registry.cpp).

// Cost of `algorithm` for `collective` on p ranks (on `nodes` nodes, in blocks); nullopt if the
// collective has no such algorithm.
std::optional<Cost> cost(Collective collective, Algorithm algorithm, int p, double bytes,
                         std::size_t segment_bytes, int nodes = 1);

// Seconds per call of `algorithm` on `machine`: one call's cost where machine.calls is 1, else the
// mean over machine.calls calls back to back (the first call's cost, then the stream period per
// further call: Entry::stream); nullopt if the collective has no such algorithm.
std::optional<double> seconds(Collective collective, Algorithm algorithm, int p, double bytes,
                              const Machine& machine);

// When each of p ranks (on machine.nodes nodes, in blocks) leaves a dissemination barrier that
// they all enter at once, in seconds from then: round k's message from rank r - 2^k takes its
// latency (`alpha` inside a node, `alpha_switch` under one switch, else `alpha_inter`) from when
// both its sender and its receiver are in round k.
std::vector<double> dissemination_exits(int p, const Machine& machine);

// What machine.start adds to seconds() for a measurement of machine.calls calls that counts the
// slowest rank's time from its own start (negative where it saves): the start's effect falls on
// the first call only. A message moves only once its receive is posted (SimGrid's SMPI: its
// sender's data waits in the receiver's mailbox), so a rank that starts early waits for the
// ranks that start late wherever its call needs their data, and that wait is in its time: the
// spread of the starts, in every schedule that needs rank 0's data (rank 0 starts last) at the
// rank that starts first (all but the reduce). The reduce's tree flows the other way: each rank
// starts before its parent, so the root, the rank whose time counts, finds the levels below it
// under way or done; what its first call saves is the tree's critical path from a common start
// less the same path from the barrier's exits (binomial_tree, and hierarchical where it runs
// binomial trees). 0 where machine.start is Start::together.
double start_delay(Collective collective, Algorithm algorithm, int p, double bytes,
                   const Machine& machine);

// Whether the algorithm's entry splits its phases by node (Entry::node_aware); false where the
// collective has no such algorithm.
bool node_aware(Collective collective, Algorithm algorithm);

// The cheapest algorithm for the call on `machine` (its nodes; seconds() plus start_delay()).
Algorithm best(Collective collective, int p, double bytes, const Machine& machine);

// The sizes (powers of two from 8 B to `max_bytes`) at which the best algorithm changes, with the
// new best: the crossover points.
struct Crossover {
  double bytes;
  Algorithm algorithm;
};
std::vector<Crossover> crossovers(Collective collective, int p, const Machine& machine,
                                  double max_bytes);

// A text description of the algorithm as steps and bytes (docs/ALGORITHMS.md is built from it);
// empty if the collective has no such algorithm.
std::string describe(Collective collective, Algorithm algorithm);

}  // namespace collx::model
