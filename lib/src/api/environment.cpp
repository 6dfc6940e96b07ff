#include "collx/environment.hpp"

#include <mpi.h>

#include "config.hpp"
#include "transport_mpi.hpp"

namespace collx {

Environment::Environment(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&thread_level_);
    return;
  }
  const int wanted = detail::config().progress_thread ? MPI_THREAD_MULTIPLE : MPI_THREAD_FUNNELED;
  detail::check_mpi(MPI_Init_thread(&argc, &argv, wanted, &thread_level_), "MPI_Init_thread");
  owns_mpi_ = true;
}

Environment::~Environment() {
  if (owns_mpi_ && !detail::mpi_finalized()) MPI_Finalize();
}

}  // namespace collx
