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
Cost fold(int p, double bytes, bool reduces) {
  if (floor_pow2(p) == p) return {};
  return {2, 2 * bytes, reduces ? bytes : 0, 0};
}

Cost add(Cost a, const Cost& b) {
  a.messages += b.messages;
  a.bytes += b.bytes;
  a.reduced += b.reduced;
  a.copied += b.copied;
  return a;
}

// A pipeline of `stages` hops moving `bytes` in segments: the first segment crosses every stage,
// the rest follow one per segment time.
Cost pipeline(double stages, double bytes, double segment, double per_byte_reduced) {
  const double segments = std::max(1.0, std::ceil(bytes / segment));
  const double seg = bytes / segments;
  const double steps = stages + segments - 1;
  return {steps, steps * seg, steps * seg * per_byte_reduced, 0};
}

// Through a shared segment, in pieces: the producer copies a piece in while the readers copy
// the previous one out, so a reader's path is one piece in plus every byte out, with a counter
// handshake per piece.
Cost shared_pipeline(double bytes, double segment) {
  const double pieces = std::max(1.0, std::ceil(bytes / segment));
  return {pieces, 0, 0, bytes + bytes / pieces};
}

}  // namespace

std::optional<Cost> cost(Collective c, Algorithm a, int p, double n, std::size_t segment_bytes) {
  if (!implements(c, a)) return std::nullopt;
  if (p <= 1) return Cost{};
  const double P = p;
  const double lg = log2_ceil(p);
  const double core = floor_pow2(p);
  const double lg_core = std::log2(core);
  const double seg = static_cast<double>(segment_bytes);
  switch (c) {
    case Collective::allreduce:
      switch (a) {
        case Algorithm::ring:
          return Cost{2 * (P - 1), 2 * (P - 1) / P * n, (P - 1) / P * n, 0};
        case Algorithm::recursive_doubling:
          return add({lg_core, lg_core * n, lg_core * n, 0}, fold(p, n, true));
        case Algorithm::rabenseifner:
          return add({2 * lg_core, 2 * (core - 1) / core * n, (core - 1) / core * n, 0},
                     fold(p, n, true));
        case Algorithm::binomial_tree:
          return Cost{2 * lg, 2 * lg * n, lg * n, 0};
        case Algorithm::double_binary_tree: {
          // Each half goes up and down a binary tree of height h, pipelined, the down stream
          // trailing the up stream: about 2h + (segments) segment steps. Per step an inner node
          // receives two segments (and reduces them) going up and sends two going down.
          const double height = std::max(1.0, std::ceil(std::log2(P + 1)) - 1);
          const double segments = std::max(1.0, std::ceil(n / 2 / seg));
          const double s = n / 2 / segments;
          const double steps = 2 * height + segments;
          return Cost{steps, steps * 2 * s, (height + segments) * 2 * s, 0};
        }
        default:
          break;
      }
      break;
    case Collective::broadcast:
      switch (a) {
        case Algorithm::binomial_tree:
          return Cost{lg, lg * n, 0, 0};
        case Algorithm::pipelined_chain:
          return pipeline(P - 1, n, seg, 0.0);
        case Algorithm::scatter_allgather:
          return Cost{lg + (P - 1), 2 * (P - 1) / P * n, 0, 0};
        case Algorithm::shared_memory:
          return shared_pipeline(n, seg);
        default:
          break;
      }
      break;
    case Collective::reduce:
      switch (a) {
        case Algorithm::binomial_tree:
          return Cost{lg, lg * n, lg * n, 0};
        case Algorithm::rabenseifner:
          return add({2 * lg_core, 2 * (core - 1) / core * n, (core - 1) / core * n, 0},
                     fold(p, n, true));
        case Algorithm::shared_memory: {
          // The others copy n in; the root reduces p-1 pieces into its output, a piece behind.
          const double pieces = std::max(1.0, std::ceil(n / seg));
          return Cost{pieces * (P - 1), 0, (P - 1) * n, n / pieces};
        }
        default:
          break;
      }
      break;
    case Collective::allgather:
      switch (a) {
        case Algorithm::ring:
          return Cost{P - 1, (P - 1) / P * n, 0, 0};
        case Algorithm::recursive_doubling:
          return add({lg_core, (core - 1) / core * n, 0, 0},
                     floor_pow2(p) == p ? Cost{} : Cost{2, n + n / P, 0, 0});
        case Algorithm::bruck:
          return Cost{lg, (P - 1) / P * n, 0, 2 * n};
        case Algorithm::shared_memory:
          // The own block in (n/p), every block out (n), pieces of the largest block.
          return add(shared_pipeline(n, seg), Cost{0, 0, 0, n / P});
        default:
          break;
      }
      break;
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_v:
      switch (a) {
        case Algorithm::ring:
          return Cost{P - 1, (P - 1) / P * n, (P - 1) / P * n, 0};
        case Algorithm::recursive_halving:
          return add({lg_core, (core - 1) / core * n, (core - 1) / core * n, n / P},
                     floor_pow2(p) == p ? Cost{} : Cost{2, n + n / P, n, 0});
        default:
          break;
      }
      break;
    case Collective::gather:
    case Collective::scatter:
      switch (a) {
        case Algorithm::binomial_tree:
          return Cost{lg, (P - 1) / P * n, 0, 0};
        case Algorithm::linear:
          return Cost{P - 1, (P - 1) / P * n, 0, 0};
        default:
          break;
      }
      break;
    case Collective::alltoall:
      switch (a) {
        case Algorithm::pairwise:
          return Cost{P - 1, (P - 1) / P * n, 0, 0};
        case Algorithm::bruck:
          return Cost{lg, lg * n / 2, 0, lg * n + 2 * n};
        default:
          break;
      }
      break;
    case Collective::barrier:
      return Cost{lg, 0, 0, 0};
    case Collective::sendrecv:
      return Cost{1, n, 0, 0};
  }
  return std::nullopt;
}

