// collx's element types and reduction ops as the MPI library's predefined ones.
#pragma once

#include <mpi.h>

#include <string_view>

#include "collx/types.hpp"

namespace collx {

namespace detail {
// MPI's predefined handles, indexed by DataType and ReduceOp (MPI_DATATYPE_NULL, MPI_OP_NULL
// where MPI has none). They are link-time constants in every MPI collx builds on (addresses in
// Open MPI and SMPI, integers in MPICH), so the tables are filled when the library is loaded, and a
// delegated call's lookup is one load where a switch ran a dozen instructions and branches.
#define COLLX_MPI_DATATYPE(name, bytes, T, mpi) mpi,
inline const MPI_Datatype kMpiDatatypes[kDataTypeCount] = {COLLX_DATATYPE_LIST(COLLX_MPI_DATATYPE)};
#undef COLLX_MPI_DATATYPE
#define COLLX_MPI_OP(name, mpi) mpi,
inline const MPI_Op kMpiOps[kReduceOpCount] = {COLLX_REDUCE_OP_LIST(COLLX_MPI_OP)};
#undef COLLX_MPI_OP
// Which of them MPI has, known at compile time (the lists spell the null handles out; a handle
// itself is not a constant expression in Open MPI), so asking costs no load of a handle.
#define COLLX_MPI_HAS_DATATYPE(name, bytes, T, mpi) (std::string_view(#mpi) != "MPI_DATATYPE_NULL"),
inline constexpr bool kMpiHasDatatype[kDataTypeCount] = {
    COLLX_DATATYPE_LIST(COLLX_MPI_HAS_DATATYPE)};
#undef COLLX_MPI_HAS_DATATYPE
#define COLLX_MPI_HAS_OP(name, mpi) (std::string_view(#mpi) != "MPI_OP_NULL"),
inline constexpr bool kMpiHasOp[kReduceOpCount] = {COLLX_REDUCE_OP_LIST(COLLX_MPI_HAS_OP)};
#undef COLLX_MPI_HAS_OP
}  // namespace detail

// The MPI library's predefined datatype for `type`, or MPI_DATATYPE_NULL where MPI has none
// (float16, bfloat16) or `type` is not a DataType.
inline MPI_Datatype mpi_datatype(DataType type) {
  const auto i = static_cast<unsigned>(type);
  return i < static_cast<unsigned>(kDataTypeCount) ? detail::kMpiDatatypes[i] : MPI_DATATYPE_NULL;
}
// The MPI library's predefined op for `op`, or MPI_OP_NULL where MPI has none (avg) or `op` is not
// a ReduceOp.
inline MPI_Op mpi_op(ReduceOp op) {
  const auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(kReduceOpCount) ? detail::kMpiOps[i] : MPI_OP_NULL;
}
// Whether MPI has both: mpi_datatype(type) != MPI_DATATYPE_NULL && mpi_op(op) != MPI_OP_NULL,
// without a handle's load.
constexpr bool mpi_has(DataType type, ReduceOp op) {
  const auto t = static_cast<unsigned>(type);
  const auto o = static_cast<unsigned>(op);
  return t < static_cast<unsigned>(kDataTypeCount) && o < static_cast<unsigned>(kReduceOpCount) &&
         detail::kMpiHasDatatype[t] && detail::kMpiHasOp[o];
}
static_assert(mpi_has(DataType::float32, ReduceOp::sum) &&
              !mpi_has(DataType::bfloat16, ReduceOp::sum) &&
              !mpi_has(DataType::float64, ReduceOp::avg));

}  // namespace collx
