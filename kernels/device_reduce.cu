// CUDA reduction kernels: dst = s0 op s1 (op s2 ...) for every type/op pair, in one pass.
//
// One kernel template, instantiated for every (element format, operator) that the descriptor in
// reduce_ops.hpp produces and for two access widths:
//   - 16-byte packs when dst and every source have the same address modulo 16 (the usual case):
//     the few elements before the first 16-byte boundary (head) and after the last whole pack
//     (tail) are reduced one by one by block 0 and by the last block;
//   - element-sized accesses otherwise (sources that are misaligned relative to each other).
// Each thread runs a grid-stride loop; a round loads kUnroll packs of every source before it
// combines any of them, so 2 * kUnroll independent 16-byte loads per thread are in flight.
// float16/bfloat16 are widened to float32, combined across all sources and rounded once.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "collx/error.hpp"
#include "device_reduce.hpp"
#include "device_runtime.hpp"
#include "reduce_ops.hpp"

namespace collx::kernels {
namespace {

constexpr int kVectorBytes = 16;

// Independent packs per thread per round of the two-source loop: 4 x 16 bytes per source in the
// vector path, 8 elements per source in the narrower element path (4 for 8-byte elements). The
// float64 divide of avg is a long instruction sequence of its own: 2, so that nothing spills.
// (ptxas -v reports no spills for any instantiation at 64 registers.)
template <class Op, int kAccessBytes>
constexpr int kUnrollOf = kAccessBytes >= 8 ? 4 : 8;
template <int kAccessBytes>
constexpr int kUnrollOf<ops::SumThenDivide<double>, kAccessBytes> = 2;

// kBytes of elements of type T. Packs of 4 bytes or more live in 32-bit words, the form in which
// they are loaded, and elements are taken out and put back with shifts: unpacking a 16-byte pack
// of bytes into 16 registers would need 8x the registers for the loads kept in flight.
template <class T, int kBytes, bool kInWords = (kBytes >= 4)>
struct Pack {
  static constexpr int kCount = kBytes / static_cast<int>(sizeof(T));
  static constexpr int kWords = kBytes / 4;
  std::uint32_t w[kWords];

  __device__ __forceinline__ T get(int e) const {
    T value;
    if constexpr (sizeof(T) == 8) {
      const std::uint64_t bits = w[2 * e] | (static_cast<std::uint64_t>(w[2 * e + 1]) << 32);
      memcpy(&value, &bits, sizeof value);
    } else if constexpr (sizeof(T) == 4) {
      memcpy(&value, &w[e], sizeof value);
    } else {
      constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
      using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>;
      const auto bits = static_cast<Bits>(w[e / kPerWord] >> (8 * sizeof(T) * (e % kPerWord)));
      memcpy(&value, &bits, sizeof value);
    }
    return value;
  }
  // Sets element e of a pack whose element e is still zero (packs are built up from {}).
  __device__ __forceinline__ void put(int e, T value) {
    if constexpr (sizeof(T) == 8) {
      std::uint64_t bits;
      memcpy(&bits, &value, sizeof bits);
      w[2 * e] = static_cast<std::uint32_t>(bits);
      w[2 * e + 1] = static_cast<std::uint32_t>(bits >> 32);
    } else if constexpr (sizeof(T) == 4) {
      memcpy(&w[e], &value, sizeof value);
    } else {
      constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
      using Bits = std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>;
      Bits bits;
      memcpy(&bits, &value, sizeof bits);
      w[e / kPerWord] |= static_cast<std::uint32_t>(bits) << (8 * sizeof(T) * (e % kPerWord));
    }
  }

