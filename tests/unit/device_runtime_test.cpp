// The CUDA runtime layer (device_runtime.hpp). Runs with and without a GPU: without one, host
// memory is still host, the device count is 0, and creating a stream or an event fails with a
// collx::Error that carries the CUDA error, leaving no error state behind.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "collx/error.hpp"
#include "device_runtime.hpp"

namespace {

using collx::kernels::MemoryKind;

bool have_gpu() {
  return collx::kernels::cuda_device_count() > 0;
}

// What cudaGetLastError says when nothing has failed since the last call: cudaSuccess on a
// working machine; without a driver, the runtime's initialisation error, which it reports on
// every call and never clears. Calls that clean up after themselves leave this unchanged.
cudaError_t settled_error_state() {
  (void)cudaGetLastError();
  return cudaGetLastError();
}

TEST(DeviceRuntime, HostMemoryIsHostWithOrWithoutADevice) {
  const cudaError_t settled = settled_error_state();
  int on_stack = 0;
  std::vector<double> on_heap(1000);
  static const char in_data[] = "collx";
  for (const void* p :
       {static_cast<const void*>(&on_stack), static_cast<const void*>(on_heap.data()),
        static_cast<const void*>(in_data), static_cast<const void*>(nullptr)}) {
    EXPECT_EQ(collx::kernels::memory_kind(p), MemoryKind::host);
    EXPECT_FALSE(collx::kernels::is_device_pointer(p));
    EXPECT_EQ(collx::kernels::pointer_info(p).device, -1);
  }
  // Whatever happened inside (no driver, no device), no error is left for the next caller.
  EXPECT_EQ(cudaGetLastError(), settled);
}

TEST(DeviceRuntime, DeviceCountNeverFails) {
  const cudaError_t settled = settled_error_state();
  const int count = collx::kernels::cuda_device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(cudaGetLastError(), settled);
}

TEST(DeviceRuntime, WithoutADeviceStreamsAndEventsThrowCudaErrors) {
  if (have_gpu()) GTEST_SKIP() << "a CUDA device is present";
  const cudaError_t settled = settled_error_state();
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      collx::kernels::CudaStream stream;
      ADD_FAILURE() << "CudaStream was created without a device";
    } catch (const collx::Error& e) {
      EXPECT_EQ(e.code(), collx::ErrorCode::cuda);
      EXPECT_NE(e.detail().find("cudaStreamCreateWithFlags: cudaError"), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(collx::kernels::CudaEvent event(true), collx::Error);
    EXPECT_THROW(collx::kernels::device_limits(0), collx::Error);
    EXPECT_EQ(cudaGetLastError(), settled);
  }
}

TEST(DeviceRuntime, CheckCudaPassesSuccessAndNamesTheFailure) {
  const cudaError_t settled = settled_error_state();
  EXPECT_NO_THROW(collx::kernels::check_cuda(cudaSuccess, "nothing"));
  try {
    collx::kernels::check_cuda(cudaErrorInvalidValue, "cudaMemcpyAsync(dst)");
    ADD_FAILURE() << "check_cuda did not throw";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::cuda);
    EXPECT_EQ(e.detail().rfind("cudaMemcpyAsync(dst): cudaErrorInvalidValue (", 0), 0u)
        << e.detail();
  }
  EXPECT_EQ(cudaGetLastError(), settled);
}

TEST(DeviceRuntime, MemoryKindsOfCudaAllocations) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  void* device = nullptr;
  void* pinned = nullptr;
  void* managed = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 256), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, 256), cudaSuccess);
  ASSERT_EQ(cudaMallocManaged(&managed, 256), cudaSuccess);
  const int current = collx::kernels::current_cuda_device();
  EXPECT_EQ(collx::kernels::memory_kind(device), MemoryKind::device);
  EXPECT_EQ(collx::kernels::pointer_info(device).device, current);
  EXPECT_EQ(collx::kernels::memory_kind(static_cast<char*>(device) + 100), MemoryKind::device);
  EXPECT_EQ(collx::kernels::memory_kind(pinned), MemoryKind::host_pinned);
  EXPECT_EQ(collx::kernels::memory_kind(managed), MemoryKind::managed);
  EXPECT_TRUE(collx::kernels::is_device_pointer(device));
  EXPECT_TRUE(collx::kernels::is_device_pointer(managed));
  EXPECT_FALSE(collx::kernels::is_device_pointer(pinned));
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaFree(managed), cudaSuccess);
}

TEST(DeviceRuntime, StreamsEventsAndLimits) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device";
  const auto limits = collx::kernels::device_limits(collx::kernels::current_cuda_device());
  EXPECT_GT(limits.sm_count, 0);
  EXPECT_GE(limits.max_threads_per_sm, 1024);
  EXPECT_EQ(collx::kernels::device_limits(collx::kernels::current_cuda_device()).sm_count,
            limits.sm_count);

  collx::kernels::CudaStream stream;
  ASSERT_NE(stream.handle(), nullptr);
  collx::kernels::CudaEvent start(true);
  collx::kernels::CudaEvent stop(true);
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, 1 << 20), cudaSuccess);
  start.record(stream);
  ASSERT_EQ(cudaMemsetAsync(buffer, 0, 1 << 20, static_cast<cudaStream_t>(stream.handle())),
            cudaSuccess);
  stop.record(stream);
  stop.synchronize();
  EXPECT_TRUE(stop.ready());
  EXPECT_TRUE(stream.ready());
  EXPECT_GE(collx::kernels::CudaEvent::elapsed_ms(start, stop), 0.0f);

  // Moves hand the handle over; the moved-from object owns nothing.
  collx::kernels::CudaStream other(std::move(stream));
  EXPECT_EQ(stream.handle(), nullptr);
  collx::kernels::CudaStream second;
  second.wait(stop);
  second = std::move(other);
  second.synchronize();
  EXPECT_EQ(cudaFree(buffer), cudaSuccess);
}

}  // namespace
