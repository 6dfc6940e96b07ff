#include "cost_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "recursive.hpp"
#include "tree.hpp"

namespace collx::model {

namespace {

double log2_ceil(int p) {
  return p <= 1 ? 0.0 : std::ceil(std::log2(static_cast<double>(p)));
}
using patterns::floor_pow2;

Cost add(Cost a, const Cost& b) {
  a.messages += b.messages;
  a.bytes += b.bytes;
  a.reduced += b.reduced;
  a.copied += b.copied;
  a.inter_messages += b.inter_messages;
  a.inter_bytes += b.inter_bytes;
  a.local_messages += b.local_messages;
  a.local_bytes += b.local_bytes;
  a.beside_bytes += b.beside_bytes;
  a.posted += b.posted;
  for (int i = 0; i < Cost::kSpans; ++i)
    a.inter_within[i] += b.inter_within[i];
  return a;
}

// Segments in flight when `bytes` go as one segmented message (exchange_reduce, ring_stream,
// the trees' forwarding): up to kPipelineDepth of the segment size.
double streams(const Shape& s, double bytes) {
  if (s.segment <= 0) return 1;
  return std::clamp(std::ceil(bytes / s.segment), 1.0, static_cast<double>(kPipelineDepth));
}

// The steps of a flat schedule, one at a time. On one node: the classic counts (`alpha` and
// `beta` per message and byte). Spread over nodes (ranks in blocks of k): each step either
// stays inside every node (the loopback: `alpha`, and its bytes over the messages in flight)
// or crosses, and then pays the network's latency and puts the bytes of every rank of a node
// that crosses at once through the node's one link.
struct Steps {
  const Shape& s;
  Cost c{};
  bool spread() const { return s.nodes > 1; }
  // One step: every rank sends `bytes` (as `in_flight` messages at once); `crossing`: how many
  // ranks of a node send to another node in it.
  // `group`: the partners lie in aligned groups of this many ranks (0: they do not).
  void step(double crossing, double bytes, double in_flight = 1, double reduced = 0,
            double group = 0) {
    c.reduced += reduced;
    if (!spread()) {
      c.messages += 1;
      c.bytes += bytes;
    } else if (crossing > 0) {
      c.inter_messages += 1;
      c.inter_bytes += crossing * bytes;
      if (group > 0) {
        const int span = static_cast<int>(std::ceil(std::log2(std::max(1.0, group / s.per_node))));
        if (span < Cost::kSpans) c.inter_within[span] += 1;
      }
    } else {
      c.local_messages += 1;
      c.local_bytes += bytes / in_flight;
    }
  }
  // Partners rank xor `distance` (a power of two): a node's ranks all stay or all cross.
  void xor_step(double distance, double bytes, double in_flight = 1, double reduced = 0) {
    step(distance >= s.per_node ? s.per_node : 0, bytes, in_flight, reduced, 2 * distance);
  }
  // Partners rank + `distance` (mod p): `distance` ranks of each node cross (p - distance
  // where the shift wraps), all k of them from k on.
  void shift_step(double distance, double bytes, double in_flight = 1, double reduced = 0) {
    step(std::min({distance, s.p - distance, s.per_node}), bytes, in_flight, reduced);
  }
  // The ring's p-1 steps of `bytes` each, segments in flight: one rank of a node sends into the
  // next node at each step, and the step waits for it.
  // Spread over nodes a step waits for its slower hop: the one into the next node (the
  // network's latency, the bytes through its link) or, with several ranks on a node, the hops
  // inside it (the loopback, at one stream per segment in flight): the longer of the two,
  // step after step.
  void ring_steps(double steps, double bytes, double reduced) {
    c.reduced += steps * reduced;
    if (!spread()) {
      c.messages += steps;
      c.bytes += steps * bytes;
      return;
    }
    c.inter_messages += steps;
    c.inter_bytes += steps * bytes;
    if (s.per_node > 1) c.beside_bytes += steps * bytes / streams(s, bytes);
  }
  // A binomial tree's level at `distance`: from a distance of k on, one rank of a node sends.
  void tree_step(double distance, double bytes, double in_flight = 1, double reduced = 0) {
    step(distance >= s.per_node ? 1 : 0, bytes, in_flight, reduced, 2 * distance);
  }
};

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
// The rings: p-1 steps (2(p-1) for the allreduce) of a block each, segments in flight.
static Cost ring_cost(const Shape& s, double steps, bool reduces) {
  Steps t{s};
  const double block = s.n / s.p;
  t.ring_steps(steps, block, 0);
  if (reduces) t.c.reduced = (s.p - 1) * block;
  return t.c;
}
const Entry allreduce_ring{
    [](const Shape& s) { return ring_cost(s, 2 * (s.p - 1), true); },
    "2(p-1) steps around the ring: p-1 reduce-scatter steps (receive a block segment, reduce it "
    "with the local one, forward it), then p-1 allgather steps forwarding the finished blocks. "
    "Each rank sends 2(p-1)/p n bytes and reduces (p-1)/p n."};
// The fold's two messages of the whole buffer, between an extra rank and its proxy `core`
// ranks away.
static void fold_steps(Steps& t, double bytes, bool reduces) {
  const Shape& s = t.s;
  if (s.core == s.p) return;
  t.shift_step(s.core, bytes, streams(s, bytes), reduces ? bytes : 0);
  t.shift_step(s.core, bytes);
}
// Recursive doubling's steps: the whole buffer with the rank 1, 2, 4, ... away, each an
// exchange_reduce of segments in flight.
static Cost doubling_steps(const Shape& s) {
  Steps t{s};
  fold_steps(t, s.n, true);
  for (double d = 1; d < s.core; d *= 2)
    t.xor_step(d, s.n, streams(s, s.n), s.n);
  return t.c;
}
const Entry allreduce_recursive_doubling{
    doubling_steps,
    "log2 p' steps; in step k exchange the whole buffer with rank xor 2^k and combine lower op "
    "upper. n bytes per step. Non-powers of two fold the extra ranks in before (one message + "
    "reduction) and out after (one message)."};
// Reduce-scatter by recursive halving then a doubling back up: the bandwidth-optimal pair.
// Neighbours first (PairOrder::near_first): the halving's step j exchanges n / 2^(j+1) with the
// rank 2^j away (an exchange_reduce of segments in flight), and the doubling's steps come back
// the other way (the smallest blocks with the farthest rank first), one message each.
static Cost halving_then_doubling(const Shape& s) {
  Steps t{s};
  fold_steps(t, s.n, true);
  double m = s.n;
  for (double d = 1; d < s.core; d *= 2) {
    m /= 2;
    t.xor_step(d, m, streams(s, m), m);
  }
  for (double d = s.core / 2; d >= 1; d /= 2) {
    t.xor_step(d, m);
    m *= 2;
  }
  return t.c;
}
const Entry allreduce_rabenseifner{
    halving_then_doubling,
    "Recursive-halving reduce-scatter (log2 p' steps, n/2, n/4, ... bytes), then "
    "recursive-doubling allgather (log2 p' steps, back up to n/2). 2(p'-1)/p' n bytes, (p'-1)/p' n "
    "reduced; fold for non-powers of two. Neighbours first (`PairOrder::near_first`, "
    "lib/src/coll/fold.hpp): the steps run on bit-reversed core ranks, so the largest exchanges "
    "pair ranks 1, 2, 4 apart (the ranks of one node, placed in blocks) and only the smallest "
    "cross the network; the combining order is recursive doubling's."};
static Cost binomial_reduce_steps(const Shape& s);
static Cost binomial_broadcast_steps(const Shape& s);
static double node_broadcast_fill(const Shape& s, double levels);
const Entry allreduce_binomial_tree{
    [](const Shape& s) { return add(binomial_reduce_steps(s), binomial_broadcast_steps(s)); },
    "Binomial reduce to rank 0 (ceil(log2 p) levels of n bytes each), then a binomial broadcast "
    "back down."};
const Entry allreduce_double_binary_tree{
    [](const Shape& s) {
      // What the schedule waits for: every rank runs its segment steps in turn, and step s of a
      // lane (the up segment s, then the down segment s - lag) waits for its parent's down
      // segment, which waits for the parent's up segment s, which waits for this rank's: each
      // step is a round trip through the tree's h full levels (h = floor(log2(p+1)) - 1), up
      // and back down, and the two lanes take their turns. Per hop an inner node receives two
      // segments through its link going up and sends two going down. So 2 lanes x 2h hops of
      // two segments per segment of a half: the segments do not overlap across the tree.
      const double height = std::max(1.0, std::floor(std::log2(s.p + 1)) - 1);
      const double segments = std::max(1.0, std::ceil(s.n / 2 / s.segment));
      const double per_segment = s.n / 2 / segments;
      const double hops = segments * 2 * 2 * height;
      Cost c{0, 0, segments * 2 * height * 2 * per_segment, 0};
      if (s.nodes > 1) {
        c.inter_messages = hops;
        c.inter_bytes = hops * 2 * per_segment;
      } else {
        c.messages = hops;
        c.bytes = hops * 2 * per_segment;
      }
      return c;
    },
    "Each half of the buffer is reduced up a binary tree and broadcast back down it, segment by "
    "segment; the second tree numbers the ranks backwards so its leaves are the first tree's "
    "inner nodes. The steps wait for each other: each segment step of a lane is a round trip "
    "up the tree and back down (the down segment trails by about the tree's height, and waits "
    "for the parent's), so the time is about (n/2s) x 2 lanes x 2 log2 p hops of two segments, "
    "not a full pipeline."};

// The node-aware allreduces (lib/src/coll/allreduce.cpp). Across nodes, and in their stead on
// one node or with one rank per node, they run flat_allreduce: recursive doubling up to 32 KiB,
// Rabenseifner above.
// The flat algorithms of the node-aware ones run on the leaders (or every rank where there is
// one per node): one rank per node where the ranks are spread over nodes.
static Shape flat_shape(const Shape& s, double p, double n) {
  return Shape::of(static_cast<int>(p), n, static_cast<std::size_t>(s.segment),
                   s.nodes > 1 ? static_cast<int>(p) : 1);
}
static Cost flat_allreduce(const Shape& s, double p, double n) {
  const Shape f = flat_shape(s, p, n);
  return n <= static_cast<double>(kFlatAllreduceDoublingBytes)
             ? allreduce_recursive_doubling.cost(f)
             : halving_then_doubling(f);
}
static Cost node_aware_flat(const Shape& s) {
  const Cost c = flat_allreduce(s, s.p, s.n);
  return s.nodes > 1 ? across_nodes(c) : c;
}
// The phases inside a node of a node-aware schedule, where its ranks are spread over nodes:
// `messages` steps over the loopback and `bytes` (already over the segments in flight), in the
// node-aware entries' `messages` and `bytes` (inside a node: `alpha`, `beta`). On 2,
// 4, 8, ... nodes a buffer of more than one node segment (4 segments of every carrier's share,
// 8 node segments at most; allreduce.cpp, pipelined_segment) runs pipelined: the phases inside a
// node move beside the crossing of other node segments, and the first and last ones' phases are
// the fill.
// On kManyNodes nodes and more a buffer of one such node segment is cut into kMostNodeSegments
// node segments down to pieces of a kManyNodesPieceDivisor-th of a segment per carrier.
static double node_segment_of(const Shape& s, double carriers) {
  const double most = s.n / kMostNodeSegments;
  const double node_segment = std::max(4 * s.segment * carriers, most);
  if (s.n <= node_segment && s.nodes >= kManyNodes) {
    return std::max(s.segment / static_cast<double>(kManyNodesPieceDivisor) * carriers, most);
  }
  return node_segment;
}
// Whether the node phases of node segments of `node_segment` bytes take the butterfly and
// recursive doubling (log2 k steps, lib/src/coll/collectives.hpp halving_inside_node).
static bool halving_inside(const Shape& s, double node_segment) {
  return s.nodes >= kManyNodes && std::has_single_bit(static_cast<unsigned>(s.per_node)) &&
         node_segment / s.per_node <= s.segment;
}
// One node segment's reduce-scatter (or allgather) inside a node of k ranks in such a pipeline:
// the bytes a rank moves over the loopback, each step's message over its own segments in flight
// (the messages of a step move side by side, each at the loopback's full bandwidth): the
// butterfly's log2 k halving steps (node_segment / 2, / 4, ..., / k) or the ring's k - 1
// blocks. A node segment is smaller than the buffer, so its steps have fewer segments in flight
// than the whole buffer's would.
static double node_phase_bytes(const Shape& s, double node_segment, double k, bool halving) {
  if (!halving) return (k - 1) * (node_segment / k) / streams(s, node_segment / k);
  double bytes = 0;
  for (double m = node_segment / 2; m * k >= node_segment * (1 - 1e-9); m /= 2)
    bytes += m / streams(s, m);
  return bytes;
}
static Cost inside_node(const Shape& s, double messages, double bytes, double carriers) {
  Cost c;
  c.messages = messages;
  const bool power_of_two = std::has_single_bit(static_cast<unsigned>(s.nodes));
  const double node_segment = node_segment_of(s, carriers);
  if (power_of_two && s.n > node_segment) {
    const double node_segments = std::ceil(s.n / node_segment);
    c.bytes = bytes / node_segments;
    c.beside_bytes = bytes;
  } else {
    c.bytes = bytes;
  }
  return c;
}
const Entry allreduce_hierarchical{
    [](const Shape& s) {
      if (s.nodes <= 1 || s.per_node <= 1) return node_aware_flat(s);
      // Inside a node: a binomial reduce, ceil(log2 k) levels of the whole buffer, segments in
      // flight, and a binomial broadcast forwarded segment by segment.
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      Cost c =
          inside_node(s, 2 * lg, (lg + 1) * s.n / streams(s, s.n) + node_broadcast_fill(s, lg), 1);
      c.reduced = lg * s.n;
      return add(c, across_nodes(flat_allreduce(s, s.nodes, s.n)));
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
      const bool pow2_nodes = std::has_single_bit(static_cast<unsigned>(s.nodes));
      // Many nodes, not a power of two, up to where the 4-segment pipeline starts: the flat
      // allreduce (allreduce.cpp).
      if (s.nodes >= kManyNodes && !pow2_nodes && s.n <= 4 * s.segment * k) {
        return s.n <= static_cast<double>(kFlatAllreduceDoublingBytes) ? doubling_steps(s)
                                                                       : halving_then_doubling(s);
      }
      // The k ranks of a node send their blocks across nodes at once, through its one link.
      Cost across = across_nodes(flat_allreduce(s, s.nodes, s.n / k));
      across.inter_bytes *= k;
      // Inside a node: a ring reduce-scatter and a ring allgather, k-1 steps of n/k each; in the
      // many-node pipeline the butterfly and recursive doubling, log2 k steps each.
      const double node_segment = node_segment_of(s, k);
      const bool pipelined = pow2_nodes && s.n > node_segment;
      const bool halving = pipelined && halving_inside(s, node_segment);
      const double steps = halving ? std::log2(k) : k - 1;
      Cost c;
      if (pipelined) {
        // The node's phases of one node segment are the fill; those of all of them move beside
        // the exchanges across nodes.
        const double node_segments = std::ceil(s.n / node_segment);
        const double phase = 2 * node_phase_bytes(s, s.n / node_segments, k, halving);
        c.messages = 2 * steps;
        c.bytes = phase;
        c.beside_bytes = node_segments * phase;
      } else {
        c = inside_node(s, 2 * steps, 2 * (k - 1) / k * s.n / streams(s, s.n / k), k);
      }
      c.reduced = (k - 1) / k * s.n;
      return add(c, across);
    },
    "Node-aware, k ranks on every node: reduce-scatter inside each node (local rank i keeps block "
    "i, (k-1)/k n bytes; through the node's arena where it has one, else a ring), allreduce of "
    "block i across nodes by the ranks of local rank i (n/k bytes each, the k ranks side by side: "
    "every rank's link carries 1/k of the traffic across nodes), allgather inside each node (the "
    "arena, else a ring). On 2, 4, 8, ... nodes pipelined in node segments (4 segments of each "
    "carrier's share at least, 8 node segments at most); on 8 nodes and more (kManyNodes) a "
    "buffer below that cut into 8 node segments down to a 16th of a segment per carrier, their "
    "node phases the butterfly and recursive doubling (log2 k steps) where a block is one segment "
    "or less; on 8 or more nodes that are not a power of two, those sizes run the flat "
    "allreduce. Nodes with different rank counts: the hierarchical schedule; one node or one rank "
    "per node: the flat allreduce.",
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
// A binomial broadcast's levels inside a node, forwarded segment by segment: the first
// segment passes every level (the fill), the rest follow at the loopback's speed for the
// segments in flight (each message moving at its full bandwidth, a rank's sends to its
// children side by side).
static double node_broadcast_fill(const Shape& s, double levels) {
  return levels * std::min(s.n, s.segment);
}
// The binomial broadcast, forwarded segment by segment: every rank sends the whole buffer to
// each of its children one after the other, so the root's link carries it once per level that
// crosses nodes (the deeper ranks forward while it sends). The levels inside a node add their
// fill; the rest of their bytes move beside the link. One level's latency per level.
static Cost binomial_broadcast_steps(const Shape& s) {
  if (s.nodes <= 1) return Cost{s.lg, s.lg * s.n, 0, 0};
  Steps t{s};
  Cost& c = t.c;
  double local_levels = 0;
  for (double d = 1; d < s.p; d *= 2) {
    if (d >= s.per_node) {
      t.tree_step(d, s.n);
    } else {
      local_levels += 1;
    }
  }
  if (local_levels > 0) {
    c.local_messages += local_levels;
    c.local_bytes += node_broadcast_fill(s, local_levels);
    c.beside_bytes += s.n / streams(s, s.n);
  }
  return t.c;
}
// Calls back to back, for the trees whose ranks post a call's messages to or from all their
// children at once (the binomial broadcast's sends, the binomial reduce's receives): what those
// messages cost a rank in a stream of calls. Its children are the ranks rank + d, d = 1, 2, 4,
// ... below `parent` (its parent's distance; any d at the root, `parent` 0) and below p.
static double binomial_child_count(const Shape& s, double rank, double parent) {
  double children = 0;
  for (double d = 1; (parent == 0 || d < parent) && rank + d < s.p; d *= 2)
    children += 1;
  return children;
}
// The children's messages at once: `latency`: the farthest child's latency (theirs overlap;
// without it the bytes alone, which hold the link but not the rank); the bytes of those across
// nodes one after the other through the node's link, the others beside them over the loopback,
// each at its own bandwidth.
static Cost binomial_children(const Shape& s, double rank, double parent, bool latency) {
  Cost c;
  double children = 0;
  double across = 0;
  double farthest = 0;
  for (double d = 1; (parent == 0 || d < parent) && rank + d < s.p; d *= 2) {
    children += 1;
    farthest = d;
    if (s.nodes > 1 && d >= s.per_node) across += 1;
  }
  if (children == 0) return c;
  if (s.nodes <= 1) {
    c.messages = latency ? 1 : 0;
    c.bytes = s.n;
  } else if (across > 0) {
    Steps t{s};
    t.tree_step(farthest, across * s.n);
    c = t.c;
    if (!latency) {
      c.inter_messages = 0;
      std::fill(std::begin(c.inter_within), std::end(c.inter_within), 0.0);
    }
    if (children > across) c.beside_bytes += s.n;
  } else {
    c.local_messages = latency ? 1 : 0;
    c.local_bytes = s.n;
  }
  return c;
}
// One message of the whole buffer between a rank and the rank `distance` away.
static Cost binomial_hop(const Shape& s, double distance) {
  Steps t{s};
  t.tree_step(distance, s.n);
  return t.c;
}
// The binomial broadcast, calls back to back (where the buffer is one segment; with several the
// levels already work at once within a call). A rank posts its receive when it starts a call
// and its sends to all its children once the buffer is in (lib/src/coll/broadcast.cpp), and
// starts the next call when its sends are done: below the eager size at once, so the root starts
// the next broadcast while the leaves still receive this one. A rank's period: its receive (its
// parent's send waits for it) and, from the eager size on, its sends, which it waits for; below
// it the sends' bytes still hold its link. Candidates as for the reduce (the same tree).
static Cost binomial_broadcast_period(const Shape& s, double rank, double parent) {
  Cost c = binomial_children(s, rank, parent, s.n >= s.eager);
  if (parent > 0) {
    const Cost in = binomial_hop(s, parent);
    c = s.n >= s.eager ? add(c, in) : in;
  }
  return c;
}
static bool one_message(const Shape& s) {
  return s.p <= 2 || s.segment <= 0 || s.n <= s.segment;
}
static void binomial_broadcast_stream(const Shape& s, std::vector<Cost>& busiest) {
  if (!one_message(s)) return;
  busiest.push_back(binomial_broadcast_period(s, 0, 0));
  if (s.n < s.eager) busiest.push_back(binomial_children(s, 0, 0, false));
  for (double d = 1; d < s.p; d *= 2)
    busiest.push_back(binomial_broadcast_period(s, d, d));
}
const Entry broadcast_binomial_tree{
    binomial_broadcast_steps,
    "ceil(log2 p) levels, the whole buffer per level, forwarded segment by segment.", false,
    binomial_broadcast_stream};
// The k-nomial tree (radix kKnomialRadix): at the level of distance d = k^i a rank posts its
// messages to the children at d, 2d, ... (k-1)d at once: one latency, the sender's overhead per
// further message, their bytes one after another through its link (those that cross between
// nodes through the node's, the others beside them). The whole buffer per level: the schedule
// forwards segment by segment as the binomial tree does, but is chosen only below a segment.
static Cost knomial_broadcast_steps(const Shape& s) {
  const double k = patterns::kKnomialRadix;
  Cost c;
  for (double d = 1; d < s.p; d *= k) {
    double children = 0;
    double crossing = 0;
    for (double j = 1; j < k && j * d < s.p; ++j) {
      children += 1;
      if (j * d >= s.per_node) crossing += 1;
    }
    c.posted += children - 1;
    if (s.nodes <= 1) {
      c.messages += 1;
      c.bytes += children * s.n;
    } else if (crossing > 0) {
      c.inter_messages += 1;
      c.inter_bytes += crossing * s.n;
      c.beside_bytes += (children - crossing) * s.n;
    } else {
      c.local_messages += 1;
      c.local_bytes += children * s.n;
    }
  }
  return c;
}
const Entry broadcast_knomial_tree{
    knomial_broadcast_steps,
    "ceil(log4 p) levels (radix 4), a rank sending the whole buffer to up to 3 children a level "
    "at once: fewer latencies than the binomial tree's log2 p, more bytes through a sender's "
    "link per level."};
const Entry broadcast_pipelined_chain{
    [](const Shape& s) {
      if (s.nodes <= 1) return pipeline(s.p - 1, s.n, s.segment, 0.0);
      // Spread over nodes: the first segment crosses every hop (nodes - 1 of them between
      // nodes, the others inside one), the rest follow one per segment time of the slowest hop,
      // the one into the next node.
      const double segments = std::max(1.0, std::ceil(s.n / s.segment));
      const double seg = s.n / segments;
      Cost c;
      c.inter_messages = s.nodes - 1 + segments - 1;
      c.inter_bytes = c.inter_messages * seg;
      c.local_messages = s.p - s.nodes;
      c.local_bytes = (s.p - s.nodes) * seg;
      return c;
    },
    "p-1 hops in a chain, segments pipelined: (p - 2 + n/s) segment times.", false,
    // Calls back to back, one segment (the same tree_broadcast as the binomial tree): a rank's
    // period is its receive from the rank before it and, from the eager size on, its send to the
    // next; spread over nodes, either of them may be the hop into the next node.
    [](const Shape& s, std::vector<Cost>& busiest) {
      if (!one_message(s)) return;
      const bool waits = s.n >= s.eager;
      for (double in = 0; in <= 1; ++in) {
        for (double out = 0; out <= (waits ? 1 : 0); ++out) {
          // On one node no hop crosses; with one rank per node every hop does.
          if (s.nodes <= 1 && (in > 0 || out > 0)) continue;
          if (s.nodes > 1 && s.per_node <= 1 && (in == 0 || (waits && out == 0))) continue;
          Steps t{s};
          t.step(in, s.n);
          if (waits) t.step(out, s.n);
          busiest.push_back(t.c);
        }
      }
    }};
// The root posts p-1 messages at once: one latency, `overhead` per further message, and every
// byte through the root's link (spread over nodes: its own node's messages move beside).
static Cost root_to_all(const Shape& s, double bytes_each) {
  Cost c;
  c.posted = s.p - 2;
  if (s.nodes <= 1) {
    c.messages = 1;
    c.bytes = (s.p - 1) * bytes_each;
  } else {
    c.inter_messages = 1;
    c.inter_bytes = (s.p - s.per_node) * bytes_each;
    c.beside_bytes = s.per_node > 1 ? bytes_each : 0;
  }
  return c;
}
const Entry broadcast_linear{
    [](const Shape& s) { return root_to_all(s, s.n); },
    "The root sends the whole buffer to each of the p-1 others at once, each receives it once, "
    "unsegmented (a one-level tree). The sends' latencies overlap: one latency and the sender's "
    "overhead per further message, but all (p-1) n bytes through the root's link.",
    false,
    // Calls back to back: below the eager size the root's sends are done once posted, so it
    // starts the next call at once, held by its posting overhead and its link's bytes; a
    // receiver's period is its one message. From the eager size on the root waits for every
    // send: a call's own cost.
    [](const Shape& s, std::vector<Cost>& busiest) {
      if (s.n >= s.eager) return;
      Cost root = root_to_all(s, s.n);
      root.messages = 0;
      root.inter_messages = 0;
      busiest.push_back(root);
      Steps t{s};
      t.step(s.per_node < s.p ? 1 : 0, s.n);
      busiest.push_back(t.c);
    }};
// The scatter's sends across nodes wait for each other (below) from this many bytes a message:
// the MPI library's eager size (SMPI's 64 KiB). Under it the simulation shows no such wait: with
// it, the model was 1.27-1.35x the simulated scatter + allgather at 64 KiB on 16 and 64 ranks x 1
// (messages of 32 KiB and less); why SMPI's eager messages do not queue behind each other there
// was not traced (docs/SCALE.md, "The cost model against the simulation").
static constexpr double kScatterShareBytes = 64.0 * 1024;
const Entry broadcast_scatter_allgather{
    [](const Shape& s) {
      // The scatter: the root sends half, a quarter, ... of the blocks (largest first, to the
      // rank p/2, p/4, ... away); then the allgather: on a power of two below
      // kScatterAllgatherDoublingBytes recursive doubling (log2 p exchanges of the 2^j blocks
      // gathered so far with the rank 2^j away), else the ring's p-1 steps of a block, crossing
      // into the next node from one rank of each. A rank posts the sends to all its children at
      // once: spread over nodes, those that cross share its node's link, so the child at
      // distance d has its blocks only once those of the nearer children across nodes are
      // through too (messages from kScatterShareBytes).
      Steps t{s};
      for (double d = s.core; d >= 1; d /= 2) {
        if (d >= s.p) continue;
        double bytes = std::min(d, s.p - d) / s.p * s.n;
        if (t.spread() && d >= s.per_node && bytes >= kScatterShareBytes) {
          for (double e = d / 2; e >= s.per_node; e /= 2)
            bytes += std::min(e, s.p - e) / s.p * s.n;
        }
        t.tree_step(d, bytes);
      }
      if (s.core == s.p && s.n < static_cast<double>(kScatterAllgatherDoublingBytes)) {
        for (double d = 1; d < s.p; d *= 2)
          t.xor_step(d, d / s.p * s.n);
      } else {
        t.ring_steps(s.p - 1, s.n / s.p, 0);
      }
      return t.c;
    },
    "Binomial scatter of p blocks (ceil(log2 p) messages, (p-1)/p n bytes), then an allgather "
    "of (p-1)/p n bytes: recursive doubling (log2 p steps) on a power of two below 512 KiB, "
    "else a ring (p-1 steps)."};
const Entry broadcast_shared_memory{
    [](const Shape& s) { return shared_pipeline(s.n, s.segment); },
    "One node only: the root copies the buffer slot by slot into a ring in an arena every "
    "rank maps; all p-1 readers copy each slot out at once, behind a counter. No bytes on a "
    "wire; n copied in, n out per reader. At two ranks from 32 KiB (at any rank count and size "
    "with `COLLX_SHM_DIRECT=1`) the buffer goes as pointers instead: each rank publishes its "
    "buffer's address in one slot of its ring, the buffer is cut in p pieces, the root writes "
    "each other rank's piece into that rank's buffer (process_vm_writev) while each other rank "
    "reads the other p-1 pieces from the root's (process_vm_readv): (p-1)/p n copied by each "
    "rank, all at once, where the ring has the root copy n in and each reader n out after it "
    "([PERFORMANCE.md](PERFORMANCE.md#broadcast-gather-and-scatter-as-pointers))."};

// ---- reduce ----
// The binomial reduce: ceil(log2 p) levels of the whole buffer, the nearest children first
// (the rank 1, 2, 4, ... away), segments in flight.
static Cost binomial_reduce_steps(const Shape& s) {
  Steps t{s};
  for (double d = 1; d < s.p; d *= 2)
    t.tree_step(d, s.n, streams(s, s.n), s.n);
  return t.c;
}
// Calls back to back. Where each child's message is one segment, a rank posts the receives
// from all its children when it starts a call (lib/src/coll/reduce.cpp), so a message of the
// next call waits only for its receiver to have finished this one, not for its receiver's
// other children: calls overlap, each rank a call behind its parent at most. A rank's period
// is then what it does between starting a call and starting the next: its children's messages
// at once (binomial_children), their combines, and, from the eager size on, its own send up,
// which it waits for. The root has the most children, rank 2^j the same children as every rank
// whose lowest set bit is 2^j and the farthest parent of them: the candidates for the busiest
// rank. Several segments per child: one child at a time through exchange_reduce, no overlap
// modelled.
static Cost binomial_reduce_period(const Shape& s, double rank, double parent) {
  Cost c = binomial_children(s, rank, parent, true);
  c.reduced = binomial_child_count(s, rank, parent) * s.n;
  if (parent > 0 && s.n >= s.eager) c = add(c, binomial_hop(s, parent));
  return c;
}
static void binomial_reduce_stream(const Shape& s, std::vector<Cost>& busiest) {
  if (s.segment > 0 && s.n > s.segment) return;
  busiest.push_back(binomial_reduce_period(s, 0, 0));
  for (double d = 1; d < s.p; d *= 2)
    busiest.push_back(binomial_reduce_period(s, d, d));
}
const Entry reduce_binomial_tree{
    binomial_reduce_steps,
    "ceil(log2 p) levels; each inner rank receives and reduces its children's buffers "
    "(segmented) and sends the sum up.",
    false, binomial_reduce_stream};
namespace {
Cost halving_reduce_scatter_cost(const Shape& s, bool near_first);
}  // namespace
// Rabenseifner's reduce. The reduce-scatter half runs the reduce_scatter the library picks at the
// size (the flat choice: recursive halving up to kFlatReduceScatterHalvingBytes, far first, step
// j exchanging n / 2^(j+1) with the rank p'/2^(j+1) away; the ring above), or with
// `butterfly_half` the butterfly; then the binomial gather of the blocks, 2^j blocks from the rank
// 2^j away. The library takes the butterfly on kManyNodes nodes and more where the reduce is not
// itself the part across nodes of a node-aware one (lib/src/coll/reduce.cpp).
static Cost rabenseifner_reduce(const Shape& s, bool butterfly_half) {
  Steps t{s};
  if (butterfly_half) {
    t.c = halving_reduce_scatter_cost(s, true);
  } else if (s.n <= static_cast<double>(kFlatReduceScatterHalvingBytes)) {
    fold_steps(t, s.n, true);
    double m = s.n;
    for (double d = s.core / 2; d >= 1; d /= 2) {
      m /= 2;
      t.xor_step(d, m, streams(s, m), m);
    }
  } else {
    t.ring_steps(s.p - 1, s.n / s.p, s.n / s.p);
  }
  for (double d = 1; d < s.p; d *= 2)
    t.tree_step(d, std::min(d, s.p - d) / s.p * s.n);
  return t.c;
}
const Entry reduce_rabenseifner{
    [](const Shape& s) { return rabenseifner_reduce(s, s.nodes >= kManyNodes); },
    "A reduce-scatter (the library's choice at the size: recursive halving up to 64 KiB, the "
    "ring above; on 8 nodes and more the butterfly), then a binomial gather of the blocks to the "
    "root: 2(p-1)/p n bytes instead of n log p."};
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
    [](const Shape& s) { return ring_cost(s, s.p - 1, false); },
    "p-1 steps, one block each, received straight into the output and forwarded."};
const Entry allgather_recursive_doubling{
    [](const Shape& s) {
      // Step j: the 2^j blocks gathered so far with the rank 2^j away, one message.
      Steps t{s};
      if (s.core != s.p) {
        t.shift_step(s.core, s.n / s.p);
        t.shift_step(s.core, s.n);
      }
      for (double d = 1; d < s.core; d *= 2)
        t.xor_step(d, d / s.core * s.n);
      return t.c;
    },
    "log2 p' steps exchanging doubling windows of blocks; fold for non-powers of two."};
const Entry allgather_bruck{
    [](const Shape& s) {
      // Step j: min(2^j, p - 2^j) blocks to the rank 2^j before.
      Steps t{s};
      for (double d = 1; d < s.p; d *= 2)
        t.shift_step(d, std::min(d, s.p - d) / s.p * s.n);
      t.c.copied += 2 * s.n;
      return t.c;
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
    [](const Shape& s) { return ring_cost(s, s.p - 1, true); },
    "p-1 steps: receive a block segment, reduce with the local one, forward; the last step "
    "leaves the rank's own block."};
// Recursive halving's reduce-scatter: the fold, then step j exchanges n / 2^(j+1), an
// exchange_reduce of segments in flight, with the rank p'/2^(j+1) away (far first: every block
// ends on its owner as it lies) or 2^j away (near first, the butterfly: one copy of the input
// puts the blocks in bit-reversed order first).
namespace {
Cost halving_reduce_scatter_cost(const Shape& s, bool near_first) {
  Steps t{s};
  if (s.core != s.p) {
    t.shift_step(s.core, s.n, streams(s, s.n), s.n);
    t.shift_step(s.core, s.n / s.p);
  }
  double m = s.n;
  for (double j = 1; j < s.core; j *= 2) {
    m /= 2;
    t.xor_step(near_first ? j : s.core / (2 * j), m, streams(s, m), m);
  }
  t.c.copied += (near_first ? s.n : 0) + s.n / s.p;
  return t.c;
}
}  // namespace
const Entry reduce_scatter_recursive_halving{
    [](const Shape& s) { return halving_reduce_scatter_cost(s, false); },
    "log2 p' halving steps over the core ranks' shares; fold for non-powers of two."};
const Entry reduce_scatter_butterfly{
    [](const Shape& s) { return halving_reduce_scatter_cost(s, true); },
    "The butterfly: recursive halving with neighbours first. The input is copied with its blocks "
    "in bit-reversed order of their ranks, so that each halving step's halves are contiguous; "
    "step j exchanges n / 2^(j+1) with the rank 2^j away, the largest exchanges between "
    "neighbours (inside a node where ranks are placed in blocks), the smallest between the ranks "
    "farthest apart, and every block ends on its owner. log2 p' steps, fold for non-powers of "
    "two; one copy of n more than recursive halving."};
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
// `across`: the reduce across nodes of a node-aware one (a group of one rank per node).
static Cost flat_reduce(const Shape& s, double p, double n, bool across) {
  const Shape f = flat_shape(s, p, n);
  return n <= static_cast<double>(kFlatReduceTreeBytes)
             ? reduce_binomial_tree.cost(f)
             : rabenseifner_reduce(f, !across && f.nodes >= kManyNodes);
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

// A stream function: the busiest ranks' costs between consecutive calls (Entry::stream).
using StreamOf = void (*)(const Shape&, std::vector<Cost>&);
// `tree`'s stream on all p ranks, where a node-aware schedule does not split.
static void all_flat_stream(const Shape& s, StreamOf tree, std::vector<Cost>& busiest) {
  Shape f = flat_shape(s, s.p, s.n);
  f.eager = s.eager;
  std::vector<Cost> flat;
  tree(f, flat);
  for (const Cost& c : flat)
    busiest.push_back(all_flat(s, c));
}
// `tree`'s streams in the two phases of a node-aware schedule that splits: inside a node (its
// ranks) and across nodes (one head per node); false where either has none.
static bool phase_streams(const Shape& s, StreamOf tree, std::vector<Cost>& inside,
                          std::vector<Cost>& across) {
  Shape node = Shape::of(static_cast<int>(s.per_node), s.n, static_cast<std::size_t>(s.segment));
  node.eager = s.eager;
  Shape heads = flat_shape(s, s.nodes, s.n);
  heads.eager = s.eager;
  tree(node, inside);
  tree(heads, across);
  return !inside.empty() && !across.empty();
}

// Calls back to back: where the flat broadcast is the binomial tree, its stream. Where it splits,
// a head runs its part of the broadcast across nodes and then its node's broadcast (as its
// root) one after the other, so its period is the two added; the other ranks of a node take
// part in the second only.
static void hierarchical_broadcast_stream(const Shape& s, std::vector<Cost>& busiest) {
  const double tree_bytes = static_cast<double>(kFlatBroadcastTreeBytes);
  if (!splits(s)) {
    if (s.n <= tree_bytes || s.p <= 3) all_flat_stream(s, binomial_broadcast_stream, busiest);
    return;
  }
  if (s.n > tree_bytes && s.nodes > 3) return;
  if (!one_message(s)) {
    // Several segments (from the eager size on): each phase's levels overlap within a call
    // already, but a head runs its part across nodes (its receive, its sends to its child heads
    // one after the other) and then its sends to its node's children (the segments in flight
    // side by side over the loopback), and starts the next call after both: its period. The
    // ranks below a head run the node's broadcast only.
    Shape heads = flat_shape(s, s.nodes, s.n);
    heads.eager = s.eager;
    Cost node_sends;
    node_sends.messages = 1;
    node_sends.bytes = s.n / streams(s, s.n);
    busiest.push_back(add(binomial_broadcast_period(heads, 0, 0), node_sends));
    for (double d = 1; d < heads.p; d *= 2)
      busiest.push_back(add(binomial_broadcast_period(heads, d, d), node_sends));
    return;
  }
  std::vector<Cost> inside;
  std::vector<Cost> across;
  if (!phase_streams(s, binomial_broadcast_stream, inside, across)) return;
  busiest = inside;
  // Below the eager size the head's sends inside its node do not hold it (their bytes are a
  // candidate of their own, in `inside`).
  const Cost head_inside = s.n >= s.eager ? inside.front() : Cost{};
  for (const Cost& c : across)
    busiest.push_back(add(across_nodes(c), head_inside));
}
const Entry broadcast_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_broadcast(s, s.p, s.n));
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      Cost inside;
      inside.messages = lg;
      inside.bytes = s.n / streams(s, s.n) + node_broadcast_fill(s, lg);
      return add(across_nodes(flat_broadcast(s, s.nodes, s.n)), inside);
    },
    "Node-aware: a broadcast across nodes from the root to one rank on every other node (its "
    "leader; binomial tree up to 256 KiB or 3 nodes, scatter + allgather above), then a broadcast "
    "inside each node from that rank (the root on its own node): through the node's arena where "
    "it has one, else a binomial tree. The buffer crosses into each node once. Any layout, uniform "
    "or not; on one node or with one rank per node the flat broadcast (the same choice on all "
    "ranks).",
    true, hierarchical_broadcast_stream};
// Calls back to back: where the flat reduce is the binomial tree, its stream (above). Where the
// reduce splits, a head runs the two phases one after the other: its node's binomial reduce
// (as its root) and then its part of the binomial reduce across nodes, so its period is the
// two added; the other ranks of a node only take part in the first.
static void hierarchical_reduce_stream(const Shape& s, std::vector<Cost>& busiest) {
  if (s.n > static_cast<double>(kFlatReduceTreeBytes)) return;
  if (!splits(s)) {
    all_flat_stream(s, binomial_reduce_stream, busiest);
    return;
  }
  std::vector<Cost> inside;
  std::vector<Cost> across;
  if (!phase_streams(s, binomial_reduce_stream, inside, across)) return;
  busiest = inside;
  for (const Cost& c : across)
    busiest.push_back(add(inside.front(), across_nodes(c)));
}
const Entry reduce_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_reduce(s, s.p, s.n, false));
      const double lg = log2_ceil(static_cast<int>(s.per_node));
      Cost inside;
      inside.messages = lg;
      inside.bytes = lg * s.n / streams(s, s.n);
      inside.reduced = lg * s.n;
      return add(inside, across_nodes(flat_reduce(s, s.nodes, s.n, true)));
    },
    "Node-aware: a reduce inside each node to one rank of it (the root on the root's node, "
    "whatever its local rank; the leader elsewhere; through the node's arena where it has one, "
    "else a binomial tree), partial sums only (avg not divided), then a reduce of the nodes' sums "
    "across nodes to the root (binomial tree up to 64 KiB, Rabenseifner above), which completes "
    "and divides once. Any layout; on one node or with one rank per node the flat reduce (binomial "
    "tree up to 64 KiB, Rabenseifner above).",
    true, hierarchical_reduce_stream};
