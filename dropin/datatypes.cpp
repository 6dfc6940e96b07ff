// Which MPI datatypes and ops collx takes as they are.
#include <climits>
#include <cstdint>

#include "interpose.hpp"

namespace collx_mpi {

namespace {

// A predefined MPI integer type of `bytes` bytes, signed or not, as collx's type.
std::optional<collx::DataType> integer_type(std::size_t bytes, bool is_signed) {
  switch (bytes) {
    case 1:
      return is_signed ? collx::DataType::int8 : collx::DataType::uint8;
    case 4:
      return is_signed ? collx::DataType::int32 : collx::DataType::uint32;
    case 8:
      return is_signed ? collx::DataType::int64 : collx::DataType::uint64;
    default:
      return std::nullopt;  // short, 16-bit: collx has no 16-bit integers
  }
}

std::optional<collx::DataType> collx_type(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return std::nullopt;  // before the Fortran types a build may lack
  // Handles are compared one by one: in Open MPI they are addresses, in MPICH integers.
  if (t == MPI_FLOAT || t == MPI_REAL || t == MPI_REAL4) return collx::DataType::float32;
  if (t == MPI_DOUBLE || t == MPI_DOUBLE_PRECISION || t == MPI_REAL8)
    return collx::DataType::float64;
  if (t == MPI_INT8_T || t == MPI_SIGNED_CHAR || t == MPI_INTEGER1) return collx::DataType::int8;
  if (t == MPI_UINT8_T || t == MPI_UNSIGNED_CHAR) return collx::DataType::uint8;
  if (t == MPI_INT32_T || t == MPI_INTEGER4) return collx::DataType::int32;
  if (t == MPI_UINT32_T) return collx::DataType::uint32;
  if (t == MPI_INT64_T || t == MPI_INTEGER8) return collx::DataType::int64;
  if (t == MPI_UINT64_T) return collx::DataType::uint64;
  if (t == MPI_INT) return integer_type(sizeof(int), true);
  if (t == MPI_UNSIGNED) return integer_type(sizeof(unsigned), false);
  if (t == MPI_LONG) return integer_type(sizeof(long), true);
  if (t == MPI_UNSIGNED_LONG) return integer_type(sizeof(unsigned long), false);
  if (t == MPI_LONG_LONG || t == MPI_LONG_LONG_INT) return integer_type(sizeof(long long), true);
  if (t == MPI_UNSIGNED_LONG_LONG) return integer_type(sizeof(unsigned long long), false);
  if (t == MPI_INTEGER) {
    int bytes = 0;
    PMPI_Type_size(t, &bytes);
    return integer_type(static_cast<std::size_t>(bytes), true);
  }
  return std::nullopt;
}

std::optional<collx::ReduceOp> collx_op(MPI_Op op) {
  if (op == MPI_SUM) return collx::ReduceOp::sum;
  if (op == MPI_PROD) return collx::ReduceOp::prod;
  if (op == MPI_MIN) return collx::ReduceOp::min;
  if (op == MPI_MAX) return collx::ReduceOp::max;
  return std::nullopt;
}

}  // namespace

std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op) {
  const auto t = collx_type(type);
  const auto o = collx_op(op);
  if (!t || !o) return std::nullopt;
  return Reduction{*t, *o};
}

std::optional<std::size_t> contiguous_bytes(MPI_Datatype type, int count) {
  if (count < 0 || type == MPI_DATATYPE_NULL) return std::nullopt;
  int envelope[4] = {};
  int combiner = 0;
  if (PMPI_Type_get_envelope(type, &envelope[0], &envelope[1], &envelope[2], &combiner) !=
          MPI_SUCCESS ||
      combiner != MPI_COMBINER_NAMED)
    return std::nullopt;
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_size(type, &size);
  PMPI_Type_get_extent(type, &lb, &extent);
  // Pair types such as MPI_DOUBLE_INT have a gap MPI never writes.
  if (lb != 0 || extent != size || size == 0) return std::nullopt;
  return static_cast<std::size_t>(size) * static_cast<std::size_t>(count);
}

}  // namespace collx_mpi
