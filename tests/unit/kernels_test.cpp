// Host reduction kernels: every (type, op) pair, every instruction set this CPU has, against a
// scalar reference written independently here; tails, aliasing and special values included.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "collx/types.hpp"
#include "host_reduce.hpp"

namespace {

using collx::DataType;
using collx::ReduceOp;
using collx::kernels::Isa;

template <class T>
T scalar_op(ReduceOp op, T a, T b, double divisor) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::prod:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::min:
        return a < b ? a : b;
      case ReduceOp::max:
        return a > b ? a : b;
      case ReduceOp::avg:
        break;
    }
    return T{};
  } else {
    switch (op) {
      case ReduceOp::sum:
        return a + b;
      case ReduceOp::prod:
        return a * b;
      case ReduceOp::min:
        return a < b ? a : b;
      case ReduceOp::max:
        return a > b ? a : b;
      case ReduceOp::avg:
        return divisor == 0 ? a + b : (a + b) / static_cast<T>(divisor);
    }
    return T{};
  }
}

// 16-bit formats: through float32, rounded once.
template <class H>
H scalar_op_16(ReduceOp op, H a, H b, double divisor) {
  return H(scalar_op<float>(op, static_cast<float>(a), static_cast<float>(b), divisor));
}

template <class T>
bool same(T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(x) && std::isnan(y)) return true;  // payload choice may differ
  }
  if constexpr (std::is_same_v<T, collx::float16> || std::is_same_v<T, collx::bfloat16>) {
    const float fx = static_cast<float>(x);
    const float fy = static_cast<float>(y);
    if (std::isnan(fx) && std::isnan(fy)) return true;
  }
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

template <class T>
T random_value(std::mt19937_64& rng, bool specials) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (specials && rng() % 8 == 0) {
      const T choices[] = {std::numeric_limits<T>::quiet_NaN(),
                           std::numeric_limits<T>::infinity(),
                           -std::numeric_limits<T>::infinity(),
                           T(-0.0),
                           T(0.0),
                           std::numeric_limits<T>::denorm_min(),
                           std::numeric_limits<T>::max()};
      return choices[rng() % 7];
    }
    return static_cast<T>(std::uniform_real_distribution<double>(-100, 100)(rng));
  } else {
    // float16 / bfloat16: any bit pattern when specials are wanted, else moderate values.
    if (specials) return T::from_bits(static_cast<std::uint16_t>(rng()));
    return T(static_cast<float>(std::uniform_real_distribution<double>(-100, 100)(rng)));
  }
}

template <class T>
T reference(ReduceOp op, T a, T b, double divisor) {
  if constexpr (std::is_same_v<T, collx::float16> || std::is_same_v<T, collx::bfloat16>) {
    return scalar_op_16<T>(op, a, b, divisor);
  } else {
    return scalar_op<T>(op, a, b, divisor);
  }
}

enum class Alias { none, dst_is_a, dst_is_b };

template <class T>
void check_pair(const collx::kernels::KernelTable& table, ReduceOp op, std::size_t n,
                double divisor, Alias alias, bool specials, std::uint64_t seed) {
  const DataType type = collx::datatype_of_v<T>;
  const auto fn = table.reduce[static_cast<int>(type)][static_cast<int>(op)];
  ASSERT_NE(fn, nullptr);
  std::mt19937_64 rng(seed);
  std::vector<T> a(n), b(n), dst(n, T{});
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = random_value<T>(rng, specials);
    b[i] = random_value<T>(rng, specials);
  }
  std::vector<T> expected(n);
  for (std::size_t i = 0; i < n; ++i)
    expected[i] = reference<T>(op, a[i], b[i], divisor);
  T* out = alias == Alias::dst_is_a ? a.data() : alias == Alias::dst_is_b ? b.data() : dst.data();
  fn(out, a.data(), b.data(), n, divisor);
  std::size_t wrong = 0;
  std::size_t first_wrong = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (!same(out[i], expected[i])) {
      if (wrong++ == 0) first_wrong = i;
    }
  }
  EXPECT_EQ(wrong, 0u) << collx::to_string(type) << " " << collx::to_string(op) << " n=" << n
                       << " divisor=" << divisor << " alias=" << static_cast<int>(alias)
                       << " first wrong index " << first_wrong;
}