const Entry allgather_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return all_flat(s, flat_allgather(s, s.p, s.n));
      const double k = s.per_node;
      Cost inside;
      inside.messages = k - 1;
      inside.bytes = (k - 1) / k * s.n / streams(s, s.n / k);
      inside.copied = s.n;
      return add(k_abreast(across_nodes(flat_allgather(s, s.nodes, s.n / k)), k), inside);
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
      if (s.nodes >= kManyNodes) {
        // Not a power of two: the butterfly. Else in node segments (pipelined_segments): the
        // node's reduce-scatters one after the other (the butterfly's log2 k steps where a
        // block is one segment or less), beside the halving across nodes of the node segments
        // before, whose last one's log2 N exchanges are the tail.
        if (!std::has_single_bit(static_cast<unsigned>(s.nodes))) {
          return reduce_scatter_butterfly.cost(s);
        }
        const double piece = std::max(1.0, s.segment / kManyNodesPieceDivisor * k);
        const double segments = std::min(std::floor(s.n / piece), double{kMostNodeSegments});
        if (segments > 1) {
          const double node_segment = s.n / segments;
          const bool halving = halving_inside(s, node_segment);
          const double phase = node_phase_bytes(s, node_segment, k, halving);
          Cost c;
          c.messages = segments * (halving ? std::log2(k) : k - 1);
          c.bytes = phase;
          c.beside_bytes = segments * phase;
          c.reduced = share + s.n / k;
          c.copied = s.n;
          c.inter_messages = std::log2(s.nodes);
          c.inter_bytes = k * (s.nodes - 1) / s.nodes * s.n / k;
          return c;
        }
      }
      Cost inside;
      inside.messages = k - 1;
      inside.bytes = share / streams(s, s.n / k);
      inside.reduced = share;
      inside.copied = s.n;
      return add(inside, k_abreast(across_nodes(flat_reduce_scatter(s, s.nodes, s.n / k)), k));
    },
    "Node-aware, the multi-leader form: with k ranks on every node, every rank copies its input "
    "into a buffer laid out local rank first (n; a.recv may then alias the input), a "
    "reduce-scatter inside each node (through the node's arena where it has one, else a ring) "
    "leaves region i (the blocks of the ranks of local rank i) summed over the node on local rank "
    "i ((k-1)/k n bytes, avg not divided), and those ranks reduce-scatter their region across "
    "nodes (recursive halving up to 64 KiB, the ring above; n/k bytes per rank, side by side), "
    "each keeping its own block, completed and divided once. On 8, 16, ... nodes (kManyNodes, a "
    "power of two) pipelined: every block is cut into up to 8 pieces (each carrier's piece of a "
    "node segment at least a 16th of a segment), node segment c is piece c of every block, and "
    "its halving across nodes (log2 N exchanges, far nodes first) is in flight while the node "
    "reduce-scatters node segment c + 1 (the butterfly inside a node of 2^j ranks where a block "
    "is one segment or less); on 8 or more nodes that are not a power of two the butterfly. "
    "Fallbacks: one node, one rank per node, or nodes holding different numbers of ranks: the "
    "flat reduce-scatter (recursive halving up to 64 KiB, the ring above).",
    true};