  __device__ __forceinline__ static Pack load(const void* base, std::size_t index) {
    Pack pack;
    if constexpr (kBytes == 16) {
      const uint4 word = static_cast<const uint4*>(base)[index];
      pack.w[0] = word.x;
      pack.w[1] = word.y;
      pack.w[2] = word.z;
      pack.w[3] = word.w;
    } else if constexpr (kBytes == 8) {
      const uint2 word = static_cast<const uint2*>(base)[index];
      pack.w[0] = word.x;
      pack.w[1] = word.y;
    } else {
      pack.w[0] = static_cast<const std::uint32_t*>(base)[index];
    }
    return pack;
  }
  __device__ __forceinline__ void store(void* base, std::size_t index) const {
    if constexpr (kBytes == 16) {
      static_cast<uint4*>(base)[index] = make_uint4(w[0], w[1], w[2], w[3]);
    } else if constexpr (kBytes == 8) {
      static_cast<uint2*>(base)[index] = make_uint2(w[0], w[1]);
    } else {
      static_cast<std::uint32_t*>(base)[index] = w[0];
    }
  }
};

// A single 1- or 2-byte element (the element-sized path of those types).
template <class T, int kBytes>
struct Pack<T, kBytes, false> {
  static_assert(kBytes == sizeof(T));
  static constexpr int kCount = 1;
  T v;
  __device__ __forceinline__ T get(int) const { return v; }
  __device__ __forceinline__ void put(int, T value) { v = value; }
  __device__ __forceinline__ static Pack load(const void* base, std::size_t index) {
    return Pack{static_cast<const T*>(base)[index]};
  }
  __device__ __forceinline__ void store(void* base, std::size_t index) const {
    static_cast<T*>(base)[index] = v;
  }
};

// Two 16-bit floats per 32-bit word, converted as a pair: one packed conversion instruction
// (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32) rounds both. Arithmetic formats only: min and max
// select bits and never convert back. Element 0 is the low half, as in Pack::get.
template <class Format>
struct PairCodec {
  static constexpr bool kEnabled = false;
};
template <>
struct PairCodec<ops::Float16Arith> {
  static constexpr bool kEnabled = true;
  __device__ __forceinline__ static float2 load(std::uint32_t word) {
    __half2 pair;
    memcpy(&pair, &word, sizeof word);
    return __half22float2(pair);
  }
  __device__ __forceinline__ static std::uint32_t store(float low, float high) {
    const __half2 pair = __floats2half2_rn(low, high);
    std::uint32_t word;
    memcpy(&word, &pair, sizeof word);
    return word;
  }
};
template <>
struct PairCodec<ops::BFloat16Arith> {
  static constexpr bool kEnabled = true;
  __device__ __forceinline__ static float2 load(std::uint32_t word) {
    return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
  }
  __device__ __forceinline__ static std::uint32_t store(float low, float high) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    std::uint32_t word;
    memcpy(&word, &pair, sizeof word);
    return word;
  }
};

// Source pointers as a kernel parameter (by value: no device-side allocation for them). Always
// indexed with compile-time indices (loops over sources are unrolled), so the array stays in the
// parameter space instead of being copied to local memory.
struct Sources {
  const void* ptr[kMaxDeviceReduceSources];
};

// Element i of the result, one element (the head and tail of the vector path).
template <class Format, class Op>
__device__ __forceinline__ void reduce_single(void* dst, const Sources& sources, int count,
                                              std::size_t i, const Op& op) {
  using T = typename Format::Storage;
  auto value = op(Format::load(static_cast<const T*>(sources.ptr[0])[i]),
                  Format::load(static_cast<const T*>(sources.ptr[1])[i]));
#pragma unroll
  for (int k = 2; k < kMaxDeviceReduceSources; ++k) {
    if (k >= count) break;
    value = op(value, Format::load(static_cast<const T*>(sources.ptr[k])[i]));
  }
  static_cast<T*>(dst)[i] = Format::store(op.finish(value));
}

// Two sources (received op local, the step of every ring): one round of a thread, packs
// first + u * stride for u < kUnroll of the pack arrays that start `offset` elements into dst and
// the sources. Every load is issued before any is used: 2 * kUnroll loads in flight. kGuarded:
// the last, partial round, in which packs at or beyond `packs` are skipped.
template <class Format, class Op, int kBytes, bool kGuarded>
__device__ __forceinline__ void reduce_round_2(void* dst, const Sources& sources,
                                               std::size_t offset, std::size_t first,
                                               std::size_t stride, std::size_t packs,
                                               const Op& op) {
  using T = typename Format::Storage;
  using P = Pack<T, kBytes>;
  constexpr int kUnroll = kUnrollOf<Op, kBytes>;
  const auto in_range = [&](int u) { return !kGuarded || first + u * stride < packs; };
  const T* const a = static_cast<const T*>(sources.ptr[0]) + offset;
  const T* const b = static_cast<const T*>(sources.ptr[1]) + offset;

  P x[kUnroll] = {};
  P y[kUnroll] = {};
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    if (in_range(u)) {
      x[u] = P::load(a, first + u * stride);
      y[u] = P::load(b, first + u * stride);
    }
  }
  T* const out = static_cast<T*>(dst) + offset;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    P result = {};
    if constexpr (PairCodec<Format>::kEnabled && kBytes >= 4) {
      using Codec = PairCodec<Format>;
#pragma unroll
      for (int w = 0; w < P::kWords; ++w) {
        const float2 p = Codec::load(x[u].w[w]);
        const float2 q = Codec::load(y[u].w[w]);
        result.w[w] = Codec::store(op.finish(op(p.x, q.x)), op.finish(op(p.y, q.y)));
      }
    } else {
#pragma unroll
      for (int e = 0; e < P::kCount; ++e) {
        result.put(
            e, Format::store(op.finish(op(Format::load(x[u].get(e)), Format::load(y[u].get(e))))));
      }
    }
    if (in_range(u)) result.store(out, first + u * stride);
  }
}

