// Element types and reduction operators of collx, and the 16-bit floating formats.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

namespace collx {

// The element types (name, bytes, C++ type, MPI's predefined type) and the reduction operators
// (name, MPI's op), in one list each: the enums, their counts, names (to_string, the parsers),
// sizes, datatype_of and mpi_types.hpp's maps derive from these.
#define COLLX_DATATYPE_LIST(X)                                                            \
  X(int8, 1, std::int8_t, MPI_INT8_T)                                                     \
  X(uint8, 1, std::uint8_t, MPI_UINT8_T)                                                  \
  X(int32, 4, std::int32_t, MPI_INT32_T)                                                  \
  X(uint32, 4, std::uint32_t, MPI_UINT32_T) X(int64, 8, std::int64_t, MPI_INT64_T)        \
      X(uint64, 8, std::uint64_t, MPI_UINT64_T) X(float16, 2, float16, MPI_DATATYPE_NULL) \
          X(bfloat16, 2, bfloat16, MPI_DATATYPE_NULL) X(float32, 4, float, MPI_FLOAT)     \
              X(float64, 8, double, MPI_DOUBLE)
#define COLLX_REDUCE_OP_LIST(X) \
  X(sum, MPI_SUM) X(prod, MPI_PROD) X(min, MPI_MIN) X(max, MPI_MAX) X(avg, MPI_OP_NULL)

#define COLLX_ENUMERATOR(name, ...) name,
#define COLLX_PLUS_ONE(...) +1
// Element type of a buffer. Counts in the API are always element counts of this type.
enum class DataType : std::uint8_t { COLLX_DATATYPE_LIST(COLLX_ENUMERATOR) };
inline constexpr int kDataTypeCount = 0 COLLX_DATATYPE_LIST(COLLX_PLUS_ONE);
enum class ReduceOp : std::uint8_t { COLLX_REDUCE_OP_LIST(COLLX_ENUMERATOR) };
inline constexpr int kReduceOpCount = 0 COLLX_REDUCE_OP_LIST(COLLX_PLUS_ONE);
#undef COLLX_ENUMERATOR
#undef COLLX_PLUS_ONE

namespace detail {
#define COLLX_TYPE_SIZE(name, bytes, ...) bytes,
inline constexpr std::size_t kTypeSizes[kDataTypeCount] = {COLLX_DATATYPE_LIST(COLLX_TYPE_SIZE)};
#undef COLLX_TYPE_SIZE
[[noreturn]] void throw_not_a_type(DataType type);  // std::out_of_range
}  // namespace detail
// The bytes of one element (inline: every call asks); throws std::out_of_range for a value that
// is not a DataType.
inline std::size_t size_of(DataType type) {
  const auto i = static_cast<std::size_t>(type);
  if (i >= static_cast<std::size_t>(kDataTypeCount)) [[unlikely]]
    detail::throw_not_a_type(type);
  return detail::kTypeSizes[i];
}
inline bool is_floating(DataType type) {
  return type == DataType::float16 || type == DataType::bfloat16 || type == DataType::float32 ||
         type == DataType::float64;
}
// avg is defined for floating types only; every other pair is supported.
inline bool is_supported(DataType type, ReduceOp op) {
  return static_cast<int>(type) < kDataTypeCount && static_cast<int>(op) < kReduceOpCount &&
         (op != ReduceOp::avg || is_floating(type));
}

std::string_view to_string(DataType type);
std::string_view to_string(ReduceOp op);
std::optional<DataType> parse_datatype(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);

// Always inlined: the host kernels are compiled once per instruction set, and an out-of-line
// copy built with AVX-512 must never be what the generic build calls.
#if defined(__GNUC__)
#define COLLX_ALWAYS_INLINE [[gnu::always_inline]] inline
#else
#define COLLX_ALWAYS_INLINE inline
#endif

// Exact conversions with round-to-nearest-even; NaNs stay NaN (quieted, upper payload kept),
// as the x86 F16C instructions do, so scalar and vector paths agree bit for bit.
COLLX_ALWAYS_INLINE constexpr float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in binary32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {
    // Infinity, or a NaN that comes out quiet (as F16C's conversion makes it).
    const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

COLLX_ALWAYS_INLINE constexpr std::uint16_t float_to_half_bits(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
  if (u >= 0x47800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65536: inf
  if (u < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5 aligns the binary point so that the float adder
    // performs the round-to-nearest-even shift for us.
    const float shifted = std::bit_cast<float>(u) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
  }
  const std::uint32_t odd = (u >> 13) & 1u;
  u += 0xc8000fffu + odd;  // rebias exponent (-112 << 23) and round half to even
  return static_cast<std::uint16_t>(sign | (u >> 13));
}

COLLX_ALWAYS_INLINE constexpr float bfloat16_bits_to_float(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

COLLX_ALWAYS_INLINE constexpr std::uint16_t float_to_bfloat16_bits(float value) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A 16-bit floating format, stored as its bit pattern; arithmetic goes through float. float16:
// IEEE 754 binary16; bfloat16: the upper half of a binary32.
template <std::uint16_t (*kToBits)(float), float (*kFromBits)(std::uint16_t)>
struct Float16Bits {
  std::uint16_t bits = 0;
  Float16Bits() = default;
  explicit Float16Bits(float value) : bits(kToBits(value)) {}
  explicit operator float() const { return kFromBits(bits); }
  static Float16Bits from_bits(std::uint16_t b) {
    Float16Bits h;
    h.bits = b;
    return h;
  }
  friend bool operator==(Float16Bits, Float16Bits) = default;
};
using float16 = Float16Bits<float_to_half_bits, half_bits_to_float>;
using bfloat16 = Float16Bits<float_to_bfloat16_bits, bfloat16_bits_to_float>;

// Maps a C++ element type to its DataType, for the typed (std::span) overloads.
template <class T>
struct datatype_of;
#define COLLX_DATATYPE_OF(name, bytes, T, ...) \
  template <>                                  \
  struct datatype_of<T> : std::integral_constant<DataType, DataType::name> {};
COLLX_DATATYPE_LIST(COLLX_DATATYPE_OF)
#undef COLLX_DATATYPE_OF

template <class T>
inline constexpr DataType datatype_of_v = datatype_of<std::remove_cv_t<T>>::value;

}  // namespace collx
