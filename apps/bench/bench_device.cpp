#include "bench_device.hpp"

#include <mpi.h>

#include <stdexcept>

#include "collx/build_config.hpp"
#include "collx/info.hpp"
#if COLLX_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace collx::bench {

#if COLLX_HAVE_CUDA

namespace {
void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ")");
  }
}
}  // namespace

std::string device_memory_unavailable() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    return std::string("no CUDA device is visible to this process (cudaGetDeviceCount: ") +
           (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")";
  }
  check(cudaSetDevice(collx::node_placement(MPI_COMM_WORLD).rank % count), "cudaSetDevice");
  return "";
}

void* device_allocate(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

void device_free(void* p) noexcept {
  if (p != nullptr && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy (to the device)");
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy (to the host)");
}

void copy_on_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpy (on the device)");
}

std::string device_name() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  return std::string(prop.name) + " (device " + std::to_string(device) + ")";
}

#else

namespace {
[[noreturn]] void no_cuda() {
  throw std::runtime_error("this build of collx has no CUDA support");
}
}  // namespace

std::string device_memory_unavailable() {
  return "this build of collx has no CUDA support (configure with -DCOLLX_CUDA=ON where the CUDA "
         "toolkit is installed)";
}
void* device_allocate(std::size_t) {
  no_cuda();
}
void device_free(void*) noexcept {}
void copy_to_device(void*, const void*, std::size_t) {
  no_cuda();
}
void copy_to_host(void*, const void*, std::size_t) {
  no_cuda();
}
void copy_on_device(void*, const void*, std::size_t) {
  no_cuda();
}
std::string device_name() {
  return "none";
}

#endif

}  // namespace collx::bench
