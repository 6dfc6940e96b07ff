// Per-call options of a collective.
#pragma once

#include <cstddef>

#include "collx/algorithm.hpp"

namespace collx {

struct Options {
  // Algorithm::automatic lets COLLX_ALGO, then the tuning table, decide.
  Algorithm algorithm = Algorithm::automatic;
  // Segment size for pipelined algorithms; 0 takes COLLX_CHUNK_BYTES or the tuned default.
  std::size_t chunk_bytes = 0;
  // Segments in flight for pipelined algorithms; 0 takes COLLX_PIPELINE_DEPTH or the default.
  int pipeline_depth = 0;
};

// Marker for in-place collectives: comm.allreduce(collx::in_place, buf, ...).
struct InPlace {
  explicit constexpr InPlace() = default;
};
inline constexpr InPlace in_place{};

}  // namespace collx
