// Whether the MPI library moves CUDA device memory itself ("CUDA-aware"), asked once per process
// after MPI_Init, and what collx does with device buffers as a result.
#pragma once

#include <optional>
#include <string>

namespace collx::detail {

struct CudaAwareness {
  // How the MPI library was asked: "MPIX_Query_cuda_support" (Open MPI), "MPIX_GPU_query_support"
  // (MPICH), or "none" (this MPI offers no query: taken as not CUDA-aware).
  std::string query = "none";
  // What the query answered (false where there is none).
  bool mpi_reports = false;
  // COLLX_CUDA_AWARE, when set.
  std::optional<bool> override_value;
  // What collx acts on: the override if set, else the MPI library's answer.
  bool mpi_direct() const { return override_value.value_or(mpi_reports); }
};

// Asked on first use (MPI must be initialised); the same object afterwards.
const CudaAwareness& cuda_awareness();

// "no (MPIX_Query_cuda_support)" / "yes (COLLX_CUDA_AWARE=1; MPI: no)": for collx-info.
std::string describe(const CudaAwareness& awareness);

}  // namespace collx::detail
