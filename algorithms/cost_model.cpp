#include "cost_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "recursive.hpp"

namespace collx::model {

namespace {

double log2_ceil(int p) {
  return p <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(p)));
}
using patterns::floor_pow2;

// The non-power-of-two fold: the extra ranks hand their whole buffer to a proxy before the core
// phase (one message, a reduction when reducing) and get the result back after.
Cost fold(const Shape& s, double bytes, bool reduces) {
  if (s.core == s.p) return {};
  return {2, 2 * bytes, reduces ? bytes : 0, 0};
}

Cost add(Cost a, const Cost& b) {
  a.messages += b.messages;
  a.bytes += b.bytes;
  a.reduced += b.reduced;
  a.copied += b.copied;
  a.inter_messages += b.inter_messages;
  a.inter_bytes += b.inter_bytes;
  return a;
}

// The messages and bytes of `c` moved to the network between nodes.
Cost across_nodes(Cost c) {
  c.inter_messages += c.messages;
  c.inter_bytes += c.bytes;
  c.messages = 0;
  c.bytes = 0;
  return c;
}

// A pipeline of `stages` hops moving `bytes` in segments: the first segment crosses every stage,
// the rest follow one per segment time.
Cost pipeline(double stages, double bytes, double segment, double per_byte_reduced) {
  const double segments = std::max(1.0, std::ceil(bytes / segment));
  const double seg = bytes / segments;
  const double steps = stages + segments - 1;
  return {steps, steps * seg, steps * seg * per_byte_reduced, 0};
}

// Through a shared arena, in slots: the producer copies a slot in while the readers copy
// the previous one out, so a reader's path is one slot in plus every byte out, with a counter
// handshake per slot. (The model takes the slot to be the machine's segment size.)
Cost shared_pipeline(double bytes, double slot_bytes) {
  const double slots = std::max(1.0, std::ceil(bytes / slot_bytes));
  return {slots, 0, 0, bytes + bytes / slots};
}

}  // namespace

Shape Shape::of(int p, double n, std::size_t segment_bytes, int nodes) {
  Shape s;
  s.nodes = std::clamp(nodes, 1, std::max(p, 1));
  s.per_node = std::ceil(std::max(p, 1) / s.nodes);
  s.p = p;
  s.n = n;
  s.segment = static_cast<double>(segment_bytes);
  s.lg = log2_ceil(p);
  s.core = p >= 1 ? floor_pow2(p) : 1;
  s.lg_core = std::log2(s.core);
  return s;
}

// ---- allreduce ----
const Entry allreduce_ring{
    [](const Shape& s) {
      return Cost{2 * (s.p - 1), 2 * (s.p - 1) / s.p * s.n, (s.p - 1) / s.p * s.n, 0};
    },
    "2(p-1) steps around the ring: p-1 reduce-scatter steps (receive a block segment, reduce it "
    "with the local one, forward it), then p-1 allgather steps forwarding the finished blocks. "
    "Each rank sends 2(p-1)/p n bytes and reduces (p-1)/p n."};
const Entry allreduce_recursive_doubling{
    [](const Shape& s) {
      return add({s.lg_core, s.lg_core * s.n, s.lg_core * s.n, 0}, fold(s, s.n, true));
    },
    "log2 p' steps; in step k exchange the whole buffer with rank xor 2^k and combine lower op "
    "upper. n bytes per step. Non-powers of two fold the extra ranks in before (one message + "
    "reduction) and out after (one message)."};
// Reduce-scatter by recursive halving then a doubling back up: the bandwidth-optimal pair.
static Cost halving_then_doubling(const Shape& s) {
  return add({2 * s.lg_core, 2 * (s.core - 1) / s.core * s.n, (s.core - 1) / s.core * s.n, 0},
             fold(s, s.n, true));
}
const Entry allreduce_rabenseifner{
    halving_then_doubling,
    "Recursive-halving reduce-scatter (log2 p' steps, n/2, n/4, ... bytes), then "
    "recursive-doubling allgather (log2 p' steps, back up to n/2). 2(p'-1)/p' n bytes, (p'-1)/p' n "
    "reduced; fold for non-powers of two. Neighbours first (`PairOrder::near_first`, "
    "lib/src/coll/fold.hpp): the steps run on bit-reversed core ranks, so the largest exchanges "
    "pair ranks 1, 2, 4 apart (the ranks of one node, placed in blocks) and only the smallest "
    "cross the network; the combining order is recursive doubling's."};
