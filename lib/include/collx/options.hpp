// Per-call options of a collective.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collx/algorithm.hpp"

namespace collx {

// Where a call's buffers live.
enum class MemoryKind : std::uint8_t {
  automatic,  // detected once per call: in a CUDA build CUDA is asked about each buffer
  host,       // host memory (pageable or pinned); nothing is queried
  device,     // CUDA device memory of the current device (cudaMalloc, or managed memory)
};

struct Options {
  // Algorithm::automatic lets COLLX_ALGO, then the tuning table, decide.
  Algorithm algorithm = Algorithm::automatic;
  // Segment size for pipelined algorithms; 0 takes COLLX_SEGMENT_BYTES or the tuned default.
  std::size_t segment_bytes = 0;
  // Segments in flight for pipelined algorithms; 0 takes COLLX_PIPELINE_DEPTH or the default.
  int pipeline_depth = 0;
  // Where the buffers live. Every buffer of one call is in the same kind of memory (a call that
  // mixes host and device buffers is rejected); ranks may differ. Device memory needs a build
  // with CUDA.
  MemoryKind memory = MemoryKind::automatic;
  // Stream-ordered form, for device memory: a cudaStream_t (cudaStreamLegacy or cudaStreamPerThread
  // for the default streams; nullptr: not stream-ordered). The collective reads its inputs after
  // the work enqueued on `stream` before the call; work enqueued on `stream` after a blocking call
  // runs after the result is complete (the host does not wait). A nonblocking call never holds
  // `stream`: its request completes once the result is complete on the device. Without a stream,
  // the inputs are read after the work enqueued so far on the legacy default stream (and the
  // blocking streams it waits for), and the results are complete when the call returns (blocking)
  // or its request completes.
  void* stream = nullptr;
};

// Marker for in-place collectives: comm.allreduce(collx::in_place, buf, ...).
struct InPlace {
  explicit constexpr InPlace() = default;
};
inline constexpr InPlace in_place{};

// The transport a communicator moves its bytes with.
enum class TransportChoice : std::uint8_t {
  automatic,  // COLLX_TRANSPORT (default mpi)
  mpi,        // MPI point-to-point on the communicator's duplicate
  ucx,        // UCX UCP tag messages (a build with UCX)
};

}  // namespace collx
