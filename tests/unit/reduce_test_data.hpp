// Inputs and comparisons for the reduction tests (host operators and device kernels): element
// arrays of any DataType as raw bytes, random or full of the floating types' special values.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "collx/types.hpp"

namespace collx::test {

using Bytes = std::vector<unsigned char>;

inline constexpr DataType kAllTypes[] = {
    DataType::int8,   DataType::uint8,   DataType::int32,    DataType::uint32,  DataType::int64,
    DataType::uint64, DataType::float16, DataType::bfloat16, DataType::float32, DataType::float64,
};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                       ReduceOp::avg};

// Bit patterns every floating test should meet: signed zeros, infinities, quiet and signalling
// NaNs with payloads and either sign, subnormals, extremes.
inline const std::vector<std::uint16_t>& float16_specials() {
  static const std::vector<std::uint16_t> values = {
      0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7d23, 0x7fff,
      0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3555, 0x7800};
  return values;
}
inline const std::vector<std::uint16_t>& bfloat16_specials() {
  static const std::vector<std::uint16_t> values = {
      0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7fa3, 0x7fff,
      0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3eab, 0x7f00};
  return values;
}
inline const std::vector<std::uint32_t>& float32_specials() {
  static const std::vector<std::uint32_t> values = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
      0x7f800001u, 0xff812345u, 0x7fc12345u, 0x00000001u, 0x80000001u, 0x007fffffu,
      0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u, 0xbf800000u, 0x3eaaaaabu};
  return values;
}
inline const std::vector<std::uint64_t>& float64_specials() {
  static const std::vector<std::uint64_t> values = {
      0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
      0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull, 0xfff0000000012345ull,
      0x7ff8000000012345ull, 0x0000000000000001ull, 0x8000000000000001ull, 0x000fffffffffffffull,
      0x0010000000000000ull, 0x7fefffffffffffffull, 0xffefffffffffffffull, 0x3ff0000000000000ull,
      0xbff0000000000000ull, 0x3fd5555555555555ull};
  return values;
}

template <class Bits>
void put_bits(Bytes& out, std::size_t i, Bits bits) {
  std::memcpy(out.data() + i * sizeof(Bits), &bits, sizeof(Bits));
}

// n random elements of `type`. specials: about a quarter are special values and the rest any
// bit pattern; otherwise moderate values in (-100, 100) for floating types (sums and products
// that round) and any bit pattern for integers.
inline Bytes random_elements(DataType type, std::size_t n, std::mt19937_64& rng, bool specials) {
  Bytes out(n * size_of(type));
  std::uniform_real_distribution<double> moderate(-100.0, 100.0);
  const auto special_of = [&](const auto& table) { return table[rng() % table.size()]; };
  for (std::size_t i = 0; i < n; ++i) {
    const bool use_special = specials && rng() % 4 == 0;
    const std::uint64_t random_bits = rng();
    switch (type) {
      case DataType::int8:
      case DataType::uint8:
        put_bits(out, i, static_cast<std::uint8_t>(random_bits));
        break;
      case DataType::int32:
      case DataType::uint32:
        put_bits(out, i, static_cast<std::uint32_t>(random_bits));
        break;
      case DataType::int64:
      case DataType::uint64:
        put_bits(out, i, random_bits);
        break;
      case DataType::float16:
        put_bits(out, i,
                 use_special ? special_of(float16_specials())
                 : specials  ? static_cast<std::uint16_t>(random_bits)
                             : float_to_half_bits(static_cast<float>(moderate(rng))));
        break;
      case DataType::bfloat16:
        put_bits(out, i,
                 use_special ? special_of(bfloat16_specials())
                 : specials  ? static_cast<std::uint16_t>(random_bits)
                             : float_to_bfloat16_bits(static_cast<float>(moderate(rng))));
        break;
      case DataType::float32:
        put_bits(out, i,
                 use_special ? special_of(float32_specials())
                 : specials  ? static_cast<std::uint32_t>(random_bits)
                             : std::bit_cast<std::uint32_t>(static_cast<float>(moderate(rng))));
        break;
      case DataType::float64:
        put_bits(out, i,
                 use_special ? special_of(float64_specials())
                 : specials  ? random_bits
                             : std::bit_cast<std::uint64_t>(moderate(rng)));
        break;
    }
  }
  return out;
}

inline bool is_nan_element(DataType type, const unsigned char* p) {
  switch (type) {
    case DataType::float16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7c00u;
    }
    case DataType::bfloat16: {
      std::uint16_t h;
      std::memcpy(&h, p, 2);
      return (h & 0x7fffu) > 0x7f80u;
    }
    case DataType::float32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case DataType::float64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    default:
      return false;
  }
}

// Element i of x and y are the same bits, or (nan_matches_nan) both are NaN.
inline bool same_element(DataType type, const unsigned char* x, const unsigned char* y,
                         std::size_t i, bool nan_matches_nan) {
  const std::size_t size = size_of(type);
  if (std::memcmp(x + i * size, y + i * size, size) == 0) return true;
  return nan_matches_nan && is_nan_element(type, x + i * size) &&
         is_nan_element(type, y + i * size);
}

// Index of the first element that differs, or n.
inline std::size_t first_difference(DataType type, const Bytes& x, const Bytes& y, std::size_t n,
                                    bool nan_matches_nan) {
  for (std::size_t i = 0; i < n; ++i) {
    if (!same_element(type, x.data(), y.data(), i, nan_matches_nan)) return i;
  }
  return n;
}

// The element's bits in hex, for failure messages.
inline std::string element_hex(DataType type, const unsigned char* p) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (std::size_t b = size_of(type); b-- > 0;) {
    s += digits[p[b] >> 4];
    s += digits[p[b] & 15];
  }
  return s;
}

}  // namespace collx::test
