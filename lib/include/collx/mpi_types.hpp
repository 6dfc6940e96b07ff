// collx's element types and reduction ops as the MPI library's predefined ones.
#pragma once

#include <mpi.h>

#include "collx/types.hpp"

namespace collx {

// The MPI library's predefined datatype for `type`, or MPI_DATATYPE_NULL where MPI has none
// (float16, bfloat16).
MPI_Datatype mpi_datatype(DataType type);
// The MPI library's predefined op for `op`, or MPI_OP_NULL where MPI has none (avg).
MPI_Op mpi_op(ReduceOp op);

}  // namespace collx
