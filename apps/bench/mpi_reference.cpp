#include "mpi_reference.hpp"

#include "collx/build_config.hpp"
#include "collx/mpi_types.hpp"

#include <cstdint>
#if COLLX_SMPI
#include <simgrid/host.h>  // sg_host_self, sg_host_get_speed
#endif
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

// The charged ops (charge_mpi_reductions): [type][op], made for the native types (not the two
// 16-bit types, whose ops above are user-defined already).
MPI_Op charged_ops[kDataTypeCount][kReduceOpCount] = {};
bool charging = false;
double charged_bytes_per_second = 0;

bool has_charged_op(DataType type) {
  return type != DataType::float16 && type != DataType::bfloat16;
}

template <class T, ReduceOp Op>
void charged_function(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) {
    if constexpr (Op == ReduceOp::sum) {
      b[i] = static_cast<T>(a[i] + b[i]);
    } else if constexpr (Op == ReduceOp::prod) {
      b[i] = static_cast<T>(a[i] * b[i]);
    } else if constexpr (Op == ReduceOp::min) {
      b[i] = a[i] < b[i] ? a[i] : b[i];
    } else {
      b[i] = a[i] > b[i] ? a[i] : b[i];
    }
  }
#if COLLX_SMPI
  // Inside the MPI call SMPI's benchmarking of the program is off already: the flops alone, at
  // this host's speed (smpi_execute_benched would stop that timer a second time).
  const double seconds = static_cast<double>(n) * sizeof(T) / charged_bytes_per_second;
  smpi_execute_flops(seconds * sg_host_get_speed(sg_host_self()));
#endif
}

template <class T>
void make_charged(DataType type) {
  MPI_Op* ops = charged_ops[static_cast<int>(type)];
  MPI_Op_create(&charged_function<T, ReduceOp::sum>, 1, &ops[static_cast<int>(ReduceOp::sum)]);
  MPI_Op_create(&charged_function<T, ReduceOp::prod>, 1, &ops[static_cast<int>(ReduceOp::prod)]);
  MPI_Op_create(&charged_function<T, ReduceOp::min>, 1, &ops[static_cast<int>(ReduceOp::min)]);
  MPI_Op_create(&charged_function<T, ReduceOp::max>, 1, &ops[static_cast<int>(ReduceOp::max)]);
  ops[static_cast<int>(ReduceOp::avg)] = ops[static_cast<int>(ReduceOp::sum)];
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

bool charge_mpi_reductions(int gbps) {
  if (!COLLX_SMPI || gbps <= 0) return false;
  charged_bytes_per_second = gbps * 1e9;
  if (charging) return true;
  make_charged<std::int8_t>(DataType::int8);
  make_charged<std::uint8_t>(DataType::uint8);
  make_charged<std::int32_t>(DataType::int32);
  make_charged<std::uint32_t>(DataType::uint32);
  make_charged<std::int64_t>(DataType::int64);
  make_charged<std::uint64_t>(DataType::uint64);
  make_charged<float>(DataType::float32);
  make_charged<double>(DataType::float64);
  charging = true;
  return true;
}

MPI_Op mpi_op(DataType type, ReduceOp op) {
  if (charging && has_charged_op(type)) {
    return charged_ops[static_cast<int>(type)][static_cast<int>(op)];
  }
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
  if (charging) {
    for (int t = 0; t < kDataTypeCount; ++t) {
      if (!has_charged_op(static_cast<DataType>(t))) continue;
      for (int o = 0; o < kReduceOpCount; ++o) {
        if (o == static_cast<int>(ReduceOp::avg)) continue;  // shares the sum op
        MPI_Op_free(&charged_ops[t][o]);
      }
    }
    charging = false;
  }
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
