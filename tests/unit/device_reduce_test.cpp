// The CUDA reduction kernels (device_reduce.hpp) against the host kernels: every type/op pair,
// sizes with heads and tails, pointers aligned, equally misaligned (peeled) and misaligned
// relative to each other (element path), in place and out of place, 2 to 8 sources; the bytes
// around the destination must be untouched. Skips when there is no CUDA device. The argument
// checks, which need no device, always run.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "collx/error.hpp"
#include "device_reduce.hpp"
#include "device_runtime.hpp"
#include "host_reduce.hpp"
#include "reduce_ops.hpp"
#include "reduce_test_data.hpp"

namespace {

using collx::DataType;
using collx::ReduceOp;
using collx::test::Bytes;
namespace ops = collx::kernels::ops;

constexpr std::size_t kSlackElements = 40;  // guard elements after every region
constexpr unsigned char kDstGuard = 0xa5;
constexpr unsigned char kSourceGuard = 0x5a;

std::string describe(DataType type, ReduceOp op, double divisor) {
  std::string s = std::string(collx::to_string(type)) + " " + std::string(collx::to_string(op));
  if (op == ReduceOp::avg) s += " divisor " + std::to_string(divisor);
  return s;
}

std::vector<double> divisors_of(ReduceOp op) {
  if (op == ReduceOp::avg) return {0.0, 3.0};
  return {0.0};
}

void cuda_ok(cudaError_t status, const char* what) {
  ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorString(status);
}

// Expected results on the host: 2 sources through the host kernel table, k sources through the
// operators of reduce_ops.hpp (checked against that table by reduce_ops_test).
Bytes host_reference(DataType type, ReduceOp op, double divisor, const std::vector<Bytes>& src,
                     std::size_t n) {
  Bytes out(n * collx::size_of(type));
  if (src.size() == 2) {
    const auto* table = collx::kernels::kernel_table(collx::kernels::Isa::generic);
    table->reduce[static_cast<int>(type)][static_cast<int>(op)](out.data(), src[0].data(),
                                                                src[1].data(), n, divisor);
    return out;
  }
  ops::visit_reduction(type, op, divisor, [&](auto format, auto element_op) {
    using Format = decltype(format);
    using S = typename Format::Storage;
    std::vector<S> values(src.size());
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < src.size(); ++k)
        std::memcpy(&values[k], src[k].data() + i * sizeof(S), sizeof(S));
      const S r =
          ops::reduce_element<Format>(values.data(), static_cast<int>(values.size()), element_op);
      std::memcpy(out.data() + i * sizeof(S), &r, sizeof(S));
    }
  });
  return out;
}

// Where dst and the sources sit: element offsets into their buffers, and which source (if any)
// dst is.
struct Layout {
  std::vector<std::size_t> source_offsets;  // one per source
  std::size_t dst_offset = 0;
  int dst_is_source = -1;  // -1: a buffer of its own
  std::string name;
};

// Offsets (in elements) that give each pointer pattern for this element size: all 16-byte
// aligned (vector path), all equally misaligned (head peeled), misaligned relative to each other
// (element path), and in place (dst is a source), aligned and misaligned.
enum LayoutIndex { kAligned = 0, kMisalignedByOne, kMisalignedByPackMinusOne, kRelative };
std::vector<Layout> layouts_for(DataType type, int sources) {
  const std::size_t per_pack = 16 / collx::size_of(type);  // >= 2
  const auto all = [&](std::size_t offset, std::size_t dst, const std::string& name) {
    return Layout{std::vector<std::size_t>(sources, offset), dst, -1, name};
  };
  std::vector<Layout> layouts = {all(0, 0, "aligned"), all(1, 1, "all misaligned by 1"),
                                 all(per_pack - 1, per_pack - 1, "all misaligned by pack-1")};
  Layout relative = all(0, 0, "relatively misaligned");
  relative.source_offsets[0] = 1;
  layouts.push_back(relative);
  Layout dst_off = all(0, 1, "dst misaligned relative to the sources");
  layouts.push_back(dst_off);
  for (auto [offset, which] : {std::pair{0, 0}, std::pair{1, sources - 1}}) {
    Layout in_place = all(offset, 0,
                          "in place (dst is source " + std::to_string(which) + ", offset " +
                              std::to_string(offset) + ")");
    in_place.dst_is_source = which;
    layouts.push_back(in_place);
  }
  return layouts;
}

