// The memory kind of one collective call: given (Options::memory) or detected once from its
// buffers; for device memory, the DeviceCall the call runs with.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"
#include "collx/options.hpp"
#include "data_path.hpp"
#include "device_api.hpp"
#include "device_call.hpp"
#include "task.hpp"
#include "wait_condition.hpp"

namespace collx::detail {

struct CommState;
class Operation;

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

// ---- whole-call staging ----
// A device call that runs its algorithm on host copies of its buffers: inputs are copied to
// pinned host memory, the algorithm runs as on host memory, and finish() copies the outputs back.
// Every rank runs the algorithm chosen for host memory: a device call takes this form where it
// needs host memory (arena and node-aware rows), so ranks whose buffers differ in kind still run
// one algorithm, and where it is cheaper (small blocking calls). See needs_host_copy. As a
// WaitCondition: the copies of the inputs have landed (what a nonblocking call's task waits for).
class StagedCall final : public HostVerbs, public WaitCondition {
 public:
  StagedCall(Transport& transport, std::unique_ptr<DeviceCall> device)
      : HostVerbs(transport), device_(std::move(device)) {}
  // The host copy of `device` (bytes > 0), downloaded when `input`, uploaded by finish() when
  // `output` (its first `output_bytes`). One copy per device pointer.
  std::byte* copy_of(const void* device, std::size_t bytes, bool input, std::size_t output_bytes);
  // Waits until the inputs' copies have landed (a blocking call); a nonblocking call's task
  // waits for this condition instead, so that the call returns at once.
  void inputs_ready() { device_->wait_downloads(); }

  bool finish() override;
  std::string_view mode() const override { return "host copy"; }
  bool met() const override { return device_->downloads_done(); }
  std::string describe(std::span<const int>) const override {
    return "the copies of this call's device buffers into host memory";
  }

 private:
  struct Copy {
    const void* device;
    std::byte* host;
    std::size_t output_bytes;
  };
  std::unique_ptr<DeviceCall> device_;
  std::vector<Copy> copies_;
  bool uploaded_ = false;
};

// A nonblocking call's task on host copies: `body` once the inputs have landed.
Task after_inputs_landed(Operation& op, const StagedCall& staged, Task body);

// Whether a device call with `algorithm` runs on host copies of its buffers: where the algorithm
// needs host memory (`arena`: CommState::arena_for), and for blocking calls up to
// COLLX_DEVICE_HOST_COPY_BYTES (staged anyway), or the smaller of that and kDirectHostCopyBytes
// where the transport takes device memory.
inline constexpr std::size_t kDirectHostCopyBytes = std::size_t{32} << 10;
bool needs_host_copy(Collective collective, Algorithm algorithm, bool arena, std::size_t bytes,
                     bool blocking, const DeviceCall& call);

// ---- per call ----
// Resolves the call's memory (host without a query for MemoryKind::host, or in a build without
// device support): the DeviceCall it runs with, null for host memory. Throws collx::Error before
// anything is sent: a mixed call, device memory without a device or CUDA support. `p2p`: the
// call runs on the point-to-point transport.
std::unique_ptr<DeviceCall> resolve_call_memory(CommState& state, Collective collective,
                                                const Options& options,
                                                std::initializer_list<BufferArg> buffers,
                                                bool blocking, bool p2p);

// Whether a call's buffers are host memory without looking at them: Options::memory says so, or
// this process sees no device.
[[gnu::always_inline]] inline bool surely_host_memory(const Options& options) {
  return options.memory == MemoryKind::host ||
         (options.memory == MemoryKind::automatic &&
          process_is_host_only.load(std::memory_order_relaxed));
}

// The per-call entry: host-only processes decide inline (every small collective passes here).
inline std::unique_ptr<DeviceCall> call_memory(CommState& state, Collective collective,
                                               const Options& options,
                                               std::initializer_list<BufferArg> buffers,
                                               bool blocking, bool p2p = false) {
  if (options.stream == nullptr && surely_host_memory(options)) return {};
  return resolve_call_memory(state, collective, options, buffers, blocking, p2p);
}

}  // namespace collx::detail
