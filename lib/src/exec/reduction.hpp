// Reduction: the kernel of one (type, op) pair, bound once per collective call.
#pragma once

#include <cstddef>

#include "collx/build_config.hpp"
#include "collx/types.hpp"
#include "device_call.hpp"
#include "host_reduce.hpp"
#if COLLX_SMPI
#include <mpi.h>  // SimGrid's SMPI: smpi_execute_benched

#include "config.hpp"
#endif

namespace collx::detail {

struct Reduction {
  kernels::ReduceFn fn = nullptr;
  std::size_t element_size = 1;
  // For avg: the rank count the last combining step divides by; 0 for every other op.
  double divisor = 0;
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;
  // A call whose operands the host may not touch (device memory): reduced by its data path.
  DeviceCall* device = nullptr;

  static Reduction make(DataType type, ReduceOp op, int nranks, DeviceCall* device = nullptr) {
    return {kernels::reduce_fn(type, op),
            size_of(type),
            op == ReduceOp::avg ? static_cast<double>(nranks) : 0.0,
            type,
            op,
            device};
  }
  // Partial sums: no avg division.
  Reduction partial() const {
    Reduction r = *this;
    r.divisor = 0;
    return r;
  }
  // dst = lower op upper over n elements; `finalize` fuses the avg division into this pass
  // (the step that completes the value).
  void combine(void* dst, const void* lower, const void* upper, std::size_t n,
               bool finalize) const {
    if (device != nullptr) [[unlikely]] {
      device->reduce(dst, lower, upper, n, type, op, finalize ? divisor : 0.0);
      return;
    }
#if COLLX_SMPI
    if (const int gbps = config().smpi_reduce_gbps; gbps > 0) [[unlikely]] {
      smpi_execute_benched(static_cast<double>(n * element_size) / (gbps * 1e9));
    }
#endif
    fn(dst, lower, upper, n, finalize ? divisor : 0.0);
  }
};

}  // namespace collx::detail
