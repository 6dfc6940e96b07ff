// collx's errors as MPI error codes (error_codes.hpp).
#include "error_codes.hpp"

#include <mpi.h>

#include <map>
#include <mutex>
#include <string>

namespace collx_mpi {

namespace {

// Runs `step` with MPI_COMM_WORLD's and MPI_COMM_SELF's error handlers set to return (MPI
// raises the errors of MPI_Add_error_class, _code and _string on one of them), so that the
// error path itself can never abort the program: a failure there leaves a plainer code.
template <class Step>
int with_errors_returned(Step&& step) {
  MPI_Errhandler world = MPI_ERRHANDLER_NULL, self = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
  PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  const int code = step();
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
  PMPI_Errhandler_free(&world);
  PMPI_Errhandler_free(&self);
  return code;
}

}  // namespace

// One added MPI error code per error class, its string replaced by the latest collx message
// (MPI_Add_error_string replaces a string set before): MPI_Error_string names collx's reason,
// cut to what MPI_MAX_ERROR_STRING holds. MPICH gives a code added to a predefined class its
// generic message instead; there the code goes to a class of collx's own ("collx:
// <predefined class's message>"). Where MPI adds no code (it may run out of them), the
// predefined class itself is returned, and no code is asked for again.
int error_code_for(int error_class, std::string_view message) {
  static std::mutex mutex;
  static std::map<int, int> codes;  // by error class
  std::lock_guard lock(mutex);
  const std::string text(message.substr(0, MPI_MAX_ERROR_STRING - 1));
  return with_errors_returned([&] {
    auto found = codes.find(error_class);
    if (found == codes.end()) {
      int code = error_class;
      int added = 0;
      if (PMPI_Add_error_code(error_class, &added) == MPI_SUCCESS &&
          PMPI_Add_error_string(added, text.c_str()) == MPI_SUCCESS) {
        code = added;
        char seen[MPI_MAX_ERROR_STRING] = {};
        int length = 0;
        PMPI_Error_string(added, seen, &length);
        int own_class = 0;
        if (text != seen && PMPI_Add_error_class(&own_class) == MPI_SUCCESS &&
            PMPI_Add_error_code(own_class, &added) == MPI_SUCCESS) {
          code = added;
          char predefined[MPI_MAX_ERROR_STRING] = {};
          PMPI_Error_string(error_class, predefined, &length);
          const std::string own = std::string("collx: ") + predefined;
          PMPI_Add_error_string(own_class, own.substr(0, MPI_MAX_ERROR_STRING - 1).c_str());
        }
      }
      found = codes.emplace(error_class, code).first;
    }
    if (found->second != error_class) PMPI_Add_error_string(found->second, text.c_str());
    return found->second;
  });
}

}  // namespace collx_mpi
