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
    case DataType::int8:
      return MPI_INT8_T;
    case DataType::uint8:
      return MPI_UINT8_T;
    case DataType::int32:
      return MPI_INT32_T;
    case DataType::uint32:
      return MPI_UINT32_T;
    case DataType::int64:
      return MPI_INT64_T;
    case DataType::uint64:
      return MPI_UINT64_T;
    case DataType::float32:
      return MPI_FLOAT;
    case DataType::float64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}
// The MPI library's predefined op for `op`, or MPI_OP_NULL where MPI has none (avg).
inline MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    default:
      return MPI_OP_NULL;
  }
}

}  // namespace collx
