// Device memory for collx-bench -m device: every rank on one of its node's GPUs, buffers by
// cudaMalloc. Built with CUDA only; elsewhere device_memory_unavailable() says why not.
#pragma once

#include <cstddef>
#include <string>

namespace collx::bench {

// "" when device buffers can be used (and this rank's device is set: node-local rank modulo the
// device count); otherwise the reason, for the error message. MPI must be initialised.
std::string device_memory_unavailable();
void* device_allocate(std::size_t bytes);
void device_free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void copy_on_device(void* dst, const void* src, std::size_t bytes);
// The name of this rank's device ("NVIDIA H100 80GB HBM3"), for the header.
std::string device_name();

}  // namespace collx::bench
