// DeviceApi: the few device operations collx's device-memory layer needs, behind one interface
// without CUDA headers (streams and events are opaque handles): CUDA's runtime implements it
// (device_api_cuda.cpp), and the tests run the same layer on an emulated device.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "collx/info.hpp"
#include "collx/types.hpp"

namespace collx::detail {

using DeviceDescription = CudaDevice;

// Where a pointer points: device memory (device or managed) of device `device`, or host memory.
struct PointerKind {
  bool device = false;
  int device_id = -1;
};

class DeviceApi {
 public:
  using Stream = void*;
  using Event = void*;
  enum class Copy { device_to_host, host_to_device, device_to_device };

  virtual ~DeviceApi() = default;
  // "cuda", or the emulation's name.
  virtual std::string_view name() const = 0;
  // Devices visible to this process; 0 when there is none (or no driver).
  virtual int device_count() = 0;
  virtual std::vector<DeviceDescription> devices() = 0;
  // Never fails: anything the device runtime does not know is host memory.
  virtual PointerKind pointer_kind(const void* pointer) = 0;
  virtual int current_device() = 0;
  virtual void set_device(int device) = 0;

  // Memory of the current device, or page-locked host memory for staging.
  enum class Memory { device, pinned };
  virtual void* allocate(Memory memory, std::size_t bytes) = 0;
  virtual void free(Memory memory, void* pointer) = 0;

  // Streams and events of the current device. Every failure throws collx::Error.
  virtual Stream create_stream() = 0;
  virtual void destroy_stream(Stream stream) noexcept = 0;
  // The stream the caller's device work without a stream is ordered on (CUDA's legacy default
  // stream): a call without Options::stream runs after the work enqueued there so far (such as
  // a cudaMemcpy from pageable memory, which returns before its copy lands).
  virtual Stream default_stream() = 0;
  virtual Event create_event() = 0;
  virtual void destroy_event(Event event) noexcept = 0;
  virtual void record(Event event, Stream stream) = 0;
  // True once the work before the event's last record has completed (or it was never recorded).
  virtual bool done(Event event) = 0;
  virtual void synchronize(Event event) = 0;
  // Work enqueued on `stream` from now on runs after the work before `event`.
  virtual void wait(Stream stream, Event event) = 0;

  // Asynchronous, ordered on `stream`.
  virtual void copy(void* dst, const void* src, std::size_t bytes, Copy kind, Stream stream) = 0;
  // dst = a op b over n elements (divisor > 0: avg's final division fused), as the host kernels.
  virtual void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                      ReduceOp op, double divisor, Stream stream) = 0;
};

// The device API of this process: CUDA's in a CUDA build (whether or not a device is present),
// none (nullptr) otherwise, or what set_device_api installed.
DeviceApi* device_api();
std::shared_ptr<DeviceApi> shared_device_api();
// Replaces the device API for the communicators' device calls from now on (tests: an emulated
// device). Call before any device call; nullptr goes back to the build's own.
void set_device_api(std::shared_ptr<DeviceApi> api);

// Sets the current device for a scope and puts the previous one back.
class DeviceGuard {
 public:
  DeviceGuard(DeviceApi& api, int device) : api_(api), device_(device) {
    previous_ = api_.current_device();
    if (previous_ != device_) api_.set_device(device_);
  }
  ~DeviceGuard() {
    if (previous_ != device_) {
      try {
        api_.set_device(previous_);
      } catch (...) {
        // Putting the caller's device back cannot fail where setting ours succeeded.
      }
    }
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  DeviceApi& api_;
  int device_;
  int previous_ = -1;
};

// True once a call found that this process cannot see device memory (a build without CUDA,
// or no device); cleared when the device API is replaced (set_device_api).
extern std::atomic<bool> process_is_host_only;

}  // namespace collx::detail
