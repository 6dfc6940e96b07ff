// The drop-in's error codes (dropin/error_codes.cpp) under MPI_ERRORS_ARE_FATAL: messages of
// any length, many times over, every class the drop-in uses. Each code's string is the message
// (cut to what MPI_MAX_ERROR_STRING holds) and names the class it was asked for (or, under
// MPICH, a class of collx's own); nothing aborts, and the program's error handlers are left as
// they were. Prints "error_codes_test: OK".
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "error_codes.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "error_codes_test: FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int classes[] = {MPI_ERR_ARG,   MPI_ERR_UNSUPPORTED_OPERATION,
                         MPI_ERR_COMM,  MPI_ERR_INTERN,
                         MPI_ERR_OTHER, MPI_ERR_NO_MEM};
  const std::size_t lengths[] = {0,
                                 1,
                                 100,
                                 MPI_MAX_ERROR_STRING - 2,
                                 MPI_MAX_ERROR_STRING - 1,
                                 MPI_MAX_ERROR_STRING,
                                 MPI_MAX_ERROR_STRING + 1,
                                 1000,
                                 100000};
  for (int round = 0; round < 50; ++round) {
    for (int error_class : classes) {
      int first_code = -1;
      for (std::size_t length : lengths) {
        std::string message = "collx test " + std::to_string(round) + " ";
        message.resize(length, 'x');
        const int code = collx_mpi::error_code_for(error_class, message);
        if (first_code < 0) first_code = code;
        expect(code == first_code, "one code per class");
        char seen[MPI_MAX_ERROR_STRING] = {};
        int seen_length = 0;
        expect(MPI_Error_string(code, seen, &seen_length) == MPI_SUCCESS, "MPI_Error_string");
        const std::string want = message.substr(0, MPI_MAX_ERROR_STRING - 1);
        // A code that is the class itself (MPI added none) keeps MPI's own string.
        if (code != error_class)
          expect(want == seen, "the string of a " + std::to_string(length) +
                                   "-character message: \"" + std::string(seen) + "\"");
        int seen_class = -1;
        expect(MPI_Error_class(code, &seen_class) == MPI_SUCCESS, "MPI_Error_class");
        expect(seen_class == error_class || seen_class > MPI_ERR_LASTCODE,
               "the class of the code: " + std::to_string(seen_class));
      }
    }
  }
  // The handlers the program set are still in place.
  MPI_Errhandler world = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
  expect(world == MPI_ERRORS_ARE_FATAL, "MPI_COMM_WORLD's error handler was changed");
  MPI_Errhandler_free(&world);
  MPI_Finalize();
  if (failures == 0) std::printf("error_codes_test: OK\n");
  return failures == 0 ? 0 : 1;
}
