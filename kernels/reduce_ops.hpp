// Element operators of the reductions, compiled by nvcc for the device and by g++ for the host.
//
// The CUDA kernels (device_reduce.cu) are built from these pieces, and a CPU test checks them
// against the host kernel table (host_reduce.hpp), so both sides implement one definition:
//   - integer sum and product wrap (two's complement), computed in the unsigned type;
//   - min is `a < b ? a : b` and max is `a > b ? a : b` (a NaN on either side: the second
//     operand), the same selection as the x86 min/max instructions the host kernels use;
//   - float16 and bfloat16 are computed in float32 and rounded once (to nearest even);
//   - avg: every step is a plain sum and the last one divides by the divisor, in the element's
//     compute precision (float32 for the 16-bit types).
// A reduction of k sources is fold(op) over them followed by `finish` (the avg divide).
//
// NaN payloads: min and max return the selected operand's bits (a 16-bit NaN comes back quiet,
// its payload kept, as the host's convert-select-convert does). Arithmetic on a NaN gives a NaN,
// but not always the same NaN: x86 propagates the first operand's payload, NVIDIA GPUs return
// the canonical NaN. Callers compare arithmetic results with "NaN matches any NaN".
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#include "collx/types.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define COLLX_HOST_DEVICE __host__ __device__
#define COLLX_HD_INLINE __host__ __device__ __forceinline__
#else
#define COLLX_HOST_DEVICE
#define COLLX_HD_INLINE inline
#endif

namespace collx::kernels::ops {

// ---- bit casts that work in device code (no std::bit_cast there) ----
COLLX_HD_INLINE float float_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// ---- element formats: a stored element (Storage) and the value an operator works on ----
// load() and store() are exact inverses for every Storage value except a signalling 16-bit NaN,
// which comes back quiet.

// Stored and computed as T.
template <class T>
struct Native {
  using Storage = T;
  using Value = T;
  COLLX_HD_INLINE static Value load(Storage s) { return s; }
  COLLX_HD_INLINE static Storage store(Value v) { return v; }
};

// IEEE binary16 computed in float32, rounded once when stored.
struct Float16Arith {
  using Storage = std::uint16_t;
  using Value = float;
  COLLX_HD_INLINE static Value load(Storage s) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(s));
#else
    return half_bits_to_float(s);
#endif
  }
  COLLX_HD_INLINE static Storage store(Value v) {
#if defined(__CUDA_ARCH__)
    return __half_as_ushort(__float2half_rn(v));
#else
    return float_to_half_bits(v);
#endif
  }
};

// bfloat16 computed in float32, rounded once when stored.
struct BFloat16Arith {
  using Storage = std::uint16_t;
  using Value = float;
  // Exact and NaN-preserving on both sides: the upper half of a binary32.
  COLLX_HD_INLINE static Value load(Storage s) {
    return float_from_bits(static_cast<std::uint32_t>(s) << 16);
  }
  COLLX_HD_INLINE static Storage store(Value v) {
#if defined(__CUDA_ARCH__)
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
    return float_to_bfloat16_bits(v);
#endif
  }
};

// A 16-bit element seen by min and max: compared as float32, but the result is the selected
// operand's own bits, so no rounding happens at all. A NaN result is made quiet (its payload
// kept), which is what the host's float32 round trip does to it.
template <class Arith, std::uint16_t kQuietBit, std::uint16_t kInfinityBits>
struct Selected16 {
  using Storage = std::uint16_t;
  struct Value {
    float key;
    Storage bits;
    COLLX_HD_INLINE friend bool operator<(Value a, Value b) { return a.key < b.key; }
    COLLX_HD_INLINE friend bool operator>(Value a, Value b) { return a.key > b.key; }
  };
  COLLX_HD_INLINE static Value load(Storage s) { return Value{Arith::load(s), s}; }
  COLLX_HD_INLINE static Storage store(Value v) {
    const bool is_nan = (v.bits & 0x7fffu) > kInfinityBits;
    return static_cast<Storage>(is_nan ? (v.bits | kQuietBit) : v.bits);
  }
};
using Float16Selected = Selected16<Float16Arith, 0x0200u, 0x7c00u>;
using BFloat16Selected = Selected16<BFloat16Arith, 0x0040u, 0x7f80u>;

// ---- operators: combine two values; finish() is applied once to the folded result ----
namespace detail {
template <class T>
COLLX_HD_INLINE T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}
template <class T>
COLLX_HD_INLINE T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}
}  // namespace detail