const Entry allreduce_binomial_tree{
    [](const Shape& s) {
      return Cost{2 * s.lg, 2 * s.lg * s.n, s.lg * s.n, 0};
    },
    "Binomial reduce to rank 0 (ceil(log2 p) levels of n bytes each), then a binomial broadcast "
    "back down."};
const Entry allreduce_double_binary_tree{
    [](const Shape& s) {
      // Each half goes up and down a binary tree of height h, pipelined, the down stream
      // trailing the up stream: about 2h + (segments) segment steps. Per step an inner node
      // receives two segments (and reduces them) going up and sends two going down.
      const double height = std::max(1.0, std::ceil(std::log2(s.p + 1)) - 1);
      const double segments = std::max(1.0, std::ceil(s.n / 2 / s.segment));
      const double per_segment = s.n / 2 / segments;
      const double steps = 2 * height + segments;
      return Cost{steps, steps * 2 * per_segment, (height + segments) * 2 * per_segment, 0};
    },
    "Each half of the buffer is reduced up a binary tree and broadcast back down it, segment by "
    "segment; the second tree numbers the ranks backwards so its leaves are the first tree's "
    "inner nodes. Latency ~ 2 log2 p, bandwidth ~ n per rank once the pipeline is full."};

// The node-aware allreduces (lib/src/coll/allreduce.cpp). Across nodes, and in their stead on
// one node or with one rank per node, they run flat_allreduce: recursive doubling up to 32 KiB,
// Rabenseifner above.
static Cost flat_allreduce(const Shape& s, double p, double n) {
  const Shape f = Shape::of(static_cast<int>(p), n, static_cast<std::size_t>(s.segment));
  return n <= static_cast<double>(kFlatAllreduceDoublingBytes)
             ? allreduce_recursive_doubling.cost(f)
             : halving_then_doubling(f);
}
static Cost node_aware_flat(const Shape& s) {
  const Cost c = flat_allreduce(s, s.p, s.n);
  return s.nodes > 1 ? across_nodes(c) : c;
}
const Entry allreduce_hierarchical{
    [](const Shape& s) {
      if (s.nodes <= 1 || s.per_node <= 1) return node_aware_flat(s);
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      return add({2 * lg, 2 * lg * s.n, lg * s.n, 0},
                 across_nodes(flat_allreduce(s, s.nodes, s.n)));
    },
    "Node-aware: reduce inside each node to its leader (local rank 0; through the node's arena "
    "where it has one, else a binomial tree of ceil(log2 k) levels of n bytes), an allreduce of "
    "the n bytes across the leaders (recursive doubling up to 32 KiB, Rabenseifner above), "
    "broadcast inside each node (the arena, else a binomial tree). One rank per node carries the "
    "whole buffer across nodes. Any layout, uniform or not; on one node or with one rank per node "
    "the flat allreduce.",
    true};
const Entry allreduce_multi_leader{
    [](const Shape& s) {
      if (s.nodes <= 1 || s.per_node <= 1) return node_aware_flat(s);
      const double k = s.per_node;
      // The k ranks of a node send their blocks across nodes at once, through its one link.
      Cost across = across_nodes(flat_allreduce(s, s.nodes, s.n / k));
      across.inter_bytes *= k;
      return add({2 * (k - 1), 2 * (k - 1) / k * s.n, (k - 1) / k * s.n, 0}, across);
    },
    "Node-aware, k ranks on every node: reduce-scatter inside each node (local rank i keeps block "
    "i, (k-1)/k n bytes; through the node's arena where it has one, else a ring), allreduce of "
    "block i across nodes by the ranks of local rank i (n/k bytes each, the k ranks side by side: "
    "every rank's link carries 1/k of the traffic across nodes), allgather inside each node (the "
    "arena, else a ring). Nodes with different rank counts: the hierarchical schedule; one node "
    "or one rank per node: the flat allreduce.",
    true};

