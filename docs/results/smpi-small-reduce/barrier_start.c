// When the ranks start the timed calls (docs/SCALE.md, "The cost model against the simulation"):
// collx-bench's order (one untimed call, a barrier, two calls back to back), with the binomial
// reduce of receive_order.c whose receives are all posted at once; each rank's simulated time
// when it leaves the barrier and when each call returns (us). Build and run (barrier_start.txt):
//   smpicc -O2 barrier_start.c -o barrier_start
//   smpirun -np 64 -platform smpi/platforms/fat-tree-64.xml -hostfile HOSTS \
//     --cfg=smpi/coll-selector:ompi --cfg=smpi/simulate-computation:no \
//     --cfg=smpi/host-speed:100Gf --cfg=smpi/bcast:binomial_tree ./barrier_start
// HOSTS: node-0 .. node-63 one a line (64 x 1).
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define N 4
static void binomial(const float* in, float* out, int all, MPI_Comm comm) {
  int r, p;
  MPI_Comm_rank(comm, &r);
  MPI_Comm_size(comm, &p);
  float acc[N], tmp[16][N];
  int kids[16], nk = 0, parent = -1;
  memcpy(acc, in, sizeof acc);
  for (int m = 1; m < p; m <<= 1) {
    if (r & m) {
      parent = r ^ m;
      break;
    }
    if ((r | m) < p) kids[nk++] = r | m;
  }
  MPI_Request q[16];
  if (all)
    for (int c = 0; c < nk; ++c)
      MPI_Irecv(tmp[c], N, MPI_FLOAT, kids[c], 7, comm, &q[c]);
  for (int c = 0; c < nk; ++c) {
    if (all)
      MPI_Wait(&q[c], MPI_STATUS_IGNORE);
    else
      MPI_Recv(tmp[c], N, MPI_FLOAT, kids[c], 7, comm, MPI_STATUS_IGNORE);
    for (int i = 0; i < N; ++i)
      acc[i] += tmp[c][i];
  }
  if (parent >= 0) {
    MPI_Request s;
    MPI_Isend(acc, N, MPI_FLOAT, parent, 7, comm, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
  } else
    memcpy(out, acc, sizeof acc);
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  float in[N] = {1, 1, 1, 1}, out[N];
  binomial(in, out, 1, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  double t[2];
  for (int c = 0; c < 2; ++c) {
    binomial(in, out, 1, MPI_COMM_WORLD);
    t[c] = MPI_Wtime();
  }
  double all[3 * 1024];
  double mine[3] = {t0 * 1e6, t[0] * 1e6, t[1] * 1e6};
  MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (r == 0)
    for (int i = 0; i < p; ++i)
      printf("%d start %.3f end1 %.3f end2 %.3f\n", i, all[3 * i], all[3 * i + 1], all[3 * i + 2]);
  MPI_Finalize();
}