struct Sum {
  template <class V>
  COLLX_HD_INLINE V operator()(V a, V b) const {
    return detail::wrapping_add(a, b);
  }
  template <class V>
  COLLX_HD_INLINE V finish(V v) const {
    return v;
  }
};
struct Prod {
  template <class V>
  COLLX_HD_INLINE V operator()(V a, V b) const {
    return detail::wrapping_mul(a, b);
  }
  template <class V>
  COLLX_HD_INLINE V finish(V v) const {
    return v;
  }
};
struct Min {
  template <class V>
  COLLX_HD_INLINE V operator()(V a, V b) const {
    return a < b ? a : b;
  }
  template <class V>
  COLLX_HD_INLINE V finish(V v) const {
    return v;
  }
};
struct Max {
  template <class V>
  COLLX_HD_INLINE V operator()(V a, V b) const {
    return a > b ? a : b;
  }
  template <class V>
  COLLX_HD_INLINE V finish(V v) const {
    return v;
  }
};
// The last step of an average: the sum, divided once. (a + b) / d is finish(a + b).
template <class F>
struct SumThenDivide {
  F divisor;
  COLLX_HD_INLINE F operator()(F a, F b) const { return a + b; }
  COLLX_HD_INLINE F finish(F v) const { return v / divisor; }
};

// ---- reference element reductions (scalar; the kernels apply the same steps to packs) ----
template <class Format, class Op>
COLLX_HD_INLINE typename Format::Storage reduce_element(typename Format::Storage a,
                                                        typename Format::Storage b, const Op& op) {
  return Format::store(op.finish(op(Format::load(a), Format::load(b))));
}

// sources[0] op sources[1] op ... op sources[count - 1], then finish; count >= 1.
template <class Format, class Op>
COLLX_HD_INLINE typename Format::Storage reduce_element(const typename Format::Storage* sources,
                                                        int count, const Op& op) {
  auto value = Format::load(sources[0]);
  for (int s = 1; s < count; ++s) {
    value = op(value, Format::load(sources[s]));
  }
  return Format::store(op.finish(value));
}

// ---- the one descriptor every variant is generated from ----
namespace detail {
// Formats of one DataType: Wrap for sum and prod, Select for min and max, Arith for avg.
template <class WrapF, class SelectF, class ArithF>
struct FormatsOf {
  using Wrap = WrapF;
  using Select = SelectF;
  using Arith = ArithF;  // void: avg is not defined for this type
};

template <class Formats, class F>
bool visit_op(ReduceOp op, double divisor, F&& f) {
  switch (op) {
    case ReduceOp::sum:
      f(typename Formats::Wrap{}, Sum{});
      return true;
    case ReduceOp::prod:
      f(typename Formats::Wrap{}, Prod{});
      return true;
    case ReduceOp::min:
      f(typename Formats::Select{}, Min{});
      return true;
    case ReduceOp::max:
      f(typename Formats::Select{}, Max{});
      return true;
    case ReduceOp::avg:
      if constexpr (std::is_void_v<typename Formats::Arith>) {
        return false;
      } else {
        using Arith = typename Formats::Arith;
        using V = typename Arith::Value;
        // divisor 0: an intermediate step, a plain sum.
        if (divisor == 0.0) {
          f(Arith{}, Sum{});
        } else {
          f(Arith{}, SumThenDivide<V>{static_cast<V>(divisor)});
        }
        return true;
      }
  }
  return false;
}

// Signed sum and product are computed as unsigned (same bits, no undefined overflow).
template <class T>
using IntegerFormats = FormatsOf<Native<std::make_unsigned_t<T>>, Native<T>, void>;
template <class T>
using FloatFormats = FormatsOf<Native<T>, Native<T>, Native<T>>;
}  // namespace detail

// Calls f(Format{}, op) with the element format and operator that implement (type, op) with
// this divisor (used by avg only: 0 = intermediate sum, > 0 = last step). Returns false, without
// calling f, for a pair that is not supported (avg of an integer type).
template <class F>
bool visit_reduction(DataType type, ReduceOp op, double divisor, F&& f) {
  using namespace detail;
  switch (type) {
    case DataType::int8:
      return visit_op<IntegerFormats<std::int8_t>>(op, divisor, f);
    case DataType::uint8:
      return visit_op<IntegerFormats<std::uint8_t>>(op, divisor, f);
    case DataType::int32:
      return visit_op<IntegerFormats<std::int32_t>>(op, divisor, f);
    case DataType::uint32:
      return visit_op<IntegerFormats<std::uint32_t>>(op, divisor, f);
    case DataType::int64:
      return visit_op<IntegerFormats<std::int64_t>>(op, divisor, f);
    case DataType::uint64:
      return visit_op<IntegerFormats<std::uint64_t>>(op, divisor, f);
    case DataType::float16:
      return visit_op<FormatsOf<Float16Arith, Float16Selected, Float16Arith>>(op, divisor, f);
    case DataType::bfloat16:
      return visit_op<FormatsOf<BFloat16Arith, BFloat16Selected, BFloat16Arith>>(op, divisor, f);
    case DataType::float32:
      return visit_op<FloatFormats<float>>(op, divisor, f);
    case DataType::float64:
      return visit_op<FloatFormats<double>>(op, divisor, f);
  }
  return false;
}

}  // namespace collx::kernels::ops
