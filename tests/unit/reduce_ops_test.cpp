// The element operators of reduce_ops.hpp (what the CUDA kernels are built from), run on the CPU:
// every type/op pair against the host kernel table bit for bit (a NaN from arithmetic matches any
// NaN), special values included, the k-source fold, and the device launch configuration
// arithmetic. Needs no GPU and no CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collx/types.hpp"
#include "device_reduce.hpp"
#include "host_reduce.hpp"
#include "reduce_ops.hpp"
#include "reduce_test_data.hpp"

namespace {

using collx::DataType;
using collx::ReduceOp;
using collx::test::Bytes;
namespace ops = collx::kernels::ops;

std::string describe(DataType type, ReduceOp op, double divisor) {
  std::string s = std::string(collx::to_string(type)) + " " + std::string(collx::to_string(op));
  if (op == ReduceOp::avg) s += " divisor " + std::to_string(divisor);
  return s;
}

std::vector<double> divisors_of(ReduceOp op) {
  if (op == ReduceOp::avg) return {0.0, 3.0, 1.0, 0.1};
  return {0.0};
}

// dst = a op b through the host kernel table built for the generic instruction set.
Bytes host_reduce(DataType type, ReduceOp op, double divisor, const Bytes& a, const Bytes& b,
                  std::size_t n) {
  const auto* table = collx::kernels::kernel_table(collx::kernels::Isa::generic);
  const auto fn = table->reduce[static_cast<int>(type)][static_cast<int>(op)];
  Bytes out(n * collx::size_of(type));
  fn(out.data(), a.data(), b.data(), n, divisor);
  return out;
}

// dst = fold of the sources through reduce_ops.hpp, one element at a time.
Bytes ops_reduce(DataType type, ReduceOp op, double divisor, const std::vector<Bytes>& sources,
                 std::size_t n) {
  Bytes out(n * collx::size_of(type));
  const bool supported = ops::visit_reduction(type, op, divisor, [&](auto format, auto element_op) {
    using Format = decltype(format);
    using S = typename Format::Storage;
    EXPECT_EQ(sizeof(S), collx::size_of(type));
    std::vector<S> values(sources.size());
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < sources.size(); ++k)
        std::memcpy(&values[k], sources[k].data() + i * sizeof(S), sizeof(S));
      S result;
      if (sources.size() == 2) {
        result = ops::reduce_element<Format>(values[0], values[1], element_op);
      } else {
        result =
            ops::reduce_element<Format>(values.data(), static_cast<int>(values.size()), element_op);
      }
      std::memcpy(out.data() + i * sizeof(S), &result, sizeof(S));
    }
  });
  EXPECT_TRUE(supported) << describe(type, op, divisor);
  return out;
}

void expect_same(DataType type, ReduceOp op, double divisor, const Bytes& expected,
                 const Bytes& actual, const std::vector<Bytes>& sources, std::size_t n,
                 const std::string& what) {
  // Which NaN an arithmetic operation on two NaNs returns is not defined (the compiler may swap
  // the operands of a commutative operation; GPUs return the canonical NaN): any NaN matches
  // any NaN there. min and max select an operand and are compared bit for bit, NaNs included.
  const bool arithmetic = op != ReduceOp::min && op != ReduceOp::max;
  const std::size_t i = collx::test::first_difference(type, expected, actual, n, arithmetic);
  if (i == n) return;
  const std::size_t size = collx::size_of(type);
  std::string inputs;
  for (const Bytes& s : sources) {
    inputs += ' ';
    inputs += collx::test::element_hex(type, s.data() + i * size);
  }
  ADD_FAILURE() << what << ": " << describe(type, op, divisor) << ", element " << i << " of " << n
                << ": inputs" << inputs << ", expected "
                << collx::test::element_hex(type, expected.data() + i * size) << ", got "
                << collx::test::element_hex(type, actual.data() + i * size);
}

