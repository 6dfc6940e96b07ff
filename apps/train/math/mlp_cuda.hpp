// The CUDA backend of collx-train's math (mlp_cuda.cu): cuBLAS for the GEMMs, CUDA kernels for
// the rest, everything in device memory on one stream. Built only with CUDA (COLLX_MLP_CUDA);
// the trainer reaches it through mlp::make_backend(Device::cuda, local_rank).
#pragma once

#include <memory>
#include <string>

#include "mlp_math.hpp"

namespace collx::mlp {

// Empty when a CUDA device is visible to this process, else the reason (no driver, no device).
std::string cuda_unavailable_reason();

// Computes on device `local_rank % cudaGetDeviceCount()` (made current for the calling thread).
// Throws std::runtime_error when CUDA or cuBLAS fails.
template <class T>
std::unique_ptr<Backend<T>> make_cuda_backend(int local_rank);

}  // namespace collx::mlp
