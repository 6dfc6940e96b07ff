#include "memory.hpp"

#include <algorithm>

#include "collx/error.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "device_api.hpp"
#include "device_engine.hpp"
#include "operation.hpp"
#include "registry.hpp"

namespace collx::detail {

MemoryDecision decide_memory(MemoryKind requested, bool stream_given,
                             std::span<const DetectedBuffer> buffers) {
  MemoryDecision d;
  if (requested == MemoryKind::host) {
    if (stream_given) {
      d.error =
          "Options::stream is for device memory, and Options::memory says this call's buffers are "
          "host memory";
    }
    return d;
  }
  const DetectedBuffer* first_device = nullptr;
  const DetectedBuffer* first_host = nullptr;
  for (const DetectedBuffer& b : buffers) {
    if (b.bytes == 0) continue;
    const DetectedBuffer*& first = b.device ? first_device : first_host;
    if (first == nullptr) first = &b;
    if (b.device && first_device->device_id != b.device_id) {
      d.error = std::string(first_device->name) + " is memory of CUDA device " +
                std::to_string(first_device->device_id) + " but " + b.name + " of CUDA device " +
                std::to_string(b.device_id) + ": a call's buffers must all be on one device";
      return d;
    }
  }
  if (first_device != nullptr && first_host != nullptr) {
    d.error = std::string(first_device->name) + " is device memory but " + first_host->name +
              " is host memory: a call's buffers must all be host memory or all device memory "
              "(copy one of them first)";
    return d;
  }
  if (first_device == nullptr) {
    if (stream_given && first_host != nullptr) {
      d.error = std::string("Options::stream is for device memory, and ") + first_host->name +
                " is host memory";
    }
    return d;
  }
  d.device = true;
  d.device_id = first_device->device_id;
  return d;
}

std::unique_ptr<DeviceCall> resolve_call_memory(CommState& state, Collective collective,
                                                const Options& options,
                                                std::initializer_list<BufferArg> buffers,
                                                bool blocking, bool p2p) {
  const bool stream_given = options.stream != nullptr;
  auto fail = [&](ErrorCode code, const std::string& why) {
    throw Error(code, to_string(collective), state.rank, why);
  };
  // Host memory with a stream: decide_memory rejects it.
  DeviceApi* api = options.memory == MemoryKind::host ? nullptr : device_api();
  if (api != nullptr ? api->device_count() == 0 : options.memory != MemoryKind::host) {
    // No device: every pointer is host memory, nothing to ask.
    process_is_host_only.store(true, std::memory_order_relaxed);
    if (options.memory == MemoryKind::device || stream_given) {
      fail(ErrorCode::unsupported,
           api == nullptr ? std::string("device memory (Options::memory = device or "
                                        "Options::stream) needs collx built with CUDA "
                                        "(-DCOLLX_CUDA=ON); this build has none")
                          : "device memory (Options::memory = device or Options::stream), but no " +
                                std::string(api->name()) + " device is visible to this process");
    }
    return {};
  }
  // Asked once per call and buffer.
  DetectedBuffer detected[8];
  std::size_t n = 0;
  for (const BufferArg& b : buffers) {
    if (api == nullptr || b.pointer == nullptr || b.bytes == 0 || n == std::size(detected))
      continue;
    const PointerKind kind =
        options.memory == MemoryKind::device ? PointerKind{true, -1} : api->pointer_kind(b.pointer);
    detected[n++] = {b.name, b.bytes, kind.device, kind.device_id};
  }
  const MemoryDecision decision =
      decide_memory(options.memory, stream_given, std::span<const DetectedBuffer>(detected, n));
  if (!decision.error.empty()) fail(ErrorCode::invalid_argument, decision.error);
  if (!decision.device) return {};
  const int device = decision.device_id >= 0 ? decision.device_id : api->current_device();
  DeviceEngine& engine = state.device_engine(device);
  return engine.begin_call(p2p ? *state.p2p_transport : *state.transport,
                           std::span(buffers.begin(), buffers.size()), options.stream, blocking);
}

std::byte* StagedCall::copy_of(const void* device, std::size_t bytes, bool input,
                               std::size_t output_bytes) {
  for (Copy& c : copies_) {
    if (c.device == device) {
      // The same buffer twice (in place): one copy, downloaded when it is also an input (the
      // caller names the input first).
      c.output_bytes = std::max(c.output_bytes, output_bytes);
      return c.host;
    }
  }
  std::byte* host = device_->host_copy(device, bytes, input);
  copies_.push_back({device, host, output_bytes});
  return host;
}

bool StagedCall::finish() {
  if (!uploaded_) {
    for (const Copy& c : copies_) {
      if (c.output_bytes > 0) device_->upload(const_cast<void*>(c.device), c.host, c.output_bytes);
    }
    uploaded_ = true;
  }
  return device_->finish();
}

Task after_inputs_landed(Operation& op, const StagedCall& staged, Task body) {
  co_await op.until(staged);
  co_await std::move(body);
}

bool needs_host_copy(Collective collective, Algorithm algorithm, bool arena, std::size_t bytes,
                     bool blocking, const DeviceCall& call) {
  const AlgorithmRow* row = find_row(schedules_of(collective), algorithm);
  if (row != nullptr && (row->host_copies() || (arena && row->uses_arena()))) return true;
  if (!blocking) return false;
  // A transport that takes device memory moves a large buffer device to device faster than two
  // copies and the host's algorithm would; a small one it moves slower (docs/DEVICE_MEMORY.md).
  const std::size_t limit = call.direct()
                                ? std::min(config().device_host_copy_bytes, kDirectHostCopyBytes)
                                : config().device_host_copy_bytes;
  return bytes <= limit;
}

}  // namespace collx::detail
