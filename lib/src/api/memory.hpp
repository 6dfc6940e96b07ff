// The memory kind of one collective call: given by the caller (Options::memory) or detected
// once from its buffers, never per segment; for device memory, the DeviceCall the call runs
// with.
#pragma once

#include <atomic>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "collx/algorithm.hpp"
#include "collx/options.hpp"
#include "device_api.hpp"
#include "device_call.hpp"

namespace collx::detail {

struct CommState;

// One buffer argument of a call.
struct BufferArg {
  const void* pointer = nullptr;
  std::size_t bytes = 0;
  const char* name = "";
};

// ---- the decision, a pure function (unit-tested without a device) ----
struct DetectedBuffer {
  const char* name = "";
  std::size_t bytes = 0;
  bool device = false;
  int device_id = -1;
};
struct MemoryDecision {
  bool device = false;
  int device_id = -1;  // -1: the current device
  std::string error;   // non-empty: the call is rejected with this (invalid_argument)
};
// `buffers` are the call's non-empty buffers as detected (as given, for MemoryKind::device).
// Host unless every buffer is device memory (of one device); a mix is an error, as is a stream
// given for host buffers. A call with no bytes to move runs on the host.
MemoryDecision decide_memory(MemoryKind requested, bool stream_given,
                             std::span<const DetectedBuffer> buffers);

// ---- per call ----
struct CallMemory {
  std::unique_ptr<DeviceCall> device;  // null: host memory
  bool on_device() const { return device != nullptr; }
  DeviceCall* reducer() const { return device.get(); }
};

// Resolves the call's memory: nothing is queried for MemoryKind::host, and in a build without
// device support everything is host memory. Throws collx::Error (before anything is sent): a
// mixed call, device memory requested where there is no device or no CUDA support.
// `p2p`: the call runs on the point-to-point transport.
CallMemory resolve_call_memory(CommState& state, Collective collective, const Options& options,
                               std::initializer_list<BufferArg> buffers, bool blocking, bool p2p);

// The per-call entry: host-only processes decide without leaving the caller (this is on the
// path of every small collective).
inline CallMemory call_memory(CommState& state, Collective collective, const Options& options,
                              std::initializer_list<BufferArg> buffers, bool blocking,
                              bool p2p = false) {
  if (options.stream == nullptr && (options.memory == MemoryKind::host ||
                                    (options.memory == MemoryKind::automatic &&
                                     process_is_host_only.load(std::memory_order_relaxed)))) {
    return {};
  }
  return resolve_call_memory(state, collective, options, buffers, blocking, p2p);
}

}  // namespace collx::detail
