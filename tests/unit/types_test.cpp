// float16 / bfloat16 conversions: exhaustive over every 16-bit pattern, and against the
// F16C hardware conversion where the CPU has it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "collx/types.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using collx::bfloat16_bits_to_float;
using collx::float_to_bfloat16_bits;
using collx::float_to_half_bits;
using collx::half_bits_to_float;

TEST(Float16, EveryPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = half_bits_to_float(static_cast<std::uint16_t>(h));
    const std::uint16_t back = float_to_half_bits(f);
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(back, h | 0x200) << "NaN keeps its payload, quieted: " << h;
    } else {
      EXPECT_EQ(back, h) << h;
    }
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // ties to even: rounds up to infinity
  EXPECT_EQ(float_to_half_bits(1e30f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);           // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);           // half of it: tie to even (0)
  EXPECT_EQ(float_to_half_bits(0x1.8p-24f), 0x0002);         // 1.5 ulp: tie to even (2)
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);    // tie: stays even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.8p-10f), 0x3c02);  // tie: to even above
  EXPECT_FLOAT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) std::uint16_t hardware_half(float f) {
  return static_cast<std::uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hardware_float(std::uint16_t h) {
  return _cvtsh_ss(h);
}

TEST(Float16, MatchesF16cHardware) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    // Bias towards the half range so rounding, subnormals and overflow are all exercised.
    std::uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x807fffffu) | ((100u + (u >> 24) % 60u) << 23);
    const float f = std::bit_cast<float>(u);
    ASSERT_EQ(float_to_half_bits(f), hardware_half(f)) << std::hex << u;
  }
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float a = half_bits_to_float(static_cast<std::uint16_t>(h));
    const float b = hardware_float(static_cast<std::uint16_t>(h));
    ASSERT_EQ(std::bit_cast<std::uint32_t>(a), std::bit_cast<std::uint32_t>(b)) << h;
  }
}
#endif

// Round-to-nearest-even by definition: the nearer of the two bfloat16 neighbours, even on ties.
std::uint16_t reference_bfloat16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if (std::isnan(f)) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  const std::uint32_t low = u & 0xffff0000u;
  const double lo = std::bit_cast<float>(low);
  const double hi_bits_value = (low & 0x7fffffffu) == 0x7f7f0000u
                                   ? std::ldexp(1.0, 128) * (f < 0 ? -1 : 1)
                                   : static_cast<double>(std::bit_cast<float>(low + 0x10000u));
  const double x = f;
  const double d_lo = std::fabs(x - lo);
  const double d_hi = std::fabs(hi_bits_value - x);
  if (d_lo < d_hi) return static_cast<std::uint16_t>(low >> 16);
  if (d_hi < d_lo) return static_cast<std::uint16_t>((low + 0x10000u) >> 16);
  return static_cast<std::uint16_t>(((low >> 16) & 1) ? (low + 0x10000u) >> 16 : low >> 16);
}

TEST(BFloat16, RoundsToNearestEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isinf(f)) continue;
    ASSERT_EQ(float_to_bfloat16_bits(f), reference_bfloat16(f))
        << std::hex << std::bit_cast<std::uint32_t>(f);
  }
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, even up
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // to infinity
}

TEST(BFloat16, EveryPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const std::uint16_t back =
        float_to_bfloat16_bits(bfloat16_bits_to_float(static_cast<std::uint16_t>(h)));
    const bool nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0;
    EXPECT_EQ(back, nan ? (h | 0x40) : h) << h;
  }
}

TEST(DataTypes, NamesSizesAndSupport) {
  using collx::DataType;
  using collx::ReduceOp;
  for (int t = 0; t < collx::kDataTypeCount; ++t) {
    const auto type = static_cast<DataType>(t);
    EXPECT_EQ(collx::parse_datatype(collx::to_string(type)), type);
    for (int o = 0; o < collx::kReduceOpCount; ++o) {
      const auto op = static_cast<ReduceOp>(o);
      EXPECT_EQ(collx::parse_reduce_op(collx::to_string(op)), op);
      EXPECT_EQ(collx::is_supported(type, op), op != ReduceOp::avg || collx::is_floating(type));
    }
  }
  EXPECT_EQ(collx::size_of(DataType::bfloat16), 2u);
  EXPECT_EQ(collx::size_of(DataType::uint64), 8u);
  EXPECT_FALSE(collx::parse_datatype("float128"));
  EXPECT_EQ(collx::datatype_of_v<collx::float16>, DataType::float16);
  EXPECT_EQ(collx::datatype_of_v<const double>, DataType::float64);
}

}  // namespace