// ---- gather, scatter ----
static Cost rooted_tree(const Shape& s) {
  // The root's link carries the blocks of every subtree it exchanges with, one after another.
  Steps t{s};
  for (double d = s.core; d >= 1; d /= 2) {
    if (d < s.p) t.tree_step(d, std::min(d, s.p - d) / s.p * s.n);
  }
  return t.c;
}
static Cost rooted_linear(const Shape& s) {
  return root_to_all(s, s.n / s.p);
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
    "arena; the root copies the slots out into its buffer, rank by rank. No bytes on a wire. "
    "Where the largest block has 32 KiB or more at two ranks, 64 KiB or more from three ranks "
    "on (any size with `COLLX_SHM_DIRECT=1`), the blocks go as pointers instead: the root "
    "publishes its buffer's address and every other rank writes its block straight into it "
    "(process_vm_writev) while the root copies its own: one copy of each block, all at once."};
const Entry scatter_shared_memory{
    rooted_shared_memory,
    "One node only: the root copies every other rank's block slot by slot into its ring in a "
    "shared arena, in rank order from root + 1; each rank copies its own slots out. Where the "
    "largest block has 32 KiB or more at two ranks, 64 KiB or more from three ranks on (any "
    "size with `COLLX_SHM_DIRECT=1`), the blocks go as pointers instead: the root publishes its "
    "buffer's address and every other rank reads its block straight from it (process_vm_readv) "
    "while the root copies its own."};

