// Why SMPI's Open MPI selection reduced small buffers faster than collx's binomial tree
// (docs/SCALE.md, "Small reduce"): the same binomial tree, 4 floats to rank 0, with the
// receives from the children posted one at a time (seq: MPICH's binomial reduce, and collx's
// before 0e060e6) or all before the first is waited on (all), beside MPI_Reduce under the
// selector given; one call, then two calls back to back after a barrier (collx-bench's -n 2),
// the slowest rank's time per call. Build and run (results.txt):
//   smpicc -O2 receive_order.c -o receive_order
//   smpirun -np 16 -platform smpi/platforms/fat-tree-16.xml -hostfile HOSTS \
//     --cfg=smpi/coll-selector:ompi --cfg=smpi/simulate-computation:no \
//     --cfg=smpi/host-speed:100Gf --cfg=smpi/bcast:binomial_tree ./receive_order
// HOSTS: node-0 .. node-15 one a line (16 x 1), or node-0:8 and node-1:8 (16 x 8); at 64 ranks
// fat-tree-64.xml with node-0 .. node-63 (64 x 1), or fat-tree-16.xml with node-0:8 ..
// node-7:8 (64 x 8).
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
  const char* names[3] = {"seq", "all", "mpi"};
  for (int calls = 1; calls <= 2; ++calls)
    for (int v = 0; v < 3; ++v) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (int c = 0; c < calls; ++c) {
        if (v == 2)
          MPI_Reduce(in, out, N, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        else
          binomial(in, out, v, MPI_COMM_WORLD);
      }
      double t = (MPI_Wtime() - t0) / calls, mx;
      MPI_Reduce(&t, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (r == 0) printf("calls %d %s %.3f us (out %g)\n", calls, names[v], mx * 1e6, out[0]);
    }
  MPI_Finalize();
}
