// The body of the host reduction kernels, compiled once per instruction set.
//
// Included by host_reduce_<isa>.cpp with COLLX_KERNEL_ISA_NS naming a namespace of its own:
// every function here has internal linkage or lives in that namespace, so copies built for
// different instruction sets never meet at link time (no ODR clash between -mavx512f code and
// the generic build). It deliberately calls no inline std:: function for the same reason.
#ifndef COLLX_KERNEL_ISA_NS
#error "define COLLX_KERNEL_ISA_NS before including host_reduce_impl.hpp"
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "host_reduce.hpp"

namespace collx::kernels::COLLX_KERNEL_ISA_NS {
namespace {

// Vector width in bytes that this translation unit's instruction set handles natively.
#if defined(__AVX512F__) && defined(__AVX512BW__)
constexpr int kVectorBytes = 64;
#elif defined(__AVX2__)
constexpr int kVectorBytes = 32;
#else
constexpr int kVectorBytes = 16;
#endif

// ---- element operators, usable on scalars and on GCC vector types alike ----
// Integer sum and product wrap (two's complement), computed in the unsigned type so that the
// signed types have no undefined overflow.
struct SumOp {
  template <class V>
  V operator()(V a, V b) const {
    return a + b;
  }
};
struct ProdOp {
  template <class V>
  V operator()(V a, V b) const {
    return a * b;
  }
};
// Same as the x86 min/max instructions: when either side is NaN the second operand is returned.
struct MinOp {
  template <class V>
  V operator()(V a, V b) const {
    return a < b ? a : b;
  }
};
struct MaxOp {
  template <class V>
  V operator()(V a, V b) const {
    return a > b ? a : b;
  }
};
template <class F>
struct DivOp {
  F divisor;
  template <class V>
  V operator()(V a, V b) const {
    return (a + b) / divisor;
  }
};

template <class T, bool = std::is_integral_v<T>>
struct WrappingOf {
  using type = T;
};
template <class T>
struct WrappingOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Wrapping = typename WrappingOf<T>::type;

// Sum and product run in the wrapping (unsigned) type; min and max compare in T itself.
template <class T, class Op>
using ComputeType =
    std::conditional_t<std::is_same_v<Op, SumOp> || std::is_same_v<Op, ProdOp>, Wrapping<T>, T>;

template <class T, class Op>
void elementwise(void* dst_v, const void* a_v, const void* b_v, std::size_t n, Op op) {
  using U = ComputeType<T, Op>;
  U* dst = static_cast<U*>(dst_v);
  const U* a = static_cast<const U*>(a_v);
  const U* b = static_cast<const U*>(b_v);
  // dst may be a or b; each element is read before it is written, so no iteration depends on
  // another and the loop may be vectorised without the runtime overlap check.
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = static_cast<U>(op(a[i], b[i]));
}

template <class T, class Op>
void reduce_native(void* dst, const void* a, const void* b, std::size_t n, double) {
  elementwise<T>(dst, a, b, n, Op{});
}

template <class T>
void avg_native(void* dst, const void* a, const void* b, std::size_t n, double divisor) {
  if (divisor == 0.0) {
    elementwise<T>(dst, a, b, n, SumOp{});
  } else {
    elementwise<T>(dst, a, b, n, DivOp<T>{static_cast<T>(divisor)});
  }
}

// ---- 16-bit floating types: widen to float32, apply, round once ----
constexpr int kLanes = kVectorBytes / 4;  // float32 lanes per vector
typedef float FloatVec __attribute__((vector_size(kVectorBytes)));
typedef std::uint32_t U32Vec __attribute__((vector_size(kVectorBytes)));
typedef std::int32_t I32Vec __attribute__((vector_size(kVectorBytes)));
typedef std::uint16_t U16Vec __attribute__((vector_size(kVectorBytes / 2)));

inline U16Vec load_u16(const std::uint16_t* p) {
  U16Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_u16(std::uint16_t* p, U16Vec v) {
  std::memcpy(p, &v, sizeof v);
}

struct BFloat16Format {
  static float to_float(std::uint16_t h) { return bfloat16_bits_to_float(h); }
  static std::uint16_t from_float(float f) { return float_to_bfloat16_bits(f); }
  static FloatVec to_float(U16Vec h) {
    return (FloatVec)(__builtin_convertvector(h, U32Vec) << 16);
  }
  static U16Vec from_float(FloatVec f) {
    const U32Vec u = (U32Vec)f;
    const U32Vec rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const U32Vec quiet_nan = (u >> 16) | 0x40u;
    const I32Vec magnitude = (I32Vec)u & 0x7fffffff;
    const U32Vec result = magnitude > 0x7f800000 ? quiet_nan : rounded;
    return __builtin_convertvector(result, U16Vec);
  }
};

struct Float16Format {
  static float to_float(std::uint16_t h) { return half_bits_to_float(h); }
  static std::uint16_t from_float(float f) { return float_to_half_bits(f); }
#if defined(__F16C__) && defined(__AVX512F__) && defined(__AVX512BW__)
  static constexpr bool kVectorised = true;
  static FloatVec to_float(U16Vec h) {
    return _mm512_cvtph_ps((__m256i)h);
  }
  static U16Vec from_float(FloatVec f) {
    return (U16Vec)_mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
#elif defined(__F16C__) && defined(__AVX2__)
  static constexpr bool kVectorised = true;
  static FloatVec to_float(U16Vec h) {
    return _mm256_cvtph_ps((__m128i)h);
  }
  static U16Vec from_float(FloatVec f) {
    return (U16Vec)_mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
#else
  static constexpr bool kVectorised = false;
#endif
};

template <class Format>
constexpr bool vectorised() {
  if constexpr (std::is_same_v<Format, Float16Format>) {
    return Format::kVectorised;
  } else {
    return true;
  }
}

template <class Format, class Op>
void elementwise_16(void* dst_v, const void* a_v, const void* b_v, std::size_t n, Op op) {
  auto* dst = static_cast<std::uint16_t*>(dst_v);
  const auto* a = static_cast<const std::uint16_t*>(a_v);
  const auto* b = static_cast<const std::uint16_t*>(b_v);
  std::size_t i = 0;
  if constexpr (vectorised<Format>()) {
    for (; i + kLanes <= n; i += kLanes) {
      const FloatVec x = Format::to_float(load_u16(a + i));
      const FloatVec y = Format::to_float(load_u16(b + i));
      store_u16(dst + i, Format::from_float(op(x, y)));
    }
  }
  for (; i < n; ++i) {
    dst[i] = Format::from_float(op(Format::to_float(a[i]), Format::to_float(b[i])));
  }
}

template <class Format, class Op>
void reduce_16(void* dst, const void* a, const void* b, std::size_t n, double) {
  elementwise_16<Format>(dst, a, b, n, Op{});
}

template <class Format>
void avg_16(void* dst, const void* a, const void* b, std::size_t n, double divisor) {
  if (divisor == 0.0) {
    elementwise_16<Format>(dst, a, b, n, SumOp{});
  } else {
    elementwise_16<Format>(dst, a, b, n, DivOp<float>{static_cast<float>(divisor)});
  }
}

template <class T>
void fill_native(KernelTable& table, DataType type) {
  auto& row = table.reduce[static_cast<int>(type)];
  row[static_cast<int>(ReduceOp::sum)] = &reduce_native<T, SumOp>;
  row[static_cast<int>(ReduceOp::prod)] = &reduce_native<T, ProdOp>;
  row[static_cast<int>(ReduceOp::min)] = &reduce_native<T, MinOp>;
  row[static_cast<int>(ReduceOp::max)] = &reduce_native<T, MaxOp>;
  row[static_cast<int>(ReduceOp::avg)] = std::is_floating_point_v<T> ? &avg_native<T> : nullptr;
}

template <class Format>
void fill_16(KernelTable& table, DataType type) {
  auto& row = table.reduce[static_cast<int>(type)];
  row[static_cast<int>(ReduceOp::sum)] = &reduce_16<Format, SumOp>;
  row[static_cast<int>(ReduceOp::prod)] = &reduce_16<Format, ProdOp>;
  row[static_cast<int>(ReduceOp::min)] = &reduce_16<Format, MinOp>;
  row[static_cast<int>(ReduceOp::max)] = &reduce_16<Format, MaxOp>;
  row[static_cast<int>(ReduceOp::avg)] = &avg_16<Format>;
}

// Head up to the destination's vector alignment and the tail by memcpy, the aligned middle
// with streaming stores, then a fence so the stores are visible before whatever publishes them.
void copy_streaming(void* dst, const void* src, std::size_t n) {
#if (defined(__AVX512F__) && defined(__AVX512BW__)) || defined(__AVX2__)
  constexpr std::size_t kAlign = kVectorBytes;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  const std::size_t head = (kAlign - reinterpret_cast<std::uintptr_t>(d) % kAlign) % kAlign;
  if (n < head + 4 * kAlign) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  std::size_t i = head;
  for (; i + kAlign <= n; i += kAlign) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), _mm512_loadu_si512(s + i));
#else
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i)));
#endif
  }
  _mm_sfence();
  std::memcpy(d + i, s + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

// The vector unit's unaligned loads and stores, four vectors an iteration: its speed does not
// depend on how the two addresses sit against each other, where glibc's `rep movsb` does
// (host_reduce.hpp, copy). The first and last vectors are stored unaligned and overlap the
// middle's, whose stores are aligned to the destination.
typedef unsigned char ByteVec __attribute__((vector_size(kVectorBytes)));

void copy_vector(void* dst, const void* src, std::size_t n) {
  constexpr std::size_t kVec = kVectorBytes;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (n < 8 * kVec) {
    std::memcpy(d, s, n);
    return;
  }
  // memcpy of one vector compiles to one unaligned load or store.
  const auto load = [](const unsigned char* p) {
    ByteVec v;
    std::memcpy(&v, p, kVec);
    return v;
  };
  const auto store = [](unsigned char* p, ByteVec v) { std::memcpy(p, &v, kVec); };
  const ByteVec first = load(s);
  const ByteVec last = load(s + n - kVec);
  std::size_t i = kVec - reinterpret_cast<std::uintptr_t>(d) % kVec;
  for (; i + 4 * kVec <= n; i += 4 * kVec) {
    const ByteVec v0 = load(s + i);
    const ByteVec v1 = load(s + i + kVec);
    const ByteVec v2 = load(s + i + 2 * kVec);
    const ByteVec v3 = load(s + i + 3 * kVec);
    store(d + i, v0);
    store(d + i + kVec, v1);
    store(d + i + 2 * kVec, v2);
    store(d + i + 3 * kVec, v3);
  }
  for (; i + kVec <= n; i += kVec)
    store(d + i, load(s + i));
  store(d, first);
  store(d + n - kVec, last);
}

KernelTable build_table() {
  KernelTable table{};
  table.copy_streaming = &copy_streaming;
  table.copy = &copy_vector;
  fill_native<std::int8_t>(table, DataType::int8);
  fill_native<std::uint8_t>(table, DataType::uint8);
  fill_native<std::int32_t>(table, DataType::int32);
  fill_native<std::uint32_t>(table, DataType::uint32);
  fill_native<std::int64_t>(table, DataType::int64);
  fill_native<std::uint64_t>(table, DataType::uint64);
  fill_16<Float16Format>(table, DataType::float16);
  fill_16<BFloat16Format>(table, DataType::bfloat16);
  fill_native<float>(table, DataType::float32);
  fill_native<double>(table, DataType::float64);
  return table;
}

}  // namespace

const KernelTable& table() {
  static const KernelTable instance = build_table();
  return instance;
}

}  // namespace collx::kernels::COLLX_KERNEL_ISA_NS
