// collx's errors as MPI error codes: what the drop-in hands the program's error handler and
// returns, so that MPI_Error_string names collx's reason.
#pragma once

#include <string_view>

namespace collx_mpi {

// An MPI error code of `error_class` whose string (MPI_Error_string) is `message`, cut to what
// MPI_MAX_ERROR_STRING holds. Never aborts and never fails: where MPI adds no code of its own
// (it may run out of them) the class itself is returned; errors of MPI_Add_error_class, _code
// and _string are returned to us, whatever handlers the program set.
int error_code_for(int error_class, std::string_view message);

}  // namespace collx_mpi
