/* An MPI benchmark loop that has never heard of collx: MPI_Allreduce (double, sum) from 8 B to
 * 64 MiB by factors of 8, `iterations` timed calls after a warm-up, the slowest rank's mean
 * time per call. scripts/dropin-bench.sh runs it with and without libcollx_mpi.
 *   allreduce_loop [ITERATIONS=20] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iterations = argc > 1 ? atoi(argv[1]) : 20;
  const size_t largest = (size_t)64 << 20;
  double* send = malloc(largest);
  double* recv = malloc(largest);
  for (size_t i = 0; i < largest / sizeof(double); ++i) send[i] = (double)(rank + i % 7);
  if (rank == 0) printf("%12s %14s\n", "bytes", "time(us)");
  for (size_t bytes = 8; bytes <= largest; bytes *= 8) {
    const int count = (int)(bytes / sizeof(double));
    /* Small sizes get more calls so each measurement lasts long enough to time. */
    const int calls = bytes <= 65536 ? iterations * 50 : iterations;
    for (int i = 0; i < calls / 10 + 1; ++i)
      MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < calls; ++i)
      MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - start) / calls, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%12zu %14.2f\n", bytes, slowest * 1e6);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