// Three or more sources: pack `index`, with the loads of all sources in flight together. Each
// element is folded in the format's Value (float32 for float16/bfloat16) and rounded once.
template <class Format, class Op, int kBytes>
__device__ __forceinline__ void reduce_pack_n(void* dst, const Sources& sources, int count,
                                              std::size_t offset, std::size_t index, const Op& op) {
  using T = typename Format::Storage;
  using P = Pack<T, kBytes>;
  P in[kMaxDeviceReduceSources] = {};
#pragma unroll
  for (int k = 0; k < kMaxDeviceReduceSources; ++k) {
    if (k < count) in[k] = P::load(static_cast<const T*>(sources.ptr[k]) + offset, index);
  }
  P result = {};
#pragma unroll
  for (int e = 0; e < P::kCount; ++e) {
    auto value = op(Format::load(in[0].get(e)), Format::load(in[1].get(e)));
#pragma unroll
    for (int k = 2; k < kMaxDeviceReduceSources; ++k) {
      if (k < count) value = op(value, Format::load(in[k].get(e)));
    }
    result.put(e, Format::store(op.finish(value)));
  }
  result.store(static_cast<T*>(dst) + offset, index);
}

// dst = fold(op, sources[0..count)) then finish, over n = head + packs * kCount + tail elements:
// elements [0, head) and the last `tail` one by one, the packs in between as kBytes words.
template <class Format, class Op, int kBytes>
__global__ void __launch_bounds__(kReduceThreadsPerBlock, kReduceBlocksPerSm)
    reduce_kernel(void* dst, Sources sources, int count, std::size_t head, std::size_t packs,
                  std::size_t tail, Op op) {
  constexpr int kUnroll = kUnrollOf<Op, kBytes>;
  constexpr int kCount = Pack<typename Format::Storage, kBytes>::kCount;

  if (blockIdx.x == 0 && threadIdx.x < head) {
    reduce_single<Format>(dst, sources, count, threadIdx.x, op);
  }
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x < tail) {
    reduce_single<Format>(dst, sources, count, head + packs * kCount + threadIdx.x, op);
  }

  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t first = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (count == 2) {
    // Round r of a thread covers packs first + (r * kUnroll + u) * stride, u < kUnroll: each
    // load instruction of a warp reads 32 consecutive packs, and when the grid is smaller than
    // the work (one wave of resident blocks) every thread still has kUnroll packs per round.
    for (; first + (kUnroll - 1) * stride < packs; first += kUnroll * stride) {
      reduce_round_2<Format, Op, kBytes, false>(dst, sources, head, first, stride, packs, op);
    }
    if (first < packs) {
      reduce_round_2<Format, Op, kBytes, true>(dst, sources, head, first, stride, packs, op);
    }
  } else {
    for (; first < packs; first += stride) {
      reduce_pack_n<Format, Op, kBytes>(dst, sources, count, head, first, op);
    }
  }
}

