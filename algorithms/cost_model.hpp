// The alpha-beta-gamma cost model of every algorithm: what a collective costs in message
// latencies (alpha), bytes on the wire (beta) and bytes reduced (gamma), for any rank count and
// size. Pure arithmetic, the same structure as the algorithms' patterns (steps, fold, segments),
// so predictions can be made for machines and rank counts we do not have.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx::model {

struct Machine {
  double alpha = 1e-6;   // seconds per message (latency + software overhead)
  double beta = 1e-10;   // seconds per byte moved between two ranks (1 / link bandwidth)
  double gamma = 1e-10;  // seconds per byte reduced (one input byte of a two-input reduction)
  double copy = 5e-11;   // seconds per byte copied locally (pack / unpack / rotate)
  std::size_t segment_bytes = 256 << 10;  // pipelined algorithms' segment size
  // Every rank on one node: the shared_memory algorithms are candidates (their cost is copies
  // and counter handshakes, `alpha` each, no bytes on a wire). Off for network predictions.
  bool one_node = false;
};

// What one rank does on the critical path: messages, bytes sent, bytes reduced, bytes copied.
struct Cost {
  double messages = 0;
  double bytes = 0;
  double reduced = 0;
  double copied = 0;
  double seconds(const Machine& m) const {
    return messages * m.alpha + bytes * m.beta + reduced * m.gamma + copied * m.copy;
  }
};

// Cost of `algorithm` for `collective` on p ranks; `bytes` is the size as collx-bench counts it
// (the whole buffer; for gathering collectives the whole gathered buffer). nullopt if the
// collective has no such algorithm.
std::optional<Cost> cost(Collective collective, Algorithm algorithm, int p, double bytes,
                         std::size_t segment_bytes);

// The cheapest algorithm for the call on `machine`.
Algorithm best(Collective collective, int p, double bytes, const Machine& machine);

// The sizes (powers of two from 8 B to `max_bytes`) at which the best algorithm changes, with the
// new best: the crossover points.
struct Crossover {
  double bytes;
  Algorithm algorithm;
};
std::vector<Crossover> crossovers(Collective collective, int p, const Machine& machine,
                                  double max_bytes);

// A text description of the algorithm as steps and bytes (docs/ALGORITHMS.md is built from it).
std::string describe(Collective collective, Algorithm algorithm);

}  // namespace collx::model