// The arena's block reductions, in pieces of kPieceBytes.
static double piece_rounds(const Shape& s) {
  const double most = static_cast<double>(kPieceBytes);
  const double piece = s.segment > 0 ? std::min(most, s.segment / s.p) : most;
  return std::max(1.0, std::ceil(s.n / s.p / piece));
}
const Entry allreduce_shared_memory{
    [](const Shape& s) {
      const double rounds = piece_rounds(s);
      const double others = (s.p - 1) / s.p * s.n;
      // Pieces of the others' blocks in, the own block reduced and copied out, the others'
      // reduced pieces out.
      return Cost{2 * rounds, 0, others, 2 * others + s.n / s.p};
    },
    "One node only: rank r reduces block r of the buffer and nothing else. Round by round "
    "(256 KiB pieces per block, at most a p-th of a ring slot) every rank copies its input's "
    "pieces of the other blocks into "
    "its ring slot in a shared arena, reduces its own piece from its input and the p-1 slots "
    "(rank order 0..p-1, the same bits everywhere) while the piece is in cache, publishes it "
    "in a second slot, and copies the others' reduced pieces into its output: (p-1)/p n in, "
    "(p-1)/p n out per rank, no bytes on a wire."};

// ---- broadcast ----
const Entry broadcast_binomial_tree{
    [](const Shape& s) {
      return Cost{s.lg, s.lg * s.n, 0, 0};
    },
    "ceil(log2 p) levels, the whole buffer per level, forwarded segment by segment."};
const Entry broadcast_pipelined_chain{
    [](const Shape& s) { return pipeline(s.p - 1, s.n, s.segment, 0.0); },
    "p-1 hops in a chain, segments pipelined: (p - 2 + n/s) segment times."};
const Entry broadcast_linear{
    [](const Shape& s) {
      return Cost{s.p - 1, (s.p - 1) * s.n, 0, 0};
    },
    "The root sends the whole buffer to each of the p-1 others at once, each receives it once, "
    "unsegmented (a one-level tree). The model counts the root's p-1 messages one after the other "
    "(no overlap of one sender's latencies), so it never ranks linear ahead of the binomial tree; "
    "on a network whose latency dominates a message the sends' latencies overlap, and auto takes "
    "it by a measured rule (one rank on each of a few nodes)."};
const Entry broadcast_scatter_allgather{
    [](const Shape& s) {
      return Cost{s.lg + (s.p - 1), 2 * (s.p - 1) / s.p * s.n, 0, 0};
    },
    "Binomial scatter of p blocks (ceil(log2 p) messages, (p-1)/p n bytes), then a ring "
    "allgather (p-1 steps, (p-1)/p n bytes)."};
const Entry broadcast_shared_memory{
    [](const Shape& s) { return shared_pipeline(s.n, s.segment); },
    "One node only: the root copies the buffer slot by slot into a ring in an arena every "
    "rank maps; all p-1 readers copy each slot out at once, behind a counter. No bytes on a "
    "wire; n copied in, n out per reader."};

// ---- reduce ----
const Entry reduce_binomial_tree{
    [](const Shape& s) {
      return Cost{s.lg, s.lg * s.n, s.lg * s.n, 0};
    },
    "ceil(log2 p) levels; each inner rank receives and reduces its children's buffers "
    "(segmented) and sends the sum up."};
const Entry reduce_rabenseifner{
    halving_then_doubling,
    "Recursive-halving reduce-scatter, then a binomial gather of the blocks to the root: "
    "2(p-1)/p n bytes instead of n log p."};
const Entry reduce_shared_memory{
    [](const Shape& s) {
      // The others copy n in; the root reduces p-1 slots into its output, a slot behind.
      const double slots = std::max(1.0, std::ceil(s.n / s.segment));
      return Cost{slots * (s.p - 1), 0, (s.p - 1) * s.n, s.n / slots};
    },
    "One node only: every other rank copies its buffer slot by slot into its ring in a shared "
    "arena; the root reduces slot k of all p ranks straight into its output as they arrive "
    "(p-1 passes over a cached slot)."};

// ---- allgather ----
const Entry allgather_ring{
    [](const Shape& s) {
      return Cost{s.p - 1, (s.p - 1) / s.p * s.n, 0, 0};
    },
    "p-1 steps, one block each, received straight into the output and forwarded."};
const Entry allgather_recursive_doubling{
    [](const Shape& s) {
      return add({s.lg_core, (s.core - 1) / s.core * s.n, 0, 0},
                 s.core == s.p ? Cost{} : Cost{2, s.n + s.n / s.p, 0, 0});
    },
    "log2 p' steps exchanging doubling windows of blocks; fold for non-powers of two."};
