#include "transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

namespace collx::detail {

std::string describe(const Transfer& t) {
  return (t.is_send ? "send of " : "recv of ") + std::to_string(t.bytes) + " B " +
         (t.is_send ? "to" : "from") + " rank " + std::to_string(t.peer);
}

bool Transport::processors_oversubscribed(int ranks_on_node) {
  if (const char* told = std::getenv("OMPI_MCA_mpi_yield_when_idle")) {
    const std::string_view value(told);
    if (value == "1" || value == "true") return true;
    if (value == "0" || value == "false") return false;
  }
  // The launcher's count of this job's processes on this node, 0 where none says it: Open MPI's
  // mpirun, MPICH's hydra (also Intel MPI's and MVAPICH's), Slurm's srun.
  static const int launcher = [] {
    for (const char* name :
         {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"}) {
      if (const char* value = std::getenv(name)) {
        const int n = std::atoi(value);
        if (n > 0) return n;
      }
    }
    return 0;
  }();
  static const long processors = sysconf(_SC_NPROCESSORS_ONLN);
  return processors > 0 && std::max(ranks_on_node, launcher) > processors;
}

}  // namespace collx::detail
