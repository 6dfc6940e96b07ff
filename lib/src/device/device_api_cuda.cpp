// DeviceApi over the CUDA runtime (built with CUDA only).
#include <cuda_runtime.h>

#if defined(__linux__) && defined(__GLIBC__)
#include <pthread.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "collx/error.hpp"
#include "device_api.hpp"
#include "device_reduce.hpp"
#include "device_runtime.hpp"

namespace collx::detail {

namespace {

using kernels::check_cuda;

cudaStream_t as_stream(DeviceApi::Stream s) {
  return static_cast<cudaStream_t>(s);
}
cudaEvent_t as_event(DeviceApi::Event e) {
  return static_cast<cudaEvent_t>(e);
}

#if defined(__linux__) && defined(__GLIBC__)
// Memory CUDA cannot have handed out, told apart without a driver call (several times a small
// allreduce's cost): the brk heap above where it ended when collx was loaded (device, managed
// and mapped memory come from mmap) and the calling thread's stack.
const std::uintptr_t heap_at_load = reinterpret_cast<std::uintptr_t>(sbrk(0));

bool surely_host(const void* pointer) {
  const auto p = reinterpret_cast<std::uintptr_t>(pointer);
  const auto heap_top = reinterpret_cast<std::uintptr_t>(sbrk(0));
  if (heap_at_load != static_cast<std::uintptr_t>(-1) && p >= heap_at_load && p < heap_top) {
    return true;
  }
  // The calling thread's stack: [low, high).
  thread_local const auto [low, high] = [] {
    std::pair<std::uintptr_t, std::uintptr_t> range{0, 0};
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) != 0) return range;
    void* base = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &base, &size) == 0) {
      range.first = reinterpret_cast<std::uintptr_t>(base);
      range.second = range.first + size;
    }
    pthread_attr_destroy(&attr);
    return range;
  }();
  return p >= low && p < high;
}
#else
bool surely_host(const void*) {
  return false;
}
#endif

class CudaApi final : public DeviceApi {
 public:
  std::string_view name() const override { return "cuda"; }

  int device_count() override {
    // Asked once: the count does not change, and without a GPU every detected call would ask.
    std::call_once(count_once_, [this] { count_ = kernels::cuda_device_count(); });
    return count_;
  }

  std::vector<DeviceDescription> devices() override {
    std::vector<DeviceDescription> out;
    for (int d = 0; d < device_count(); ++d) {
      cudaDeviceProp prop{};
      check_cuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
      out.push_back({d, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
    }
    return out;
  }

  PointerKind pointer_kind(const void* pointer) override {
    if (surely_host(pointer)) return {};
    const kernels::PointerInfo info = kernels::pointer_info(pointer);
    if (info.kind == kernels::MemoryKind::device || info.kind == kernels::MemoryKind::managed) {
      return {true, info.device};
    }
    return {};
  }

  int current_device() override { return kernels::current_cuda_device(); }
  void set_device(int device) override { check_cuda(cudaSetDevice(device), "cudaSetDevice"); }

  void* allocate(Memory memory, std::size_t bytes) override {
    void* p = nullptr;
    const bool device = memory == Memory::device;
    check_cuda(device ? cudaMalloc(&p, bytes) : cudaHostAlloc(&p, bytes, cudaHostAllocPortable),
               (device ? "cudaMalloc(" : "cudaHostAlloc(") + std::to_string(bytes) + " B)");
    return p;
  }
  void free(Memory memory, void* pointer) override {
    const bool device = memory == Memory::device;
    check_cuda(device ? cudaFree(pointer) : cudaFreeHost(pointer),
               device ? "cudaFree" : "cudaFreeHost");
  }

  Stream create_stream() override {
    cudaStream_t s = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return s;
  }
  void destroy_stream(Stream stream) noexcept override {
    if (cudaStreamDestroy(as_stream(stream)) != cudaSuccess) (void)cudaGetLastError();
  }
  Stream default_stream() override { return cudaStreamLegacy; }
  Event create_event() override {
    cudaEvent_t e = nullptr;
    check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void destroy_event(Event event) noexcept override {
    if (cudaEventDestroy(as_event(event)) != cudaSuccess) (void)cudaGetLastError();
  }
  void record(Event event, Stream stream) override {
    check_cuda(cudaEventRecord(as_event(event), as_stream(stream)), "cudaEventRecord");
  }
  bool done(Event event) override {
    const cudaError_t status = cudaEventQuery(as_event(event));
    if (status == cudaErrorNotReady) return false;
    check_cuda(status, "cudaEventQuery");
    return true;
  }
  void synchronize(Event event) override {
    check_cuda(cudaEventSynchronize(as_event(event)), "cudaEventSynchronize");
  }
  void wait(Stream stream, Event event) override {
    check_cuda(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0), "cudaStreamWaitEvent");
  }

  void copy(void* dst, const void* src, std::size_t bytes, Copy kind, Stream stream) override {
    const cudaMemcpyKind k = kind == Copy::device_to_host   ? cudaMemcpyDeviceToHost
                             : kind == Copy::host_to_device ? cudaMemcpyHostToDevice
                                                            : cudaMemcpyDeviceToDevice;
    check_cuda(cudaMemcpyAsync(dst, src, bytes, k, as_stream(stream)), "cudaMemcpyAsync");
  }
  void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type, ReduceOp op,
              double divisor, Stream stream) override {
    kernels::device_reduce(dst, a, b, n, type, op, divisor, stream);
  }

 private:
  std::once_flag count_once_;
  int count_ = 0;
};

}  // namespace

std::shared_ptr<DeviceApi> make_cuda_api() {
  return std::make_shared<CudaApi>();
}

}  // namespace collx::detail
