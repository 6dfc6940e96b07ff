// The device-memory tests on a real CUDA device: every rank of the node on one of its GPUs
// (several ranks share one when there are more ranks than GPUs).
#include <cuda_runtime.h>
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "collx/info.hpp"
#include "test_device.hpp"

namespace collx::testing {

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

class Cuda final : public TestDevice {
 public:
  Cuda() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      why_ = "no CUDA device";
      return;
    }
    check(cudaSetDevice(collx::node_placement(MPI_COMM_WORLD).rank % count), "cudaSetDevice");
  }
  std::string unavailable() override { return why_; }
  void* allocate(std::size_t bytes) override {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    return p;
  }
  void release(void* p) override { check(cudaFree(p), "cudaFree"); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  void* create_stream() override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }
  void destroy_stream(void* stream) override {
    check(cudaStreamDestroy(static_cast<cudaStream_t>(stream)), "cudaStreamDestroy");
  }
  void upload_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    check(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync");
  }
  void download_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    check(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync");
  }
  void synchronize(void* stream) override {
    check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }
  // Not on a GPU: only a host function could hold a stream, and one that waits for a collective
  // deadlocks (the tests that hold streams are built for the emulated device only).
  std::function<void()> hold(void*) override { return {}; }

 private:
  std::string why_;
};

}  // namespace

TestDevice& test_device() {
  static Cuda device;
  return device;
}

}  // namespace collx::testing