Algorithm best(Collective c, int p, double bytes, const Machine& m) {
  Algorithm winner = Algorithm::automatic;
  double fastest = std::numeric_limits<double>::infinity();
  for (Algorithm a : algorithms_of(c)) {
    if (a == Algorithm::shared_memory && !m.one_node) continue;
    const auto k = cost(c, a, p, bytes, m.segment_bytes);
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

std::string describe(Collective c, Algorithm a) {
  switch (c) {
    case Collective::allreduce:
      switch (a) {
        case Algorithm::ring:
          return "2(p-1) steps around the ring: p-1 reduce-scatter steps (receive a block "
                 "segment, reduce it with the local one, forward it), then p-1 allgather steps "
                 "forwarding the finished blocks. Each rank sends 2(p-1)/p n bytes and reduces "
                 "(p-1)/p n.";
        case Algorithm::recursive_doubling:
          return "log2 p' steps; in step k exchange the whole buffer with rank xor 2^k and "
                 "combine lower op upper. n bytes per step. Non-powers of two fold the extra "
                 "ranks in before (one message + reduction) and out after (one message).";
        case Algorithm::rabenseifner:
          return "Recursive-halving reduce-scatter (log2 p' steps, n/2, n/4, ... bytes), then "
                 "recursive-doubling allgather (log2 p' steps, back up to n/2). 2(p'-1)/p' n "
                 "bytes, (p'-1)/p' n reduced; fold for non-powers of two.";
        case Algorithm::binomial_tree:
          return "Binomial reduce to rank 0 (ceil(log2 p) levels of n bytes each), then a "
                 "binomial broadcast back down.";
        case Algorithm::double_binary_tree:
          return "Each half of the buffer is reduced up a binary tree and broadcast back down "
                 "it, segment by segment; the second tree numbers the ranks backwards so its "
                 "leaves are the first tree's inner nodes. Latency ~ 2 log2 p, bandwidth ~ n per "
                 "rank once the pipeline is full.";
        default:
          break;
      }
      break;
    case Collective::broadcast:
      switch (a) {
        case Algorithm::binomial_tree:
          return "ceil(log2 p) levels, the whole buffer per level, forwarded segment by segment.";
        case Algorithm::pipelined_chain:
          return "p-1 hops in a chain, segments pipelined: (p - 2 + n/s) segment times.";
        case Algorithm::scatter_allgather:
          return "Binomial scatter of p blocks (ceil(log2 p) messages, (p-1)/p n bytes), then a "
                 "ring allgather (p-1 steps, (p-1)/p n bytes).";
        case Algorithm::shared_memory:
          return "One node only: the root copies the buffer piece by piece into a ring in a "
                 "segment every rank maps; all p-1 readers copy each piece out at once, behind "
                 "a counter. No bytes on a wire; n copied in, n out per reader.";
        default:
          break;
      }
      break;
    case Collective::reduce:
      switch (a) {
        case Algorithm::binomial_tree:
          return "ceil(log2 p) levels; each inner rank receives and reduces its children's "
                 "buffers (segmented) and sends the sum up.";
        case Algorithm::rabenseifner:
          return "Recursive-halving reduce-scatter, then a binomial gather of the blocks to the "
                 "root: 2(p-1)/p n bytes instead of n log p.";
        case Algorithm::shared_memory:
          return "One node only: every other rank copies its buffer piece by piece into its ring "
                 "in a shared segment; the root reduces piece k of all p ranks straight into "
                 "its output as they arrive (p-1 passes over a cached piece).";
        default:
          break;
      }
      break;
    case Collective::allgather:
      switch (a) {
        case Algorithm::ring:
          return "p-1 steps, one block each, received straight into the output and forwarded.";
        case Algorithm::recursive_doubling:
          return "log2 p' steps exchanging doubling windows of blocks; fold for non-powers of two.";
        case Algorithm::bruck:
          return "ceil(log2 p) steps on a rotated copy (any p); one copy in and one out.";
        case Algorithm::shared_memory:
          return "One node only: every rank copies its block piece by piece into its ring in a "
                 "shared segment and copies the other p-1 blocks out of theirs, all ranks at "
                 "once: n/p in, n out per rank, no bytes on a wire. While plain stores into the "
                 "rings are slow (a state of some machines, measured at run time) a rank may "
                 "publish a pointer instead, and the others copy its block straight from its "
                 "buffer (process_vm_readv).";
        default:
          break;
      }
      break;
    case Collective::reduce_scatter:
    case Collective::reduce_scatter_v:
      switch (a) {
        case Algorithm::ring:
          return "p-1 steps: receive a block segment, reduce with the local one, forward; the "
                 "last step leaves the rank's own block.";
        case Algorithm::recursive_halving:
          return "log2 p' halving steps over the core ranks' shares; fold for non-powers of two.";
        default:
          break;
      }
      break;
    case Collective::gather:
    case Collective::scatter:
      return a == Algorithm::binomial_tree
                 ? "Binomial tree over contiguous windows of ranks: ceil(log2 p) messages at the "
                   "root, (p-1)/p n bytes."
                 : "Every rank exchanges its block with the root directly: p-1 messages at the "
                   "root.";
    case Collective::alltoall:
      return a == Algorithm::pairwise
                 ? "p-1 steps; in step s send to rank+s and receive from rank-s."
                 : "Bruck: ceil(log2 p) steps, each moving about half the blocks (packed).";
    case Collective::barrier:
      return "Dissemination: ceil(log2 p) rounds of one-byte tokens to rank + 2^k.";
    case Collective::sendrecv:
      return "One message each way.";
  }
  return "";
}

}  // namespace collx::model