const Entry allgather_bruck{
    [](const Shape& s) {
      return Cost{s.lg, (s.p - 1) / s.p * s.n, 0, 2 * s.n};
    },
    "ceil(log2 p) steps on a rotated copy (any p); one copy in and one out."};
const Entry allgather_shared_memory{
    [](const Shape& s) {
      // The own block in (n/p), every block out (n), slots of the largest block.
      return add(shared_pipeline(s.n, s.segment), Cost{0, 0, 0, s.n / s.p});
    },
    "One node only: every rank copies its block slot by slot into its ring in a shared arena and "
    "copies the other p-1 blocks out of theirs, all ranks at once: n/p in, n out per rank, no "
    "bytes on a wire. While plain stores into the rings are slow (a state of some machines, "
    "measured at run time), and at two ranks for blocks of 32-64 KiB always, a rank may publish a "
    "pointer instead, and the others copy its block straight from its buffer (process_vm_readv)."};

// ---- reduce_scatter (and reduce_scatter_v, which runs its schedules) ----
const Entry reduce_scatter_ring{
    [](const Shape& s) {
      return Cost{s.p - 1, (s.p - 1) / s.p * s.n, (s.p - 1) / s.p * s.n, 0};
    },
    "p-1 steps: receive a block segment, reduce with the local one, forward; the last step "
    "leaves the rank's own block."};
const Entry reduce_scatter_recursive_halving{
    [](const Shape& s) {
      const double share = (s.core - 1) / s.core * s.n;
      return add({s.lg_core, share, share, s.n / s.p},
                 s.core == s.p ? Cost{} : Cost{2, s.n + s.n / s.p, s.n, 0});
    },
    "log2 p' halving steps over the core ranks' shares; fold for non-powers of two."};
const Entry reduce_scatter_shared_memory{
    [](const Shape& s) {
      const double rounds = piece_rounds(s);
      const double others = (s.p - 1) / s.p * s.n;
      return Cost{rounds, 0, others, others};
    },
    "One node only: round by round (256 KiB pieces per block, at most a p-th of a ring slot) "
    "every rank copies its input's "
    "pieces of the other blocks into its ring slot in a shared arena and reduces its own "
    "block's piece from its input and the p-1 slots straight into its output (rank order "
    "0..p-1): (p-1)/p n copied in, no bytes on a wire."};

// ---- node-aware broadcast, reduce, allgather, reduce_scatter ----
// Each runs a flat algorithm across nodes, and on all p ranks where it does not split (one node,
// one rank per node): the choices of its schedule (lib/src/coll/broadcast.cpp, reduce.cpp,
// allgather.cpp, reduce_scatter.cpp), repeated here.
static bool splits(const Shape& s) {
  return s.nodes > 1 && s.per_node > 1;
}
static Shape flat_shape(const Shape& s, double p, double n) {
  return Shape::of(static_cast<int>(p), n, static_cast<std::size_t>(s.segment));
}
// A flat algorithm on all the ranks: across nodes where there are several.
static Cost all_flat(const Shape& s, const Cost& c) {
  return s.nodes > 1 ? across_nodes(c) : c;
}
// The blocks of k ranks of a node crossing at once: through the node's one link.
static Cost k_abreast(Cost across, double k) {
  across.inter_bytes *= k;
  return across;
}
static Cost flat_broadcast(const Shape& s, double p, double n) {
  const Shape f = flat_shape(s, p, n);
  return n <= static_cast<double>(kFlatBroadcastTreeBytes) || p <= 3
             ? broadcast_binomial_tree.cost(f)
             : broadcast_scatter_allgather.cost(f);
}
static Cost flat_reduce(const Shape& s, double p, double n) {
  const Shape f = flat_shape(s, p, n);
  return n <= static_cast<double>(kFlatReduceTreeBytes) ? reduce_binomial_tree.cost(f)
                                                        : reduce_rabenseifner.cost(f);
}
static Cost flat_allgather(const Shape& s, double p, double n) {
  const Shape f = flat_shape(s, p, n);
  if (f.core == f.p) return allgather_recursive_doubling.cost(f);
  return n <= static_cast<double>(kFlatAllgatherBruckBytes) ? allgather_bruck.cost(f)
                                                            : allgather_ring.cost(f);
}
static Cost flat_reduce_scatter(const Shape& s, double p, double n) {
  const Shape f = flat_shape(s, p, n);
  return n <= static_cast<double>(kFlatReduceScatterHalvingBytes)
             ? reduce_scatter_recursive_halving.cost(f)
             : reduce_scatter_ring.cost(f);
}

