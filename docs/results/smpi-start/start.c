// How the bench's start shows in its times (docs/SCALE.md, "The cost model against the
// simulation"): collx-bench's order (one untimed call, MPI_Barrier, two calls back to back, each
// rank timing from when it leaves the barrier, the slowest rank's mean counted) with plain MPI
// point-to-point forms of three schedules: 0 recursive doubling (one exchange per step), 1 the
// binomial reduce (its receives posted at once), 2 the binomial broadcast (its sends posted at
// once, farthest child first). Prints the bench's time, the first call's longest and how far
// apart the ranks left the barrier (us); with a third argument every rank's times. Build and run
// (start.txt):
//   smpicc -O2 start.c -o start
//   smpirun -np 64 -platform smpi/platforms/fat-tree-16.xml -hostfile HOSTS \
//     --cfg=smpi/coll-selector:ompi --cfg=smpi/simulate-computation:no \
//     --cfg=smpi/host-speed:100Gf ./start ALGORITHM BYTES [v]
// HOSTS: node-0:8 .. node-7:8 one a line (8 x 8), or node-0 .. node-63 with fat-tree-64.xml
// (64 x 1). --cfg=smpi/barrier:ompi_recursivedoubling starts the ranks together.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int NB = 4;
static void rdb(float* buf, float* tmp, MPI_Comm comm) {
  int r, p; MPI_Comm_rank(comm, &r); MPI_Comm_size(comm, &p);
  for (int d = 1; d < p; d <<= 1) {
    MPI_Request q[2];
    MPI_Irecv(tmp, NB, MPI_FLOAT, r ^ d, 7, comm, &q[0]);
    MPI_Isend(buf, NB, MPI_FLOAT, r ^ d, 7, comm, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    for (int i = 0; i < NB; ++i) buf[i] += tmp[i];
  }
}
static void binomial(float* acc, float* tmp, MPI_Comm comm) {
  int r, p; MPI_Comm_rank(comm, &r); MPI_Comm_size(comm, &p);
  int kids[16], nk = 0, parent = -1;
  for (int m = 1; m < p; m <<= 1) { if (r & m) { parent = r ^ m; break; } if ((r | m) < p) kids[nk++] = r | m; }
  MPI_Request q[16];
  for (int c = 0; c < nk; ++c) MPI_Irecv(tmp + c * NB, NB, MPI_FLOAT, kids[c], 7, comm, &q[c]);
  for (int c = 0; c < nk; ++c) { MPI_Wait(&q[c], MPI_STATUS_IGNORE); for (int i = 0; i < NB; ++i) acc[i] += tmp[c*NB+i]; }
  if (parent >= 0) { MPI_Request s; MPI_Isend(acc, NB, MPI_FLOAT, parent, 7, comm, &s); MPI_Wait(&s, MPI_STATUS_IGNORE); }
}
static void bcast(float* buf, float* tmp, MPI_Comm comm) {
  (void)tmp;
  int r, p; MPI_Comm_rank(comm, &r); MPI_Comm_size(comm, &p);
  int kids[16], nk = 0, parent = -1;
  for (int m = 1; m < p; m <<= 1) { if (r & m) { parent = r ^ m; break; } if ((r | m) < p) kids[nk++] = r | m; }
  if (parent >= 0) MPI_Recv(buf, NB, MPI_FLOAT, parent, 8, comm, MPI_STATUS_IGNORE);
  MPI_Request q[16];
  for (int c = nk - 1; c >= 0; --c) MPI_Isend(buf, NB, MPI_FLOAT, kids[c], 8, comm, &q[c]);
  MPI_Waitall(nk, q, MPI_STATUSES_IGNORE);
}
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int r, p; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &p);
  int alg = atoi(argv[1]); NB = atoi(argv[2]) / 4; int verbose = argc > 3;
  float* buf = calloc(NB * 20 + 16, 4); float* tmp = calloc(NB * 20 + 16, 4);
  void (*f)(float*, float*, MPI_Comm) = alg == 0 ? rdb : alg == 1 ? binomial : bcast;
  f(buf, tmp, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime(); double t[2];
  for (int c = 0; c < 2; ++c) { f(buf, tmp, MPI_COMM_WORLD); t[c] = MPI_Wtime(); }
  double all[3 * 1024]; double mine[3] = {t0 * 1e6, t[0] * 1e6, t[1] * 1e6};
  MPI_Gather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (r == 0) {
    double mx = 0, smin = 1e30, smax = 0, e1 = 0;
    for (int i = 0; i < p; ++i) {
      if (verbose) printf("%d start %.3f end1 %.3f end2 %.3f\n", i, all[3*i], all[3*i+1], all[3*i+2]);
      double m = (all[3*i+2] - all[3*i]) / 2; if (m > mx) mx = m;
      if (all[3*i] < smin) smin = all[3*i]; if (all[3*i] > smax) smax = all[3*i];
      if (all[3*i+1]-all[3*i] > e1) e1 = all[3*i+1]-all[3*i];
    }
    printf("bench %.3f us  first-call-max %.3f  start skew %.3f\n", mx, e1, smax - smin);
  }
  MPI_Finalize();
}
