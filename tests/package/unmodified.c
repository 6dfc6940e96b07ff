/* A plain MPI program that has never heard of collx: a sum over every rank, checked. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  double mine[100], sum[100];
  for (int i = 0; i < 100; ++i)
    mine[i] = rank + i;
  MPI_Allreduce(mine, sum, 100, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  int wrong = 0;
  for (int i = 0; i < 100; ++i)
    wrong += sum[i] != size * (size - 1) / 2.0 + size * i;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("consumer: %d ranks, %d wrong\n", size, wrong);
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
