// A small layer over the CUDA runtime for the rest of collx: which memory a pointer is, how many
// devices there are and what they hold, RAII streams and events, and CUDA errors as collx::Error.
//
// Built only with CUDA (COLLX_HAVE_CUDA). No CUDA header is needed to use it: streams and events
// are handed out as `void*` (a cudaStream_t / cudaEvent_t) and statuses as int (a cudaError_t).
#pragma once

#include <string_view>

namespace collx::kernels {

enum class MemoryKind {
  host,         // ordinary host memory, or anything CUDA does not know
  host_pinned,  // page-locked host memory (cudaMallocHost / cudaHostRegister)
  device,       // device memory (cudaMalloc)
  managed,      // unified memory (cudaMallocManaged)
};
std::string_view to_string(MemoryKind kind);

struct PointerInfo {
  MemoryKind kind = MemoryKind::host;
  int device = -1;  // the device that holds it (device, managed, pinned); -1 for plain host memory
};

// What CUDA knows about `pointer`. Never fails: any CUDA error (no driver, no device, a pointer
// it does not know) means host memory, and the runtime's error state is cleared so that the
// error does not surface at an unrelated later call.
PointerInfo pointer_info(const void* pointer) noexcept;
inline MemoryKind memory_kind(const void* pointer) noexcept {
  return pointer_info(pointer).kind;
}
// True for memory that the device reduction kernels may be given: device or managed memory.
bool is_device_pointer(const void* pointer) noexcept;

// Number of CUDA devices; 0 when there is no device or no driver (error state cleared).
int cuda_device_count() noexcept;
// The calling thread's current device. Throws collx::Error (ErrorCode::cuda).
int current_cuda_device();

struct DeviceLimits {
  int sm_count = 0;
  int max_threads_per_sm = 0;
};
// Queried once per device and cached (thread-safe). Throws collx::Error (ErrorCode::cuda).
DeviceLimits device_limits(int device);

// Throws collx::Error with ErrorCode::cuda: "<context>: <cudaGetErrorName> (<description>)".
// Also clears the runtime's last-error state, so the failure is reported exactly once.
[[noreturn]] void throw_cuda_error(int status, std::string_view context);
// `status` is a cudaError_t; cudaSuccess (0) returns.
inline void check_cuda(int status, std::string_view context) {
  if (status != 0) throw_cuda_error(status, context);
}

class CudaEvent;

// An owned CUDA stream on the current device, destroyed with its owner.
class CudaStream {
 public:
  // non_blocking: the stream does not synchronise with the legacy default stream.
  explicit CudaStream(bool non_blocking = true);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  void* handle() const noexcept { return handle_; }  // a cudaStream_t
  void synchronize() const;
  // True when all work enqueued so far has completed.
  bool ready() const;
  // Work enqueued after this call waits for `event` (as last recorded).
  void wait(const CudaEvent& event) const;

 private:
  void* handle_ = nullptr;
};

// An owned CUDA event; timing events can measure the time between two of them.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  void* handle() const noexcept { return handle_; }  // a cudaEvent_t
  // stream: a cudaStream_t, nullptr for the legacy default stream.
  void record(void* stream = nullptr);
  void record(const CudaStream& stream) { record(stream.handle()); }
  void synchronize() const;
  bool ready() const;
  // Milliseconds from `start` to `stop`, both timing events, recorded and complete.
  static float elapsed_ms(const CudaEvent& start, const CudaEvent& stop);

 private:
  void* handle_ = nullptr;
};

}  // namespace collx::kernels
