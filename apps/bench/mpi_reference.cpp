#include "mpi_reference.hpp"

#include "collx/mpi_types.hpp"

#include <cstdint>
#include <stdexcept>
#include <type_traits>

namespace collx::bench {

namespace {

MPI_Datatype half_type = MPI_DATATYPE_NULL;
MPI_Op user_ops[2][kReduceOpCount] = {};  // [float16 / bfloat16][op]
bool user_ops_made = false;

template <class H>
H combine(H a, H b, ReduceOp op) {
  const float x = static_cast<float>(a);
  const float y = static_cast<float>(b);
  switch (op) {
    case ReduceOp::prod:
      return H(x * y);
    case ReduceOp::min:
      return H(y < x ? y : x);
    case ReduceOp::max:
      return H(y > x ? y : x);
    default:
      return H(x + y);
  }
}

template <class H, ReduceOp Op>
void user_function(void* in, void* inout, int* len, MPI_Datatype*) {
  const H* a = static_cast<const H*>(in);
  H* b = static_cast<H*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = combine(a[i], b[i], Op);
}

template <class H>
void make_ops(MPI_Op* ops) {
  MPI_Op_create(&user_function<H, ReduceOp::sum>, 1, &ops[static_cast<int>(ReduceOp::sum)]);
  MPI_Op_create(&user_function<H, ReduceOp::prod>, 1, &ops[static_cast<int>(ReduceOp::prod)]);
  MPI_Op_create(&user_function<H, ReduceOp::min>, 1, &ops[static_cast<int>(ReduceOp::min)]);
  MPI_Op_create(&user_function<H, ReduceOp::max>, 1, &ops[static_cast<int>(ReduceOp::max)]);
  ops[static_cast<int>(ReduceOp::avg)] = ops[static_cast<int>(ReduceOp::sum)];
}

void ensure_user_ops() {
  if (user_ops_made) return;
  MPI_Type_contiguous(2, MPI_BYTE, &half_type);
  MPI_Type_commit(&half_type);
  make_ops<float16>(user_ops[0]);
  make_ops<bfloat16>(user_ops[1]);
  user_ops_made = true;
}

// Each of `count` elements divided by nranks, in float (double for float64) as an MPI user's own
// loop would, rounded back to T.
template <class T>
void divide_each(void* buffer, std::size_t count, int nranks) {
  using Wide = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* p = static_cast<T*>(buffer);
  const Wide divisor = static_cast<Wide>(nranks);
  for (std::size_t i = 0; i < count; ++i)
    p[i] = T(static_cast<Wide>(p[i]) / divisor);
}

}  // namespace

MPI_Datatype mpi_type(DataType type) {
  if (type == DataType::float16 || type == DataType::bfloat16) {
    ensure_user_ops();
    return half_type;
  }
  const MPI_Datatype predefined = collx::mpi_datatype(type);
  if (predefined == MPI_DATATYPE_NULL) throw std::invalid_argument("no MPI type");
  return predefined;
}

MPI_Op mpi_op(DataType type, ReduceOp op) {
  if (type == DataType::float16 || type == DataType::bfloat16) {
    ensure_user_ops();
    return user_ops[type == DataType::float16 ? 0 : 1][static_cast<int>(op)];
  }
  // avg: a sum, divided afterwards (divide_each).
  const MPI_Op predefined = collx::mpi_op(op == ReduceOp::avg ? ReduceOp::sum : op);
  if (predefined == MPI_OP_NULL) throw std::invalid_argument("no MPI op");
  return predefined;
}

void mpi_finish_average(void* buffer, DataType type, std::size_t count, int nranks) {
  switch (type) {
    case DataType::float32:
      return divide_each<float>(buffer, count, nranks);
    case DataType::float64:
      return divide_each<double>(buffer, count, nranks);
    case DataType::float16:
      return divide_each<float16>(buffer, count, nranks);
    case DataType::bfloat16:
      return divide_each<bfloat16>(buffer, count, nranks);
    default:
      return;  // avg is not defined for the integer types
  }
}

void free_mpi_reference() {
  if (!user_ops_made) return;
  for (auto& row : user_ops) {
    for (int o = 0; o < kReduceOpCount; ++o) {
      if (o == static_cast<int>(ReduceOp::avg)) continue;  // shares the sum op
      if (row[o] != MPI_OP_NULL) MPI_Op_free(&row[o]);
    }
  }
  MPI_Type_free(&half_type);
  user_ops_made = false;
}

}  // namespace collx::bench