class DeviceReduce : public ::testing::Test {
 protected:
  void SetUp() override {
    if (collx::kernels::cuda_device_count() == 0) {
      GTEST_SKIP() << "no CUDA device (cudaGetDeviceCount reports none): GPU tests skipped";
    }
    stream_ = std::make_unique<collx::kernels::CudaStream>();
  }
  void TearDown() override {
    for (void* p : buffers_)
      cudaFree(p);
  }

  void* device_buffer(std::size_t index, std::size_t bytes) {
    while (buffers_.size() <= index) {
      buffers_.push_back(nullptr);
      capacities_.push_back(0);
    }
    if (capacities_[index] < bytes) {
      cudaFree(buffers_[index]);
      buffers_[index] = nullptr;
      EXPECT_EQ(cudaMalloc(&buffers_[index], bytes), cudaSuccess);
      capacities_[index] = bytes;
    }
    return buffers_[index];
  }

  cudaStream_t stream() const { return static_cast<cudaStream_t>(stream_->handle()); }

  // Runs one reduction on the device in `layout` and checks the whole destination buffer:
  // the result in [dst_offset, dst_offset + n), the guard bytes untouched around it.
  // `values`: the expected result (host_reference of the sources).
  void check(DataType type, ReduceOp op, double divisor, std::size_t n,
             const std::vector<Bytes>& sources, const Bytes& values, const Layout& layout,
             const std::string& what) {
    const std::size_t size = collx::size_of(type);
    const int k = static_cast<int>(sources.size());
    std::vector<Bytes> images;
    std::vector<unsigned char*> bases;
    std::vector<const void*> source_pointers;
    for (int s = 0; s < k; ++s) {
      const std::size_t offset = layout.source_offsets[s];
      Bytes image((offset + n + kSlackElements) * size, kSourceGuard);
      std::copy(sources[s].begin(), sources[s].end(), image.begin() + offset * size);
      auto* base = static_cast<unsigned char*>(device_buffer(s, image.size()));
      cuda_ok(cudaMemcpyAsync(base, image.data(), image.size(), cudaMemcpyHostToDevice, stream()),
              "upload source");
      images.push_back(std::move(image));
      bases.push_back(base);
      source_pointers.push_back(base + offset * size);
    }
    Bytes dst_image;
    unsigned char* dst_base;
    std::size_t dst_offset;
    if (layout.dst_is_source >= 0) {
      dst_image = images[layout.dst_is_source];
      dst_base = bases[layout.dst_is_source];
      dst_offset = layout.source_offsets[layout.dst_is_source];
    } else {
      dst_offset = layout.dst_offset;
      dst_image.assign((dst_offset + n + kSlackElements) * size, kDstGuard);
      dst_base = static_cast<unsigned char*>(device_buffer(k, dst_image.size()));
      cuda_ok(cudaMemcpyAsync(dst_base, dst_image.data(), dst_image.size(), cudaMemcpyHostToDevice,
                              stream()),
              "upload dst");
    }

    try {
      collx::kernels::device_reduce(dst_base + dst_offset * size, source_pointers, n, type, op,
                                    divisor, stream_->handle());
    } catch (const collx::Error& e) {
      FAIL() << what << ": " << describe(type, op, divisor) << ": " << e.what();
    }
    Bytes result(dst_image.size());
    cuda_ok(
        cudaMemcpyAsync(result.data(), dst_base, result.size(), cudaMemcpyDeviceToHost, stream()),
        "download dst");
    cuda_ok(cudaStreamSynchronize(stream()), "synchronize");

    Bytes expected = dst_image;
    std::copy(values.begin(), values.end(), expected.begin() + dst_offset * size);
    const bool arithmetic = op != ReduceOp::min && op != ReduceOp::max;
    for (std::size_t i = 0; i < expected.size() / size; ++i) {
      const bool inside = i >= dst_offset && i < dst_offset + n;
      if (!collx::test::same_element(type, expected.data(), result.data(), i,
                                     inside && arithmetic)) {
        std::string inputs;
        if (inside) {
          for (const Bytes& s : sources) {
            inputs += ' ';
            inputs += collx::test::element_hex(type, s.data() + (i - dst_offset) * size);
          }
        }
        FAIL() << what << ": " << describe(type, op, divisor) << ", n " << n << ", " << layout.name
               << ", " << sources.size() << " sources: "
               << (inside ? "element " + std::to_string(i - dst_offset) + " (inputs" + inputs + ")"
                          : "guard element at buffer index " + std::to_string(i))
               << ": expected " << collx::test::element_hex(type, expected.data() + i * size)
               << ", got " << collx::test::element_hex(type, result.data() + i * size);
      }
    }
  }

