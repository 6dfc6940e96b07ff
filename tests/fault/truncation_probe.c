/* truncation_probe: does the MPI library keep a truncated receive inside its buffer?
 *
 * Rank 1 sends 202000 bytes; rank 0 receives at most 2000 into a buffer followed by 1 MiB of
 * guard bytes, and counts the guard bytes that changed. MPI_ERR_TRUNCATE is the right outcome
 * and nothing may be written past the 2000 bytes. Open MPI 4.1.4's vader single copy (CMA)
 * writes all 200000 bytes past it; with btl_vader_single_copy_mechanism=none, or under MPICH,
 * nothing is. collx's mismatch test depends on it (tests/fault/CMakeLists.txt). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int sent = 202000, room = 2000, guard = 1 << 20;
  int status = 0;
  if (rank == 1) {
    char* data = malloc(sent);
    memset(data, 'x', sent);
    MPI_Send(data, sent, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    free(data);
  } else if (rank == 0) {
    char* data = malloc((size_t)room + guard);
    memset(data, 'g', (size_t)room + guard);
    const int rc = MPI_Recv(data, room, MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    size_t past = 0;
    for (size_t i = room; i < (size_t)room + guard; ++i)
      past += data[i] != 'g';
    int error_class = MPI_SUCCESS;
    MPI_Error_class(rc, &error_class);
    printf("truncation_probe: %zu bytes written past a %d-byte receive of a %d-byte message "
           "(%s)\n",
           past, room, sent, error_class == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "no truncation error");
    status = past == 0 && error_class == MPI_ERR_TRUNCATE ? 0 : 1;
    free(data);
  }
  MPI_Finalize();
  return status;
}