const Entry broadcast_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_broadcast(s, s.p, s.n));
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      return add(across_nodes(flat_broadcast(s, s.nodes, s.n)), {lg, lg * s.n, 0, 0});
    },
    "Node-aware: a broadcast across nodes from the root to one rank on every other node (its "
    "leader; binomial tree up to 256 KiB or 3 nodes, scatter + allgather above), then a broadcast "
    "inside each node from that rank (the root on its own node): through the node's arena where "
    "it has one, else a binomial tree. The buffer crosses into each node once. Any layout, uniform "
    "or not; on one node or with one rank per node the flat broadcast (the same choice on all "
    "ranks).",
    true};
const Entry reduce_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_reduce(s, s.p, s.n));
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      return add({lg, lg * s.n, lg * s.n, 0}, across_nodes(flat_reduce(s, s.nodes, s.n)));
    },
    "Node-aware: a reduce inside each node to one rank of it (the root on the root's node, "
    "whatever its local rank; the leader elsewhere; through the node's arena where it has one, "
    "else a binomial tree), partial sums only (avg not divided), then a reduce of the nodes' sums "
    "across nodes to the root (binomial tree up to 64 KiB, Rabenseifner above), which completes "
    "and divides once. Any layout; on one node or with one rank per node the flat reduce (binomial "
    "tree up to 64 KiB, Rabenseifner above).",
    true};
const Entry allgather_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_allgather(s, s.p, s.n));
      const double k = s.per_node;
      return add(add(k_abreast(across_nodes(flat_allgather(s, s.nodes, s.n / k)), k),
                     {k - 1, (k - 1) / k * s.n, 0, 0}),
                 {0, 0, 0, s.n});
    },
    "Node-aware, the multi-leader form: with k ranks on every node, the ranks of local rank i "
    "allgather their blocks across nodes (recursive doubling on a power of two, Bruck up to 64 "
    "KiB, the ring above; n/k bytes per rank, the k ranks of a node side by side) into region i of "
    "a buffer laid out local rank first; an allgather inside each node (through the node's arena "
    "where it has one, else a ring) assembles the k regions ((k-1)/k n bytes); every rank copies "
    "the blocks to their places (n). Each block leaves its node once toward each other node. "
    "Blocks of any lengths, nodes in blocks of ranks or interleaved (`--map-by node`). Fallbacks: "
    "one node, one rank per node, or nodes holding different numbers of ranks (3 + 1): the flat "
    "allgather (the same choice as across nodes, on all p ranks).",
    true};
const Entry reduce_scatter_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_reduce_scatter(s, s.p, s.n));
      const double k = s.per_node;
      const double share = (k - 1) / k * s.n;
      return add(add({0, 0, 0, s.n}, {k - 1, share, share, 0}),
                 k_abreast(across_nodes(flat_reduce_scatter(s, s.nodes, s.n / k)), k));
    },
    "Node-aware, the multi-leader form: with k ranks on every node, every rank copies its input "
    "into a buffer laid out local rank first (n; a.recv may then alias the input), a "
    "reduce-scatter inside each node (through the node's arena where it has one, else a ring) "
    "leaves region i (the blocks of the ranks of local rank i) summed over the node on local rank "
    "i ((k-1)/k n bytes, avg not divided), and those ranks reduce-scatter their region across "
    "nodes (recursive halving up to 64 KiB, the ring above; n/k bytes per rank, side by side), "
    "each keeping its own block, completed and divided once. Fallbacks: one node, one rank per "
    "node, or nodes holding different numbers of ranks: the flat reduce-scatter (recursive halving "
    "up to 64 KiB, the ring above).",
    true};

// ---- gather, scatter ----
static Cost rooted_tree(const Shape& s) {
  return Cost{s.lg, (s.p - 1) / s.p * s.n, 0, 0};
}
static Cost rooted_linear(const Shape& s) {
  return Cost{s.p - 1, (s.p - 1) / s.p * s.n, 0, 0};
}
constexpr const char* kRootedTree =
    "Binomial tree over contiguous windows of ranks: ceil(log2 p) messages at the root, (p-1)/p "
    "n bytes.";