  std::unique_ptr<collx::kernels::CudaStream> stream_;
  std::vector<void*> buffers_;
  std::vector<std::size_t> capacities_;
};

TEST_F(DeviceReduce, EveryPairSmallSizesEveryLayout) {
  std::mt19937_64 rng(11);
  const std::size_t sizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 129, 1000, 4099};
  for (DataType type : collx::test::kAllTypes) {
    for (bool specials : {false, true}) {
      for (std::size_t n : sizes) {
        const std::vector<Bytes> sources = {collx::test::random_elements(type, n, rng, specials),
                                            collx::test::random_elements(type, n, rng, specials)};
        for (ReduceOp op : collx::test::kAllOps) {
          if (!collx::is_supported(type, op)) continue;
          for (double divisor : divisors_of(op)) {
            const Bytes values = host_reference(type, op, divisor, sources, n);
            for (const Layout& layout : layouts_for(type, 2)) {
              check(type, op, divisor, n, sources, values, layout,
                    specials ? "specials" : "moderate");
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

// Sizes that take many blocks, whole unrolled rounds and a partial last round (a float32 round
// of an H100 covers 132 SMs x 1024 threads x 4 packs x 4 elements = 2.2 M elements).
TEST_F(DeviceReduce, EveryPairLargeSizes) {
  std::mt19937_64 rng(12);
  const std::size_t sizes[] = {65543, (std::size_t{1} << 20) + 5, 5'000'003};
  for (DataType type : collx::test::kAllTypes) {
    const auto layouts = layouts_for(type, 2);
    for (std::size_t n : sizes) {
      const std::vector<Bytes> sources = {collx::test::random_elements(type, n, rng, true),
                                          collx::test::random_elements(type, n, rng, false)};
      for (ReduceOp op : collx::test::kAllOps) {
        if (!collx::is_supported(type, op)) continue;
        for (double divisor : divisors_of(op)) {
          const Bytes values = host_reference(type, op, divisor, sources, n);
          for (int l : {kAligned, kMisalignedByOne, kRelative}) {
            check(type, op, divisor, n, sources, values, layouts[l], "large");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// Every 16-bit pattern against a permutation of every pattern: the device conversions
// (widening, the pair-wise rounding, NaN quieting in min/max) on all inputs.
TEST_F(DeviceReduce, Every16BitPattern) {
  constexpr std::size_t n = 65536;
  Bytes all(n * 2);
  Bytes permuted(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    collx::test::put_bits(all, i, static_cast<std::uint16_t>(i));
    collx::test::put_bits(permuted, i, static_cast<std::uint16_t>(i * 40503u + 0x3c00u));
  }
  const std::vector<std::vector<Bytes>> orders = {{all, permuted}, {permuted, all}};
  for (DataType type : {DataType::float16, DataType::bfloat16}) {
    for (ReduceOp op : collx::test::kAllOps) {
      for (double divisor : divisors_of(op)) {
        for (const auto& sources : orders) {
          const Bytes values = host_reference(type, op, divisor, sources, n);
          for (int l : {kAligned, kRelative}) {
            check(type, op, divisor, n, sources, values, layouts_for(type, 2)[l], "all patterns");
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST_F(DeviceReduce, ThreeToEightSourcesInOnePass) {
  std::mt19937_64 rng(13);
  const std::size_t sizes[] = {1, 17, 4099, (std::size_t{1} << 20) + 3};
  for (int k : {3, 4, 8}) {
    for (DataType type : collx::test::kAllTypes) {
      const auto layouts = layouts_for(type, k);
      for (std::size_t n : sizes) {
        std::vector<Bytes> sources;
        for (int s = 0; s < k; ++s)
          sources.push_back(collx::test::random_elements(type, n, rng, s % 2 == 0));
        for (ReduceOp op : collx::test::kAllOps) {
          if (!collx::is_supported(type, op)) continue;
          for (double divisor : divisors_of(op)) {
            const Bytes values = host_reference(type, op, divisor, sources, n);
            for (std::size_t l = 0; l < layouts.size(); ++l) {
              if (n > 4099 && l != kAligned && l != kRelative) continue;
              check(type, op, divisor, n, sources, values, layouts[l], "k sources");
              if (HasFatalFailure()) return;
            }
          }
        }
      }
    }
  }
}

TEST_F(DeviceReduce, LegacyDefaultStream) {
  // stream nullptr: the legacy default stream, ordered with cudaMemcpy.
  constexpr std::size_t n = 1000;
  std::vector<float> a(n, 1.5f), b(n, 2.25f), out(n, 0.0f);
  void* da = device_buffer(0, n * 4);
  void* db = device_buffer(1, n * 4);
  cuda_ok(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice), "upload a");
  cuda_ok(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice), "upload b");
  collx::kernels::device_reduce(da, da, db, n, DataType::float32, ReduceOp::avg, 2.0);
  cuda_ok(cudaMemcpy(out.data(), da, n * 4, cudaMemcpyDeviceToHost), "download");
  for (float v : out)
    ASSERT_EQ(v, 1.875f);
}

// ---- argument checks: before any CUDA call, so they run without a device too ----
collx::ErrorCode error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.collective(), "device_reduce");
    return e.code();
  }
  ADD_FAILURE() << "no collx::Error thrown";
  return collx::ErrorCode::internal;
}

TEST(DeviceReduceArguments, RejectedBeforeAnythingIsLaunched) {
  using collx::ErrorCode;
  using collx::kernels::device_reduce;
  (void)cudaGetLastError();
  const cudaError_t settled = cudaGetLastError();  // cudaSuccess, or a missing driver's error
  alignas(16) static float buffer[64];
  float* a = buffer;
  float* b = buffer + 16;
  float* d = buffer + 32;
  EXPECT_EQ(error_of([&] { device_reduce(d, nullptr, b, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(error_of([&] { device_reduce(nullptr, a, b, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(error_of([&] { device_reduce(d, a, b, 4, DataType::int32, ReduceOp::avg, 2.0); }),
            ErrorCode::unsupported);
  // Partial overlap of dst with a source (the same buffer is fine, see the in-place tests).
  EXPECT_EQ(error_of([&] { device_reduce(a + 1, a, b, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(error_of([&] { device_reduce(b, a, b + 3, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  // A float pointer that is not float-aligned.
  const void* odd = reinterpret_cast<const unsigned char*>(a) + 2;
  EXPECT_EQ(error_of([&] { device_reduce(d, odd, b, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  // Source counts: 2 to kMaxDeviceReduceSources.
  const void* one[] = {a};
  EXPECT_EQ(error_of([&] {
              device_reduce(d, std::span<const void* const>(one), 4, DataType::float32,
                            ReduceOp::sum);
            }),
            ErrorCode::invalid_argument);
  std::vector<const void*> nine(collx::kernels::kMaxDeviceReduceSources + 1, a);
  EXPECT_EQ(error_of([&] { device_reduce(d, nine, 4, DataType::float32, ReduceOp::sum); }),
            ErrorCode::invalid_argument);
  EXPECT_EQ(cudaGetLastError(), settled);
}

TEST(DeviceReduceArguments, ZeroElementsIsANoOp) {
  // Null pointers are fine with a zero count, and nothing touches the device.
  EXPECT_NO_THROW(collx::kernels::device_reduce(nullptr, nullptr, nullptr, 0, DataType::float16,
                                                ReduceOp::max));
  EXPECT_THROW(collx::kernels::device_reduce(nullptr, nullptr, nullptr, 0, DataType::uint8,
                                             ReduceOp::avg, 2.0),
               collx::Error);
}

}  // namespace
