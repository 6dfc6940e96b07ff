// The MPI library's own collectives with collx's types and ops, for the `mpi` rows.
#pragma once

#include <mpi.h>

#include "collx/types.hpp"

namespace collx::bench {

// MPI datatype for a collx type. float16 and bfloat16 have none in MPI 3.1: they travel as a
// committed 2-byte contiguous type, reduced by user-defined ops (see mpi_op).
MPI_Datatype mpi_type(DataType type);

// MPI op for (type, op). Built-in ops for the native types; user-defined ops computing in
// float32 for the 16-bit types. avg has no MPI op: it maps to sum, and the caller divides
// (what an MPI user writes), see mpi_finish_average.
MPI_Op mpi_op(DataType type, ReduceOp op);

// SimGrid's SMPI builds (docs/SCALE.md, "Computation"): SMPI applies a predefined op inside its
// own collectives, where it does not time the program, so their reductions take no simulated
// time in any view. After this call, mpi_op gives the mpi rows user-defined commutative ops (the
// same selection of SMPI's algorithms) that reduce element by element and take b / `gbps` GB/s
// of simulated time for b input bytes, as collx's own reductions do under
// COLLX_SMPI_REDUCE_GBPS: both sides pay for their reductions alike. The MPI's copies stay free.
// Native types only; false where the build is not SMPI's.
bool charge_mpi_reductions(int gbps);

// After an MPI sum standing in for avg: divide `count` elements in place by `nranks`.
void mpi_finish_average(void* buffer, DataType type, std::size_t count, int nranks);

// Releases the user-defined types and ops (before MPI_Finalize).
void free_mpi_reference();

}  // namespace collx::bench
