// Host reduction kernels: dst[i] = a[i] op b[i], vectorised for every type/op pair.
//
// One function per (type, op) in a table chosen once per process from the CPU's instruction
// sets, so a call costs one indirect jump and its loop has no per-element dispatch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "collx/types.hpp"

namespace collx::kernels {

// dst[i] = a[i] op b[i] for i < n. dst may be a or b (the same address), never a partial
// overlap. For ReduceOp::avg, divisor == 0 gives the plain sum (an intermediate step) and
// divisor > 0 gives (a + b) / divisor, the last step with the mean fused in. float16 and
// bfloat16 are computed in float32 and rounded once per element.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, std::size_t n, double divisor);

enum class Isa { generic, avx2, avx512 };
std::string_view to_string(Isa isa);

// dst <- src (n bytes, no overlap) with non-temporal stores: for large outputs that will not be
// read again soon, it writes memory without first reading each destination line into the
// cache, which is faster than memcpy for large outputs (docs/results/arena-streaming-stores.csv).
// Falls back to memcpy where the instruction set has no streaming stores.
using CopyFn = void (*)(void* dst, const void* src, std::size_t n);

struct KernelTable {
  ReduceFn reduce[kDataTypeCount][kReduceOpCount];
  CopyFn copy_streaming;
  CopyFn copy;  // copy() below
};

// The table built for `isa`, or nullptr if this CPU or this build does not have it.
const KernelTable* kernel_table(Isa isa);
// The best table for this CPU (chosen once).
Isa active_isa();
const KernelTable& active_kernels();

inline ReduceFn reduce_fn(DataType type, ReduceOp op) {
  return active_kernels().reduce[static_cast<int>(type)][static_cast<int>(op)];
}

inline void copy_streaming(void* dst, const void* src, std::size_t n) {
  active_kernels().copy_streaming(dst, src, n);
}

// dst <- src (n bytes, no overlap), for every copy collx makes between a caller's buffer and
// the arena or scratch. glibc's memcpy moves the sizes from a few KiB to about the second-level
// cache's with `rep movsb`, which some CPUs run an order of magnitude slower when the
// destination is not 64-byte aligned against the source (AMD Zen 3; docs/PERFORMANCE.md, "Copies
// and alignment"), and malloc aligns a caller's buffer to 16 bytes only. In that window the copy
// is the vector unit's loads and stores, whose speed does not depend on alignment, where the two
// addresses are not aligned alike; below it and above it, and where they are, glibc's memcpy
// (its small copies, its streaming stores for the largest, and `rep movsb` where it is fast).
constexpr std::size_t kVectorCopyMinBytes = std::size_t{2} << 10;
constexpr std::size_t kVectorCopyMaxBytes = std::size_t{4} << 20;
inline bool aligned_alike(const void* dst, const void* src) {
  return ((reinterpret_cast<std::uintptr_t>(dst) ^ reinterpret_cast<std::uintptr_t>(src)) & 63) ==
         0;
}
inline void copy(void* dst, const void* src, std::size_t n) {
  if (n < kVectorCopyMinBytes || n >= kVectorCopyMaxBytes || aligned_alike(dst, src)) {
    std::memcpy(dst, src, n);
  } else {
    active_kernels().copy(dst, src, n);
  }
}

// Convenience: dispatch and run. The pair must be supported (is_supported(type, op)).
inline void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                   ReduceOp op, double divisor = 0.0) {
  reduce_fn(type, op)(dst, a, b, n, divisor);
}

}  // namespace collx::kernels
