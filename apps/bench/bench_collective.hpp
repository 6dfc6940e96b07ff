// One collective as collx-bench measures it: buffers for a size, a collx run per algorithm,
// the MPI library's own call, the memcpy reference, the exact check, and nccl-tests' bus
// bandwidth factor. One implementation, made from each collective's descriptor
// (collectives_bench.cpp).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "collx/collx.hpp"

namespace collx::bench {

struct Params {
  DataType type = DataType::float32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
  std::size_t segment_bytes = 0;  // 0: the library's choice
  int pipeline_depth = 0;         // 0: the library's choice
  bool memcpy_row = false;        // a buffer for the memcpy row's copy
  // --cold: this many bytes (twice the last-level cache) at least in the pool of buffer sets,
  // one set per call in turn; 0: one set, used by every call.
  std::size_t cold_pool_bytes = 0;
};

class CollectiveBench {
 public:
  virtual ~CollectiveBench() = default;
  virtual Collective collective() const = 0;
  // nccl-tests' busbw = algbw * factor.
  virtual double bus_factor(int nranks) const = 0;
  // Whether the collective reduces (prints redop) and is rooted (prints root).
  virtual bool reduces() const = 0;
  virtual bool rooted() const = 0;
  // The count the collective is called with for a row of `bytes` bytes (per rank for the
  // gathering collectives, as nccl-tests), and the bytes such a call moves in nccl-tests' sense
  // (the size column: the whole gathered or scattered buffer).
  virtual std::size_t count_for(std::size_t bytes, std::size_t element_size, int nranks) const = 0;
  virtual std::size_t bytes_for(std::size_t count, int nranks) const = 0;

  // Allocates and fills the buffers for `count` elements (touched, so no page faults later);
  // with params.cold_pool_bytes, that many bytes of buffer sets with the same contents.
  virtual void prepare(const Params& params, std::size_t count) = 0;
  // --cold: the next set of buffers for the next call (every call, checks included, calls it
  // first; a no-op with one set). The number of sets and the bytes they take on this rank.
  virtual void next_buffers() = 0;
  virtual std::size_t buffer_sets() const = 0;
  virtual std::size_t pool_bytes() const = 0;
  // The memcpy reference row: one local copy, with plain memcpy (cudaMemcpy on the device with
  // -m device), of the bytes the collective leaves in its result buffer on a rank (the root's
  // for gather), from that buffer into one of its own. What the memory system allows for
  // touching the result once: no collective that writes its result can take less.
  virtual void run_memcpy() = 0;
  // Runs the copy once and returns the bytes that differ from the source (0).
  virtual std::size_t check_memcpy() = 0;
  virtual std::size_t memcpy_bytes() const = 0;
  // One call of collx's collective with `algorithm` (Algorithm::automatic for auto).
  virtual void run(Algorithm algorithm) = 0;
  // One call of the MPI library's own collective on the same buffers.
  virtual void run_mpi() = 0;
  // Refreshes the inputs, runs once (collx with `algorithm`, or MPI when `mpi`) and returns the
  // number of wrong result elements on this rank.
  virtual std::size_t check(bool mpi, Algorithm algorithm) = 0;

  // Nonblocking forms, for --overlap (how much of the call hides behind computation).
  virtual bool supports_overlap() const { return false; }
  virtual Request start(Algorithm) { return {}; }
  virtual void start_mpi(MPI_Request* request) { *request = MPI_REQUEST_NULL; }
};

std::unique_ptr<CollectiveBench> make_bench(Collective collective, Communicator& comm);

}  // namespace collx::bench