TEST(ReduceOps, SupportedPairsAreExactlyTheHostKernelTable) {
  const auto* table = collx::kernels::kernel_table(collx::kernels::Isa::generic);
  ASSERT_NE(table, nullptr);
  for (DataType type : collx::test::kAllTypes) {
    for (ReduceOp op : collx::test::kAllOps) {
      const bool visited = ops::visit_reduction(type, op, 0.0, [](auto, auto) {});
      EXPECT_EQ(visited, collx::is_supported(type, op)) << describe(type, op, 0.0);
      EXPECT_EQ(visited, table->reduce[static_cast<int>(type)][static_cast<int>(op)] != nullptr)
          << describe(type, op, 0.0);
    }
  }
}

TEST(ReduceOps, TwoSourcesMatchHostKernelsBitForBit) {
  std::mt19937_64 rng(20240611);
  constexpr std::size_t n = 4099;
  for (DataType type : collx::test::kAllTypes) {
    for (ReduceOp op : collx::test::kAllOps) {
      if (!collx::is_supported(type, op)) continue;
      for (double divisor : divisors_of(op)) {
        for (bool specials : {false, true}) {
          const std::vector<Bytes> sources = {collx::test::random_elements(type, n, rng, specials),
                                              collx::test::random_elements(type, n, rng, specials)};
          expect_same(type, op, divisor, host_reduce(type, op, divisor, sources[0], sources[1], n),
                      ops_reduce(type, op, divisor, sources, n), sources, n,
                      specials ? "special values" : "moderate values");
        }
      }
    }
  }
}

// Every 16-bit pattern as the first operand, against every 16-bit pattern as the second in some
// pairing (b is a permutation of a), both orders.
TEST(ReduceOps, Every16BitPatternMatchesHostKernels) {
  constexpr std::size_t n = 65536;
  Bytes all(n * 2);
  for (std::size_t i = 0; i < n; ++i)
    collx::test::put_bits(all, i, static_cast<std::uint16_t>(i));
  for (DataType type : {DataType::float16, DataType::bfloat16}) {
    for (std::size_t multiplier : {1u, 3u, 40503u}) {
      for (std::size_t shift : {0u, 1u, 0x3c00u, 0x8000u}) {
        Bytes permuted(n * 2);
        for (std::size_t i = 0; i < n; ++i)
          collx::test::put_bits(permuted, i, static_cast<std::uint16_t>(i * multiplier + shift));
        for (ReduceOp op : collx::test::kAllOps) {
          for (double divisor : divisors_of(op)) {
            for (bool swap : {false, true}) {
              const std::vector<Bytes> sources =
                  swap ? std::vector<Bytes>{permuted, all} : std::vector<Bytes>{all, permuted};
              expect_same(type, op, divisor,
                          host_reduce(type, op, divisor, sources[0], sources[1], n),
                          ops_reduce(type, op, divisor, sources, n), sources, n, "all patterns");
            }
          }
        }
      }
    }
  }
}

// k sources: for every type but the 16-bit floats, the fold equals a chain of 2-source host
// reductions (the divisor only in the last one). float16/bfloat16 sum, prod and avg stay in
// float32 across all sources and are rounded once; their min and max select, so they chain too.
TEST(ReduceOps, KSourcesFoldLikeTheHostChainOrRoundOnce) {
  std::mt19937_64 rng(7);
  constexpr std::size_t n = 1031;
  for (int k : {3, 5, 8}) {
    for (DataType type : collx::test::kAllTypes) {
      for (ReduceOp op : collx::test::kAllOps) {
        if (!collx::is_supported(type, op)) continue;
        for (double divisor : divisors_of(op)) {
          for (bool specials : {false, true}) {
            std::vector<Bytes> sources;
            for (int s = 0; s < k; ++s)
              sources.push_back(collx::test::random_elements(type, n, rng, specials));
            const bool rounds_once = (type == DataType::float16 || type == DataType::bfloat16) &&
                                     op != ReduceOp::min && op != ReduceOp::max;
            Bytes expected(n * collx::size_of(type));
            if (rounds_once) {
              const bool half = type == DataType::float16;
              for (std::size_t i = 0; i < n; ++i) {
                const auto value_of = [&](const Bytes& b) {
                  std::uint16_t bits;
                  std::memcpy(&bits, b.data() + 2 * i, 2);
                  return half ? collx::half_bits_to_float(bits)
                              : collx::bfloat16_bits_to_float(bits);
                };
                float acc = value_of(sources[0]);
                for (int s = 1; s < k; ++s)
                  acc = op == ReduceOp::prod ? acc * value_of(sources[s])
                                             : acc + value_of(sources[s]);
                if (op == ReduceOp::avg && divisor != 0.0) acc /= static_cast<float>(divisor);
                collx::test::put_bits(
                    expected, i,
                    half ? collx::float_to_half_bits(acc) : collx::float_to_bfloat16_bits(acc));
              }
            } else {
              expected = host_reduce(type, op, k == 2 ? divisor : 0.0, sources[0], sources[1], n);
              for (int s = 2; s < k; ++s)
                expected =
                    host_reduce(type, op, s == k - 1 ? divisor : 0.0, expected, sources[s], n);
            }
            expect_same(type, op, divisor, expected, ops_reduce(type, op, divisor, sources, n),
                        sources, n, std::to_string(k) + " sources");
          }
        }
      }
    }
  }
}

