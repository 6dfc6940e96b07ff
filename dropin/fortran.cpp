// Fortran entry points (mpif.h and `use mpi`) for an MPI whose Fortran bindings call the PMPI_
// functions directly, as Open MPI's do (MPICH's call the C MPI_ functions, which are
// intercepted already): each converts the handles and MPI_IN_PLACE and calls the C function
// above, so Fortran calls are decided, counted and run as C calls are. gfortran's names
// (mpi_allreduce_), with the other usual manglings as aliases.
#include <mpi.h>

extern "C" {

// Open MPI's Fortran MPI_IN_PLACE and MPI_BOTTOM: addresses of common blocks of its own.
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;

namespace {

// A buffer argument: MPI_BOTTOM as C has it.
void* c_bottom(void* fortran) {
  return fortran == static_cast<void*>(&mpi_fortran_bottom_) ? MPI_BOTTOM : fortran;
}

// A buffer argument that may be MPI_IN_PLACE.
void* c_buffer(void* fortran) {
  return fortran == static_cast<void*>(&mpi_fortran_in_place_) ? MPI_IN_PLACE : c_bottom(fortran);
}

}  // namespace

#define COLLX_FORTRAN_ALIASES(lower, upper)                        \
  decltype(lower##_) lower __attribute__((alias(#lower "_")));     \
  decltype(lower##_) lower##__ __attribute__((alias(#lower "_"))); \
  decltype(lower##_) upper __attribute__((alias(#lower "_")));

void mpi_allreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* op,
                    MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allreduce(c_buffer(sendbuf), c_bottom(recvbuf), *count, MPI_Type_f2c(*type),
                        MPI_Op_f2c(*op), MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_allreduce, MPI_ALLREDUCE)

void mpi_reduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* type, MPI_Fint* op,
                 MPI_Fint* root, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce(c_buffer(sendbuf), c_bottom(recvbuf), *count, MPI_Type_f2c(*type),
                     MPI_Op_f2c(*op), *root, MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_reduce, MPI_REDUCE)

void mpi_bcast_(void* buffer, MPI_Fint* count, MPI_Fint* type, MPI_Fint* root, MPI_Fint* comm,
                MPI_Fint* ierr) {
  *ierr = MPI_Bcast(c_bottom(buffer), *count, MPI_Type_f2c(*type), *root, MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_bcast, MPI_BCAST)

void mpi_allgather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                    MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allgather(c_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), c_bottom(recvbuf),
                        *recvcount, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_allgather, MPI_ALLGATHER)

void mpi_reduce_scatter_block_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount, MPI_Fint* type,
                               MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter_block(c_buffer(sendbuf), c_bottom(recvbuf), *recvcount,
                                   MPI_Type_f2c(*type), MPI_Op_f2c(*op), MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)

// MPI_Fint is int in both MPIs with gfortran's default INTEGER: the counts pass as they are.
static_assert(sizeof(MPI_Fint) == sizeof(int));
void mpi_reduce_scatter_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* type,
                         MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter(c_buffer(sendbuf), c_bottom(recvbuf), recvcounts, MPI_Type_f2c(*type),
                             MPI_Op_f2c(*op), MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_reduce_scatter, MPI_REDUCE_SCATTER)

void mpi_gather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                 MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                 MPI_Fint* ierr) {
  *ierr = MPI_Gather(c_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), c_bottom(recvbuf),
                     *recvcount, MPI_Type_f2c(*recvtype), *root, MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_gather, MPI_GATHER)

void mpi_scatter_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                  MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                  MPI_Fint* ierr) {
  *ierr = MPI_Scatter(c_bottom(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), c_buffer(recvbuf),
                      *recvcount, MPI_Type_f2c(*recvtype), *root, MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_scatter, MPI_SCATTER)

void mpi_alltoall_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                   MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Alltoall(c_buffer(sendbuf), *sendcount, MPI_Type_f2c(*sendtype), c_bottom(recvbuf),
                       *recvcount, MPI_Type_f2c(*recvtype), MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_alltoall, MPI_ALLTOALL)

void mpi_barrier_(MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Barrier(MPI_Comm_f2c(*comm));
}
COLLX_FORTRAN_ALIASES(mpi_barrier, MPI_BARRIER)

// Open MPI's Fortran MPI_INIT and MPI_INIT_THREAD call PMPI_Init(_thread): the ranks' agreement
// on collx (interpose.hpp) needs ours.
void mpi_init_(MPI_Fint* ierr) {
  *ierr = MPI_Init(nullptr, nullptr);
}
COLLX_FORTRAN_ALIASES(mpi_init, MPI_INIT)

void mpi_init_thread_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  int level = 0;
  *ierr = MPI_Init_thread(nullptr, nullptr, *required, &level);
  *provided = level;
}
COLLX_FORTRAN_ALIASES(mpi_init_thread, MPI_INIT_THREAD)

// Open MPI's Fortran MPI_FINALIZE calls PMPI_Finalize: collx's state and statistics need ours.
void mpi_finalize_(MPI_Fint* ierr) {
  *ierr = MPI_Finalize();
}
COLLX_FORTRAN_ALIASES(mpi_finalize, MPI_FINALIZE)

}  // extern "C"