constexpr const char* kRootedLinear =
    "Every rank exchanges its block with the root directly: p-1 messages at the root.";
const Entry gather_binomial_tree{rooted_tree, kRootedTree};
const Entry gather_linear{rooted_linear, kRootedLinear};
const Entry scatter_binomial_tree{rooted_tree, kRootedTree};
const Entry scatter_linear{rooted_linear, kRootedLinear};
static Cost rooted_shared_memory(const Shape& s) {
  // The root copies (p-1)/p n in or out through the rings, a slot at a time.
  return shared_pipeline((s.p - 1) / s.p * s.n, s.segment);
}
const Entry gather_shared_memory{
    rooted_shared_memory,
    "One node only: every other rank copies its block slot by slot into its ring in a shared "
    "arena; the root copies the slots out into its buffer, rank by rank. No bytes on a wire."};
const Entry scatter_shared_memory{
    rooted_shared_memory,
    "One node only: the root copies every other rank's block slot by slot into its ring in a "
    "shared arena, in rank order from root + 1; each rank copies its own slots out."};

// ---- alltoall ----
const Entry alltoall_pairwise{[](const Shape& s) {
                                return Cost{s.p - 1, (s.p - 1) / s.p * s.n, 0, 0};
                              },
                              "p-1 steps; in step s send to rank+s and receive from rank-s "
                              "(several steps in flight), the own block copied while the first "
                              "step's messages move."};
const Entry alltoall_bruck{
    [](const Shape& s) {
      return Cost{s.lg, s.lg * s.n / 2, 0, s.lg * s.n + 2 * s.n};
    },
    "Bruck: ceil(log2 p) steps, each moving about half the blocks (packed)."};
const Entry alltoall_shared_memory{
    [](const Shape& s) {
      // Each rank copies (p-1)/p n into its ring and as much out of the others', a slot at a time.
      return shared_pipeline((s.p - 1) / s.p * s.n, s.segment);
    },
    "One node only: pairwise's p-1 steps through a shared arena: in step s each rank copies its "
    "block for rank+s slot by slot into its ring and copies the slots of rank-s's block for it "
    "out, one slot of each in turn; each reader steps its counter over the slots of the blocks "
    "meant for others (up front for those before its own), so every slot is consumed by every "
    "other rank. (p-1)/p n copied in and as much out per rank, plain memcpy on both sides, no "
    "bytes on a wire; in place from three ranks on, the input is copied first (a block is "
    "overwritten in step s before it is sent in step p-s). At two ranks, blocks of 32-64 KiB go as "
    "one pointer each instead, their reader copying them straight from the producer's input "
    "(process_vm_readv; in place, from a copy of it, so that every rank counts the same slots "
    "whatever its own call)."};

// ---- barrier, point-to-point ----
const Entry mpi_library{
    [](const Shape&) { return Cost{1e12, 0, 0, 0}; },
    "The MPI library's own collective on the communicator (MPI_Allreduce, ...; its nonblocking "
    "form for a nonblocking call): whatever algorithm the MPI library chooses. Not modelled: "
    "auto's trials measure it beside collx's algorithms, and it runs where it is faster."};

const Entry barrier_dissemination{
    [](const Shape& s) {
      return Cost{s.lg, 0, 0, 0};
    },
    "Dissemination: ceil(log2 p) rounds of one-byte tokens to rank + 2^k."};
const Entry sendrecv_direct{[](const Shape& s) {
                              return Cost{1, s.n, 0, 0};
                            },
                            "One message each way."};

Algorithm best(Collective c, int p, double bytes, const Machine& m) {
  Algorithm winner = Algorithm::automatic;
  double fastest = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithms_of(c)) {
    if (a == Algorithm::shared_memory && !m.one_node) continue;
    const auto k = cost(c, a, p, bytes, m.segment_bytes, m.nodes);
    if (k && k->seconds(m) < fastest) {
      fastest = k->seconds(m);
      winner = a;
    }
  }
  return winner;
}

std::vector<Crossover> crossovers(Collective c, int p, const Machine& m, double max_bytes) {
  std::vector<Crossover> out;
  for (double bytes = 8; bytes <= max_bytes; bytes *= 2) {
    const Algorithm a = best(c, p, bytes, m);
    if (out.empty() || out.back().algorithm != a) out.push_back({bytes, a});
  }
  return out;
}

}  // namespace collx::model