TEST(ReduceOps, SixteenBitSelectionKeepsBitsAndQuietsNaN) {
  // min/max of 16-bit floats return the chosen operand's own bits; a NaN comes back quiet with
  // its sign and payload, as the host's float32 round trip makes it.
  EXPECT_EQ(ops::Float16Selected::store(ops::Float16Selected::load(0x7c01)), 0x7e01);
  EXPECT_EQ(ops::Float16Selected::store(ops::Float16Selected::load(0xfd23)), 0xff23);
  EXPECT_EQ(ops::BFloat16Selected::store(ops::BFloat16Selected::load(0x7f81)), 0x7fc1);
  for (std::uint32_t bits = 0; bits < 65536; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    if ((h & 0x7fffu) <= 0x7c00u) {
      EXPECT_EQ(ops::Float16Selected::store(ops::Float16Selected::load(h)), h);
    }
    if ((h & 0x7fffu) <= 0x7f80u) {
      EXPECT_EQ(ops::BFloat16Selected::store(ops::BFloat16Selected::load(h)), h);
    }
  }
}

TEST(ReduceOps, IntegerSumAndProductWrap) {
  EXPECT_EQ(
      (ops::reduce_element<ops::Native<std::int8_t>>(std::int8_t{127}, std::int8_t{1}, ops::Sum{})),
      std::int8_t{-128});
  EXPECT_EQ((ops::reduce_element<ops::Native<std::int32_t>>(INT32_MIN, -1, ops::Prod{})),
            INT32_MIN);
  EXPECT_EQ((ops::reduce_element<ops::Native<std::uint64_t>>(~0ull, 2ull, ops::Sum{})), 1ull);
}

TEST(DeviceLaunchConfig, SpreadsSmallWorkAndCapsLargeWorkAtOneWave) {
  using collx::kernels::launch_config_for;
  using collx::kernels::LaunchConfig;
  constexpr unsigned t = collx::kernels::kReduceThreadsPerBlock;
  constexpr unsigned per_sm = collx::kernels::kReduceBlocksPerSm;
  EXPECT_EQ(launch_config_for(0, 132), (LaunchConfig{1, t}));
  EXPECT_EQ(launch_config_for(1, 132), (LaunchConfig{1, t}));
  EXPECT_EQ(launch_config_for(t, 132), (LaunchConfig{1, t}));
  EXPECT_EQ(launch_config_for(t + 1, 132), (LaunchConfig{2, t}));
  EXPECT_EQ(launch_config_for(std::size_t{100} * t, 132), (LaunchConfig{100, t}));
  EXPECT_EQ(launch_config_for(std::size_t{1} << 40, 132), (LaunchConfig{132 * per_sm, t}));
  EXPECT_EQ(launch_config_for(std::size_t{1} << 40, 0), (LaunchConfig{per_sm, t}));
  EXPECT_EQ(launch_config_for(1000, 4, 256, 8), (LaunchConfig{4, 256}));
}

}  // namespace
