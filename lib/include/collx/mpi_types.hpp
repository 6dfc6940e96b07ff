// collx's element types and reduction ops as the MPI library's predefined ones.
#pragma once

#include <mpi.h>

#include "collx/types.hpp"

namespace collx {

// The MPI library's predefined datatype for `type`, or MPI_DATATYPE_NULL where MPI has none
// (float16, bfloat16). Inline, as a switch: a delegated call asks, and Open MPI's handles are
// addresses that a table would load on every call.
inline MPI_Datatype mpi_datatype(DataType type) {
  switch (type) {
#define COLLX_MPI_DATATYPE(name, bytes, T, mpi) \
  case DataType::name:                          \
    return mpi;
    COLLX_DATATYPE_LIST(COLLX_MPI_DATATYPE)
#undef COLLX_MPI_DATATYPE
  }
  return MPI_DATATYPE_NULL;
}
// The MPI library's predefined op for `op`, or MPI_OP_NULL where MPI has none (avg).
inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
#define COLLX_MPI_OP(name, mpi) \
  case ReduceOp::name:          \
    return mpi;
    COLLX_REDUCE_OP_LIST(COLLX_MPI_OP)
#undef COLLX_MPI_OP
  }
  return MPI_OP_NULL;
}

}  // namespace collx