template <class Format, class Op>
void launch_reduce(void* dst, const Sources& sources, int count, std::size_t n, const Op& op,
                   cudaStream_t stream) {
  using T = typename Format::Storage;
  constexpr std::size_t kSize = sizeof(T);
  constexpr std::size_t kPerPack = kVectorBytes / kSize;
  const auto misalignment = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % kVectorBytes;
  };
  const std::uintptr_t dst_misalignment = misalignment(dst);
  bool vector = true;
  for (int k = 0; k < count; ++k)
    vector = vector && misalignment(sources.ptr[k]) == dst_misalignment;

  const DeviceLimits limits = device_limits(current_cuda_device());
  if (vector) {
    // Peel the elements before dst's first 16-byte boundary; the sources reach theirs together.
    const std::size_t to_boundary = ((kVectorBytes - dst_misalignment) % kVectorBytes) / kSize;
    const std::size_t head = n < to_boundary ? n : to_boundary;
    const std::size_t packs = (n - head) / kPerPack;
    const std::size_t tail = (n - head) % kPerPack;
    const LaunchConfig config = launch_config_for(packs, limits.sm_count);
    reduce_kernel<Format, Op, kVectorBytes>
        <<<config.blocks, config.threads, 0, stream>>>(dst, sources, count, head, packs, tail, op);
  } else {
    const LaunchConfig config = launch_config_for(n, limits.sm_count);
    reduce_kernel<Format, Op, static_cast<int>(kSize)>
        <<<config.blocks, config.threads, 0, stream>>>(dst, sources, count, 0, n, 0, op);
  }
  check_cuda(cudaGetLastError(), "device_reduce: kernel launch");
}

[[noreturn]] void reject(ErrorCode code, const std::string& message) {
  throw Error(code, "device_reduce", -1, message);
}

std::string describe(DataType type, ReduceOp op) {
  return std::string(to_string(type)) + " " + std::string(to_string(op));
}

// Everything that can be checked without touching the device, before anything is launched.
void validate(const void* dst, std::span<const void* const> sources, std::size_t n, DataType type,
              ReduceOp op) {
  if (sources.size() < 2 || sources.size() > static_cast<std::size_t>(kMaxDeviceReduceSources)) {
    reject(ErrorCode::invalid_argument, "needs 2 to " + std::to_string(kMaxDeviceReduceSources) +
                                            " sources, got " + std::to_string(sources.size()));
  }
  if (!is_supported(type, op)) {
    reject(ErrorCode::unsupported, describe(type, op) + " is not a supported reduction");
  }
  if (n == 0) return;
  const std::size_t size = size_of(type);
  if (n > std::numeric_limits<std::size_t>::max() / size) {
    reject(ErrorCode::invalid_argument, "count " + std::to_string(n) + " is too large");
  }
  const std::size_t bytes = n * size;
  const auto check_pointer = [&](const void* p, const std::string& name) {
    if (p == nullptr) {
      reject(ErrorCode::invalid_argument,
             name + " is null with count " + std::to_string(n) + " (" + describe(type, op) + ")");
    }
    if (reinterpret_cast<std::uintptr_t>(p) % size != 0) {
      reject(ErrorCode::invalid_argument, name + " is not aligned to its element size (" +
                                              std::to_string(size) + " bytes for " +
                                              std::string(to_string(type)) + ")");
    }
  };
  check_pointer(dst, "dst");
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  for (std::size_t k = 0; k < sources.size(); ++k) {
    const std::string name = "source " + std::to_string(k);
    check_pointer(sources[k], name);
    const auto s = reinterpret_cast<std::uintptr_t>(sources[k]);
    if (s != d && s < d + bytes && d < s + bytes) {
      reject(ErrorCode::invalid_argument,
             name + " partially overlaps dst (only the same buffer may be both)");
    }
  }
}

}  // namespace

void device_reduce(void* dst, std::span<const void* const> sources, std::size_t n, DataType type,
                   ReduceOp op, double divisor, void* stream) {
  validate(dst, sources, n, type, op);
  if (n == 0) return;
  Sources list{};
  for (std::size_t k = 0; k < sources.size(); ++k)
    list.ptr[k] = sources[k];
  const int count = static_cast<int>(sources.size());
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const bool launched = ops::visit_reduction(type, op, divisor, [&](auto format, auto element_op) {
    launch_reduce<decltype(format)>(dst, list, count, n, element_op, cuda_stream);
  });
  if (!launched) {
    reject(ErrorCode::unsupported, describe(type, op) + " is not a supported reduction");
  }
}

void device_reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                   ReduceOp op, double divisor, void* stream) {
  const void* const sources[] = {a, b};
  device_reduce(dst, std::span<const void* const>(sources), n, type, op, divisor, stream);
}

}  // namespace collx::kernels
