#include "cuda_aware.hpp"

#include <mpi.h>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include "config.hpp"

namespace collx::detail {

const CudaAwareness& cuda_awareness() {
  static const CudaAwareness awareness = [] {
    CudaAwareness a;
    a.override_value = config().cuda_aware;
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    // Open MPI: the macro says whether this build has CUDA support, the function whether it is
    // active in this run.
    a.query = "MPIX_Query_cuda_support";
#if MPIX_CUDA_AWARE_SUPPORT
    a.mpi_reports = MPIX_Query_cuda_support() == 1;
#endif
#elif defined(MPIX_GPU_SUPPORT_CUDA)
    // MPICH 4: one query per GPU kind.
    a.query = "MPIX_GPU_query_support";
    int supported = 0;
    a.mpi_reports =
        MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported != 0;
#endif
    return a;
  }();
  return awareness;
}

std::string describe(const CudaAwareness& a) {
  std::string mpi = a.query == "none"
                        ? std::string("unknown, this MPI offers no query")
                        : std::string(a.mpi_reports ? "yes" : "no") + " (" + a.query + ")";
  if (!a.override_value) return mpi;
  return std::string(*a.override_value ? "yes" : "no") +
         " (COLLX_CUDA_AWARE=" + (*a.override_value ? "1" : "0") + "; MPI: " + mpi + ")";
}

}  // namespace collx::detail