// ---- alltoall ----
const Entry alltoall_pairwise{[](const Shape& s) {
                                // p-1 steps of a block to the rank s on, kPipelineDepth steps
                                // in flight: their latencies overlap, the bytes of the ranks of
                                // a node that cross at once share its link.
                                const double rounds =
                                    std::ceil((s.p - 1) / static_cast<double>(kPipelineDepth));
                                const double block = s.n / s.p;
                                if (s.nodes <= 1) return Cost{rounds, (s.p - 1) * block, 0, 0};
                                // Step d sends to the rank d on: d ranks of a node cross,
                                // all k of them from d = k on, and p - d where the shift wraps
                                // round into the node again (as Steps::shift_step).
                                Cost c;
                                for (double d = 1; d < s.p; ++d) {
                                  const double crossing = std::min({d, s.p - d, s.per_node});
                                  c.inter_bytes += crossing * block;
                                }
                                c.inter_messages = rounds;
                                return c;
                              },
                              "p-1 steps; in step s send to rank+s and receive from rank-s "
                              "(several steps in flight), the own block copied while the first "
                              "step's messages move."};
const Entry alltoall_bruck{
    [](const Shape& s) {
      // Step j: the blocks whose index has bit j set (about half) to the rank 2^j on, packed.
      Steps t{s};
      for (double d = 1; d < s.p; d *= 2)
        t.shift_step(d, s.n / 2);
      t.c.copied += s.lg * s.n + 2 * s.n;
      return t.c;
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
    [](const Shape&) {
      return Cost{1e12, 0, 0, 0};
    },
    "The MPI library's own collective on the communicator (MPI_Allreduce, ...; its nonblocking "
    "form for a nonblocking call): whatever algorithm the MPI library chooses. Not modelled: "
    "auto's trials measure it beside collx's algorithms, and it runs where it is faster."};

const Entry barrier_dissemination{
    [](const Shape& s) {
      Steps t{s};
      for (double d = 1; d < s.p; d *= 2)
        t.shift_step(d, 0);
      return t.c;
    },
    "Dissemination: ceil(log2 p) rounds of one-byte tokens to rank + 2^k."};
const Entry barrier_hierarchical{
    [](const Shape& s) {
      if (!splits(s)) return barrier_dissemination.cost(s);
      Cost inside;
      inside.messages =
          2 * patterns::knomial_levels(static_cast<int>(s.per_node), patterns::kNodeBarrierRadix);
      return add(across_nodes(barrier_dissemination.cost(flat_shape(s, s.nodes, 0))), inside);
    },
    "Node-aware: a k-nomial tree of radix 8 inside each node gathers a token to its leader, the "
    "leaders run "
    "the dissemination barrier (ceil(log2 nodes) rounds, one message a node), and the node's tree "
    "releases its ranks. On one node or with one rank per node, dissemination.",
    true};
const Entry sendrecv_direct{[](const Shape& s) {
                              return Cost{1, s.n, 0, 0};
                            },
                            "One message each way."};

// ---- how the ranks start the calls timed ----
namespace {
// Ranks in blocks of `per_node` on the machine's nodes: a message's latency and its seconds per
// byte between ranks a and b.
struct Placement {
  const Machine& m;
  int per_node = 1;
  bool same_node(int a, int b) const { return m.nodes <= 1 || a / per_node == b / per_node; }
  double latency(int a, int b) const {
    if (same_node(a, b)) return m.alpha;
    const int switch_nodes = m.switch_nodes;
    if (switch_nodes > 0 && a / per_node / switch_nodes == b / per_node / switch_nodes)
      return m.alpha_switch;
    return m.alpha_inter;
  }
  double per_byte(int a, int b) const { return same_node(a, b) ? m.beta : m.beta_inter; }
};
Placement placement_of(int p, const Machine& m) {
  const int nodes = std::clamp(m.nodes, 1, std::max(p, 1));
  return {m, (p + nodes - 1) / nodes};
}
// When the binomial reduce's data is in at `rank` (its children rank + 1, 2, 4, ... below
// `parent`, its parent's distance; any at the root, `parent` 0), each rank starting at `start`
// and posting the receives from all its children then: a child's message moves from when both
// it is sent and its receive is posted, and takes its latency, its bytes and their combine.
double binomial_reduce_in(const Placement& at, int p, double bytes,
                          const std::vector<double>& start, int rank, int parent) {
  double in = start[rank];
  for (int d = 1; (parent == 0 || d < parent) && rank + d < p; d *= 2) {
    const int child = rank + d;
    const double sent = binomial_reduce_in(at, p, bytes, start, child, d);
    const double moves = std::max(start[rank], sent);
    in = std::max(in, moves + at.latency(child, rank) + bytes * at.per_byte(child, rank) +
                          bytes * at.m.gamma);
  }
  return in;
}
}  // namespace

std::vector<double> dissemination_exits(int p, const Machine& m) {
  std::vector<double> round(static_cast<std::size_t>(std::max(p, 0)), 0.0);
  if (p <= 1) return round;
  const Placement at = placement_of(p, m);
  std::vector<double> next(round.size());
  for (int d = 1; d < p; d *= 2) {
    for (int r = 0; r < p; ++r) {
      const int from = (r - d + p) % p;
      next[r] = std::max(round[r], round[from]) + at.latency(from, r);
    }
    round.swap(next);
  }
  return round;
}

double start_delay(Collective c, Algorithm a, int p, double bytes, const Machine& m) {
  if (m.start == Start::together || p <= 1 || !implements(c, a)) return 0;
  const std::vector<double> exits = dissemination_exits(p, m);
  const auto [first, last] = std::minmax_element(exits.begin(), exits.end());
  const double calls = std::max(1, m.calls);
  if (c == Collective::reduce) {
    // The binomial trees: the flat one, and the node-aware one's where it runs them (its
    // node's tree and the leaders' tree are the flat tree's levels inside and across nodes).
    const bool tree =
        a == Algorithm::binomial_tree ||
        (a == Algorithm::hierarchical && bytes <= static_cast<double>(kFlatReduceTreeBytes));
    if (!tree) return 0;
    const Placement at = placement_of(p, m);
    const std::vector<double> together(exits.size(), 0.0);
    const double common = binomial_reduce_in(at, p, bytes, together, 0, 0);
    const double staggered = binomial_reduce_in(at, p, bytes, exits, 0, 0) - exits[0];
    return -(common - staggered) / calls;
  }
  // Data that flows to the root only (gather): its root starts last, as the reduce's; its tree
  // is not modelled here.
  if (c == Collective::gather) return 0;
  return (*last - *first) / calls;
}

Algorithm best(Collective c, int p, double bytes, const Machine& m) {
  Algorithm winner = Algorithm::automatic;
  double fastest = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithms_of(c)) {
    if (runs_through_arena(c, a) && !m.one_node) continue;
    auto k = seconds(c, a, p, bytes, m);
    if (k) *k += start_delay(c, a, p, bytes, m);
    // A tie across nodes, several ranks on each, goes to the node-aware algorithm: a flat
    // schedule matches it only with the ranks placed in blocks of nodes (the model's
    // assumption), the node-aware one on any placement. (With one rank per node it runs the
    // flat one.)
    if (k && (*k < fastest ||
              (m.nodes > 1 && p > m.nodes && node_aware(c, a) && *k <= fastest * (1 + 1e-9)))) {
      fastest = *k;
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
