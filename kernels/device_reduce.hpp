// Reductions of GPU memory by CUDA kernels: dst[i] = a[i] op b[i], or over up to 8 sources.
//
// Callable from any C++ (no CUDA header needed): a stream is passed as `void*` (a cudaStream_t;
// nullptr is the legacy default stream). The functions exist when collx is built with CUDA
// (COLLX_HAVE_CUDA); launch_config_for() is plain arithmetic and always available.
//
// Semantics are the host kernels' (host_reduce.hpp, element operators in reduce_ops.hpp):
// integer sum/prod wrap, min/max select like x86, float16/bfloat16 computed in float32 and
// rounded once, avg = sum whose last step divides by `divisor`. Results equal the host kernels
// bit for bit, except that an arithmetic result that is NaN may carry another NaN payload.
#pragma once

#include <cstddef>
#include <span>

#include "collx/types.hpp"

namespace collx::kernels {

// The most sources one device_reduce call takes (a kernel parameter array of this size).
inline constexpr int kMaxDeviceReduceSources = 8;

// dst[i] = a[i] op b[i] for i < n, enqueued on `stream` on the current CUDA device; returns after
// the launch (asynchronous). All pointers are device-accessible memory (device or managed) of
// that device. dst may be a or b (in place), never a partial overlap. For ReduceOp::avg,
// divisor == 0 gives the plain sum (an intermediate step) and divisor > 0 gives (a + b) / divisor.
// Any alignment works: 16-byte vector accesses are used when dst, a and b are equally aligned
// modulo 16, element-sized accesses otherwise.
// Throws collx::Error: invalid_argument (a null pointer with n > 0, a pointer not aligned to its
// element size, partial overlap), unsupported (avg of an integer type), cuda (the launch failed,
// with the CUDA error string).
void device_reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                   ReduceOp op, double divisor = 0.0, void* stream = nullptr);

// dst[i] = sources[0][i] op sources[1][i] op ... op sources[k-1][i], then the avg divide when
// divisor > 0, in one pass (each byte read once and written once). 2 <= k <=
// kMaxDeviceReduceSources. float16/bfloat16 stay in float32 across all k sources and are rounded
// once, so for k > 2 the result can differ from (and is closer than) a chain of 2-source calls;
// for every other type it equals that chain bit for bit. dst may be one of the sources.
void device_reduce(void* dst, std::span<const void* const> sources, std::size_t n, DataType type,
                   ReduceOp op, double divisor = 0.0, void* stream = nullptr);

// ---- launch configuration ----
inline constexpr unsigned kReduceThreadsPerBlock = 512;
// Resident blocks per SM that the kernels are compiled for (__launch_bounds__: <= 64 registers
// per thread, so 1024 threads per SM; each keeps 8-16 loads of 16 bytes in flight, far more than
// the bytes in flight that HBM needs to reach its bandwidth).
inline constexpr unsigned kReduceBlocksPerSm = 2;

struct LaunchConfig {
  unsigned blocks = 1;
  unsigned threads = kReduceThreadsPerBlock;
  friend bool operator==(const LaunchConfig&, const LaunchConfig&) = default;
};

// Grid of a grid-stride loop over `work_items` (one per thread per round): as many blocks as the
// work needs, so that a small reduction is spread over many SMs, and at most as many as are
// resident at once on `sm_count` SMs, so that a large one runs in a single wave; at least one.
constexpr LaunchConfig launch_config_for(std::size_t work_items, int sm_count,
                                         unsigned threads_per_block = kReduceThreadsPerBlock,
                                         unsigned blocks_per_sm = kReduceBlocksPerSm) {
  const std::size_t resident =
      static_cast<std::size_t>(sm_count > 0 ? sm_count : 1) * blocks_per_sm;
  const std::size_t needed = (work_items + threads_per_block - 1) / threads_per_block;
  const std::size_t blocks = needed < 1 ? 1 : (needed < resident ? needed : resident);
  return LaunchConfig{static_cast<unsigned>(blocks), threads_per_block};
}

}  // namespace collx::kernels