template <class T>
void check_type(const collx::kernels::KernelTable& table) {
  const DataType type = collx::datatype_of_v<T>;
  const std::size_t sizes[] = {0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
  std::uint64_t seed = 1;
  for (int o = 0; o < collx::kReduceOpCount; ++o) {
    const auto op = static_cast<ReduceOp>(o);
    if (!collx::is_supported(type, op)) {
      EXPECT_EQ(table.reduce[static_cast<int>(type)][o], nullptr);
      continue;
    }
    for (std::size_t n : sizes) {
      for (Alias alias : {Alias::none, Alias::dst_is_a, Alias::dst_is_b}) {
        for (bool specials : {false, true}) {
          check_pair<T>(table, op, n, 0.0, alias, specials, seed++);
          if (op == ReduceOp::avg) check_pair<T>(table, op, n, 3.0, alias, specials, seed++);
        }
      }
    }
  }
}

class KernelIsaTest : public ::testing::TestWithParam<Isa> {};

TEST_P(KernelIsaTest, EveryTypeAndOpMatchesScalarReference) {
  const auto* table = collx::kernels::kernel_table(GetParam());
  if (table == nullptr) {
    GTEST_SKIP() << "this CPU (or build) has no " << collx::kernels::to_string(GetParam());
  }
  check_type<std::int8_t>(*table);
  check_type<std::uint8_t>(*table);
  check_type<std::int32_t>(*table);
  check_type<std::uint32_t>(*table);
  check_type<std::int64_t>(*table);
  check_type<std::uint64_t>(*table);
  check_type<collx::float16>(*table);
  check_type<collx::bfloat16>(*table);
  check_type<float>(*table);
  check_type<double>(*table);
}

// The streaming copy and the vector copy: every length around the vector widths, the alignment
// head and the unrolled loop's stride, every destination and source misalignment, bytes outside
// the range untouched.
TEST_P(KernelIsaTest, CopiesEqualMemcpy) {
  const auto* table = collx::kernels::kernel_table(GetParam());
  if (table == nullptr) {
    GTEST_SKIP() << "this CPU (or build) has no " << collx::kernels::to_string(GetParam());
  }
  std::mt19937 rng(7);
  std::vector<unsigned char> src(70000);
  for (auto& b : src)
    b = static_cast<unsigned char>(rng());
  for (const auto& [name, copy] :
       {std::pair{"copy_streaming", table->copy_streaming}, std::pair{"copy", table->copy}}) {
    for (std::size_t n : {0,   1,   63,  64,  65,   127,  128,  129,  255,  256,
                          257, 511, 512, 513, 1000, 2047, 2048, 4096, 4097, 65537}) {
      for (std::size_t dst_off : {0, 1, 16, 17, 63}) {
        for (std::size_t src_off : {0, 3, 16, 32}) {
          std::vector<unsigned char> dst(n + 200, 0xEE);
          copy(dst.data() + 64 + dst_off, src.data() + src_off, n);
          for (std::size_t i = 0; i < dst.size(); ++i) {
            const bool inside = i >= 64 + dst_off && i < 64 + dst_off + n;
            const unsigned char want = inside ? src[src_off + i - 64 - dst_off] : 0xEE;
            ASSERT_EQ(dst[i], want) << name << " n " << n << " dst_off " << dst_off << " src_off "
                                    << src_off << " byte " << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelIsaTest,
                         ::testing::Values(Isa::generic, Isa::avx2, Isa::avx512),
                         [](const auto& info) {
                           return std::string(collx::kernels::to_string(info.param));
                         });

// collx's copy as the library calls it: memcpy below and above the vector copy's window and
// where the two addresses are aligned alike, the vector copy inside it otherwise; each side of
// both edges, at a destination 16 bytes past a page, the source 1 and 16 bytes past a vector's.
TEST(Kernels, CopyDispatchEqualsMemcpyAtTheWindowsEdges) {
  using collx::kernels::kVectorCopyMaxBytes;
  using collx::kernels::kVectorCopyMinBytes;
  std::vector<unsigned char> src(kVectorCopyMaxBytes + 64);
  std::mt19937 rng(11);
  for (auto& b : src)
    b = static_cast<unsigned char>(rng());
  for (std::size_t src_off : {1, 16}) {
    for (std::size_t n : {kVectorCopyMinBytes - 1, kVectorCopyMinBytes, kVectorCopyMaxBytes - 1,
                          kVectorCopyMaxBytes}) {
      std::vector<unsigned char> dst(n + 4096 + 64, 0xEE);
      collx::kernels::copy(dst.data() + 4096 + 16, src.data() + src_off, n);
      ASSERT_EQ(std::memcmp(dst.data() + 4096 + 16, src.data() + src_off, n), 0)
          << "n " << n << " src_off " << src_off;
      ASSERT_EQ(dst[4096 + 15], 0xEE) << "n " << n;
      ASSERT_EQ(dst[4096 + 16 + n], 0xEE) << "n " << n;
    }
  }
}

TEST(Kernels, GenericTableAlwaysExistsAndActiveIsChosen) {
  EXPECT_NE(collx::kernels::kernel_table(Isa::generic), nullptr);
  EXPECT_NE(collx::kernels::kernel_table(collx::kernels::active_isa()), nullptr);
}

TEST(Kernels, AvgRoundsOnceForHalf) {
  // (a + b) / 3 computed in float32 and rounded once: 1 + 1 = 2, 2/3 in binary16.
  const collx::float16 one(1.0f);
  collx::float16 out;
  collx::kernels::reduce(&out, &one, &one, 1, DataType::float16, ReduceOp::avg, 3.0);
  EXPECT_EQ(out.bits, collx::float_to_half_bits(2.0f / 3.0f));
}

}  // namespace
