// The CUDA runtime layer of device_runtime.hpp.
#include "device_runtime.hpp"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "collx/error.hpp"

namespace collx::kernels {

std::string_view to_string(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::host:
      return "host";
    case MemoryKind::host_pinned:
      return "host_pinned";
    case MemoryKind::device:
      return "device";
    case MemoryKind::managed:
      return "managed";
  }
  return "unknown";
}

void throw_cuda_error(int status, std::string_view context) {
  const auto error = static_cast<cudaError_t>(status);
  // The failed call also set the runtime's last error; clear it so that it is reported once,
  // here, and not again by the next cudaGetLastError of unrelated code.
  (void)cudaGetLastError();
  std::string message(context);
  message += ": ";
  message += cudaGetErrorName(error);
  message += " (";
  message += cudaGetErrorString(error);
  message += ")";
  throw Error(ErrorCode::cuda, "", -1, message);
}

PointerInfo pointer_info(const void* pointer) noexcept {
  if (pointer == nullptr) return {};
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    return {};
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      return {MemoryKind::device, attributes.device};
    case cudaMemoryTypeManaged:
      return {MemoryKind::managed, attributes.device};
    case cudaMemoryTypeHost:
      return {MemoryKind::host_pinned, attributes.device};
    case cudaMemoryTypeUnregistered:
      break;
  }
  return {};
}

bool is_device_pointer(const void* pointer) noexcept {
  const MemoryKind kind = memory_kind(pointer);
  return kind == MemoryKind::device || kind == MemoryKind::managed;
}

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

int current_cuda_device() {
  int device = -1;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

DeviceLimits device_limits(int device) {
  // One word per device: SM count in the high half, threads per SM in the low half; 0 = not yet
  // queried. Racing first calls both query and store the same value.
  constexpr int kCachedDevices = 64;
  static std::array<std::atomic<std::uint64_t>, kCachedDevices> cache{};
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    const std::uint64_t word = cache[device].load(std::memory_order_relaxed);
    if (word != 0) {
      return {static_cast<int>(word >> 32), static_cast<int>(word & 0xffffffffu)};
    }
  }
  DeviceLimits limits;
  check_cuda(cudaDeviceGetAttribute(&limits.sm_count, cudaDevAttrMultiProcessorCount, device),
             "cudaDeviceGetAttribute(cudaDevAttrMultiProcessorCount)");
  check_cuda(cudaDeviceGetAttribute(&limits.max_threads_per_sm,
                                    cudaDevAttrMaxThreadsPerMultiProcessor, device),
             "cudaDeviceGetAttribute(cudaDevAttrMaxThreadsPerMultiProcessor)");
  if (cacheable) {
    cache[device].store((static_cast<std::uint64_t>(limits.sm_count) << 32) |
                            static_cast<std::uint32_t>(limits.max_threads_per_sm),
                        std::memory_order_relaxed);
  }
  return limits;
}

// ---- CudaStream ----
CudaStream::CudaStream(bool non_blocking) {
  cudaStream_t stream = nullptr;
  check_cuda(
      cudaStreamCreateWithFlags(&stream, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault),
      "cudaStreamCreateWithFlags");
  handle_ = stream;
}

CudaStream::~CudaStream() {
  // A destructor cannot report an error; at process exit the runtime may already be unloading.
  if (handle_ != nullptr && cudaStreamDestroy(static_cast<cudaStream_t>(handle_)) != cudaSuccess) {
    (void)cudaGetLastError();
  }
}

CudaStream::CudaStream(CudaStream&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    CudaStream old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void CudaStream::synchronize() const {
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
}

bool CudaStream::ready() const {
  const cudaError_t status = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  // Not an error (the runtime does not record it as the last error): work is pending.
  if (status == cudaErrorNotReady) return false;
  check_cuda(status, "cudaStreamQuery");
  return true;
}

void CudaStream::wait(const CudaEvent& event) const {
  check_cuda(cudaStreamWaitEvent(static_cast<cudaStream_t>(handle_),
                                 static_cast<cudaEvent_t>(event.handle()), 0),
             "cudaStreamWaitEvent");
}

// ---- CudaEvent ----
CudaEvent::CudaEvent(bool timing) {
  cudaEvent_t event = nullptr;
  check_cuda(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming),
             "cudaEventCreateWithFlags");
  handle_ = event;
}

CudaEvent::~CudaEvent() {
  if (handle_ != nullptr && cudaEventDestroy(static_cast<cudaEvent_t>(handle_)) != cudaSuccess) {
    (void)cudaGetLastError();
  }
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    CudaEvent old(std::move(*this));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void CudaEvent::record(void* stream) {
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream)),
             "cudaEventRecord");
}

void CudaEvent::synchronize() const {
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
}

bool CudaEvent::ready() const {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  // Not an error (the runtime does not record it as the last error): work is pending.
  if (status == cudaErrorNotReady) return false;
  check_cuda(status, "cudaEventQuery");
  return true;
}

float CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& stop) {
  float ms = 0.0f;
  check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_),
                                  static_cast<cudaEvent_t>(stop.handle_)),
             "cudaEventElapsedTime");
  return ms;
}

}  // namespace collx::kernels
