// DeviceCall: one collective call on device memory, as the executor and the reductions see it.
//
// An Operation whose buffers are device memory holds one. Every pointer the call's algorithm
// hands to the transport, to a copy or to a reduction is then device memory: its buffers, and its
// scratch (which scratch() allocates on the device). The algorithms stay as they are, written
// for memory they may only touch through these verbs; the call decides how the bytes move:
//   direct  the transport takes device memory (a CUDA-aware MPI, UCX built with CUDA);
//   staged  through pinned host memory, copies and reductions on their own streams.
// Either way, nothing waits for the whole device: each step waits only for the earlier device
// work that touched the same bytes, through events (see device_engine.hpp).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "collx/types.hpp"
#include "scratch.hpp"
#include "transport.hpp"

namespace collx::detail {

class DeviceCall {
 public:
  virtual ~DeviceCall() = default;

  // The transport verbs, for device memory. `t` is then owned by the call until test_all or
  // wait_all has seen it done. A receive with exact_length == false (point-to-point) may get a
  // shorter message; the bytes after it keep their contents.
  virtual void send(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual void recv(Transfer& t, void* buf, std::size_t bytes, int peer, int tag,
                    bool exact_length) = 0;
  // As Transport::test_all / wait_all; transfers of host memory (posted on the call's transport
  // directly) may be among them.
  virtual bool test_all(std::span<Transfer* const> ts) = 0;
  virtual void wait_all(std::span<Transfer* const> ts) = 0;

  // Device memory for the algorithm's temporaries.
  virtual ScratchBuffer scratch(std::size_t bytes) = 0;
  // dst <- src (the regions may overlap), ordered after the device work that wrote src or
  // touches dst.
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // dst = a op b over n elements, then / divisor when divisor > 0.
  virtual void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                      ReduceOp op, double divisor) = 0;

  // After the algorithm has finished: true once the call's results are complete (or, in the
  // stream-ordered form, ordered before the stream's later work). A blocking call waits here.
  virtual bool finish() = 0;
  // "direct" or "staged" (COLLX_DEBUG).
  virtual std::string_view mode() const = 0;
};

}  // namespace collx::detail
