// The collectives' algorithm tasks, callable on any transport (the library's entry points
// and the in-process simulator both run these).
#pragma once

#include <cstddef>

#include "collx/algorithm.hpp"
#include "operation.hpp"
#include "reduction.hpp"

namespace collx::detail {

// Phase (tag offset within an operation) reserved for COLLX_CHECK's signature comparison.
inline constexpr int kCheckPhase = kPhasesPerOp - 1;

struct AllreduceArgs {
  const std::byte* send = nullptr;  // may equal recv (in place)
  std::byte* recv = nullptr;
  std::size_t count = 0;
  Reduction reduction;
  int phase = 0;  // uses phase and phase + 1
};
Task allreduce_task(Operation& op, AllreduceArgs args, Algorithm algorithm);
Task allreduce_ring(Operation& op, AllreduceArgs args);
Task allreduce_recursive_doubling(Operation& op, AllreduceArgs args);
Task allreduce_rabenseifner(Operation& op, AllreduceArgs args);

}  // namespace collx::detail
