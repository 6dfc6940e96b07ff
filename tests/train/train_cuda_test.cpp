// collx-train's CUDA path against its CPU path (label gpu): the backend's operations and a small
// model's forward and backward pass (relative error <= 1e-10 in float64, <= 1e-4 in float32),
// then whole training steps on N ranks (np = 1, 2) with everything in device memory and the
// gradients allreduced from device memory, against the CPU path on the same ranks, and the
// weights identical on every rank. Every test skips (GTEST_SKIP) where --device cuda is not
// available: a build without CUDA, or no visible GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "mlp_math.hpp"
#include "model.hpp"
#include "mpi_test_util.hpp"
#include "random.hpp"
#include "train_test_support.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;
using collx::mlp::Backend;
using collx::mlp::Device;
using collx::mlp::DeviceBuffer;
using collx::mlp::Transpose;
using collx::testing::identical_on_all_ranks;
using collx::train::testing::bitwise_equal;
using collx::train::testing::small_data;
using collx::train::testing::train_steps;
using collx::train::testing::TrainRun;

// Skips the test where the CUDA backend cannot run (the same answer on every rank of a node).
#define SKIP_WITHOUT_CUDA()                                                            \
  do {                                                                                 \
    const std::string reason = collx::mlp::unavailable_reason(Device::cuda);           \
    if (!reason.empty()) GTEST_SKIP() << "--device cuda is not available: " << reason; \
  } while (0)

// ||a - b|| / ||b||
template <class A, class B>
double relative_error(const std::vector<A>& a, const std::vector<B>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    diff += d * d;
    norm += static_cast<double>(b[i]) * static_cast<double>(b[i]);
  }
  return norm > 0 ? std::sqrt(diff) / std::sqrt(norm) : std::sqrt(diff);
}

template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, double low = -1, double high = 1) {
  Random random(seed);
  std::vector<T> v(n);
  for (T& x : v)
    x = static_cast<T>(low + (high - low) * random.uniform());
  return v;
}

template <class T>
std::vector<T> download(Backend<T>& backend, const DeviceBuffer<T>& buffer) {
  std::vector<T> host(buffer.size());
  backend.download(host.data(), buffer.data(), host.size());
  return host;
}

template <class T>
DeviceBuffer<T> upload(Backend<T>& backend, const std::vector<T>& host) {
  DeviceBuffer<T> buffer(backend, host.size());
  backend.upload(buffer.data(), host.data(), host.size());
  return buffer;
}

template <class T>
double tolerance() {
  return sizeof(T) == 8 ? 1e-10 : 1e-4;
}

template <class T>
class CudaBackendTest : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CudaBackendTest, Types);

// Row-major GEMMs with both transposes and leading dimensions wider than the matrices (the
// backward pass's pieces), against OpenBLAS.
TYPED_TEST(CudaBackendTest, GemmMatchesCpu) {
  using T = TypeParam;
  SKIP_WITHOUT_CUDA();
  auto cpu = collx::mlp::make_backend<T>(Device::cpu);
  auto gpu = collx::mlp::make_backend<T>(Device::cuda);
  const std::size_t m = 7, n = 5, k = 6, pad = 3;
  for (Transpose ta : {Transpose::no, Transpose::yes}) {
    for (Transpose tb : {Transpose::no, Transpose::yes}) {
      // op(A) is m x k, op(B) is k x n; stored row-major with padding on every row.
      const std::size_t a_rows = ta == Transpose::no ? m : k, a_cols = ta == Transpose::no ? k : m;
      const std::size_t b_rows = tb == Transpose::no ? k : n, b_cols = tb == Transpose::no ? n : k;
      const std::size_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
      const auto a = random_vector<T>(a_rows * lda, 1);
      const auto b = random_vector<T>(b_rows * ldb, 2);
      for (T beta : {T(0), T(0.5)}) {
        auto c_cpu = random_vector<T>(m * ldc, 3);
        auto c_dev = upload(*gpu, c_cpu);
        const auto a_dev = upload(*gpu, a), b_dev = upload(*gpu, b);
        cpu->gemm(ta, tb, m, n, k, T(1.5), a.data(), lda, b.data(), ldb, beta, c_cpu.data(), ldc);
        gpu->gemm(ta, tb, m, n, k, T(1.5), a_dev.data(), lda, b_dev.data(), ldb, beta, c_dev.data(),
                  ldc);
        EXPECT_LE(relative_error(download(*gpu, c_dev), c_cpu), tolerance<T>())
            << "trans_a " << (ta == Transpose::yes) << " trans_b " << (tb == Transpose::yes)
            << " beta " << beta;
      }
    }
  }
}

// The elementwise kernels and the optimizer updates: the CPU's formulas in the CPU's order.
TYPED_TEST(CudaBackendTest, ElementwiseAndOptimizerKernelsMatchCpu) {
  using T = TypeParam;
  SKIP_WITHOUT_CUDA();
  auto cpu = collx::mlp::make_backend<T>(Device::cpu);
  auto gpu = collx::mlp::make_backend<T>(Device::cuda);
  const double tol = sizeof(T) == 8 ? 1e-14 : 1e-6;
  const std::size_t rows = 37, cols = 19, n = rows * cols;

  // Input gathering and normalisation.
  std::vector<std::uint8_t> images(50 * cols);
  for (std::size_t i = 0; i < images.size(); ++i)
    images[i] = static_cast<std::uint8_t>(i * 37 % 256);
  const std::vector<std::uint32_t> picked = {3, 49, 0, 17, 17, 8};
  std::vector<T> in_cpu(picked.size() * cols);
  DeviceBuffer<T> in_dev(*gpu, in_cpu.size());
  cpu->gather_inputs(images.data(), cols, picked.data(), picked.size(), T(72.9), T(1 / 90.0),
                     in_cpu.data());
  gpu->gather_inputs(images.data(), cols, picked.data(), picked.size(), T(72.9), T(1 / 90.0),
                     in_dev.data());
  EXPECT_LE(relative_error(download(*gpu, in_dev), in_cpu), tol) << "gather_inputs";

  // Bias (with and without ReLU), ReLU's derivative, the bias gradient.
  const auto bias = random_vector<T>(cols, 4);
  const auto bias_dev = upload(*gpu, bias);
  for (bool relu : {false, true}) {
    auto y = random_vector<T>(n, 5);
    auto y_dev = upload(*gpu, y);
    cpu->add_bias(y.data(), bias.data(), rows, cols, relu);
    gpu->add_bias(y_dev.data(), bias_dev.data(), rows, cols, relu);
    EXPECT_LE(relative_error(download(*gpu, y_dev), y), tol) << "add_bias relu " << relu;
  }
  {
    auto grad = random_vector<T>(n, 6);
    const auto act = random_vector<T>(n, 7);
    auto grad_dev = upload(*gpu, grad);
    const auto act_dev = upload(*gpu, act);
    cpu->relu_backward(grad.data(), act.data(), n);
    gpu->relu_backward(grad_dev.data(), act_dev.data(), n);
    EXPECT_LE(relative_error(download(*gpu, grad_dev), grad), tol) << "relu_backward";
  }
  for (bool accumulate : {false, true}) {
    const auto g = random_vector<T>(n, 8);
    const auto g_dev = upload(*gpu, g);
    auto b = random_vector<T>(cols, 9);
    auto b_dev = upload(*gpu, b);
    cpu->bias_gradient(g.data(), rows, cols, b.data(), accumulate);
    gpu->bias_gradient(g_dev.data(), rows, cols, b_dev.data(), accumulate);
    EXPECT_LE(relative_error(download(*gpu, b_dev), b), tol) << "accumulate " << accumulate;
  }

  // Softmax cross-entropy: sums, correct count, gradient.
  {
    const std::size_t classes = 10;
    const auto logits = random_vector<T>(rows * classes, 10, -4, 4);
    std::vector<std::int32_t> labels(rows);
    for (std::size_t r = 0; r < rows; ++r)
      labels[r] = static_cast<std::int32_t>(r * 7 % classes);
    const auto logits_dev = upload(*gpu, logits);
    std::vector<T> g_cpu(rows * classes);
    DeviceBuffer<T> g_dev(*gpu, g_cpu.size());
    const auto s_cpu = cpu->softmax_cross_entropy(logits.data(), labels.data(), rows, classes,
                                                  T(0.25), g_cpu.data());
    const auto s_gpu = gpu->softmax_cross_entropy(logits_dev.data(), labels.data(), rows, classes,
                                                  T(0.25), g_dev.data());
    EXPECT_EQ(s_gpu.correct, s_cpu.correct);
    EXPECT_NEAR(s_gpu.loss_sum, s_cpu.loss_sum, tolerance<T>() * s_cpu.loss_sum);
    EXPECT_LE(relative_error(download(*gpu, g_dev), g_cpu), tolerance<T>());
    const auto no_grad =
        gpu->softmax_cross_entropy(logits_dev.data(), labels.data(), rows, classes, T(0), nullptr);
    EXPECT_EQ(no_grad.loss_sum, s_gpu.loss_sum);
  }

  // AdamW (with and without decay) and SGD with momentum, three steps each.
  for (bool decay : {false, true}) {
    auto p = random_vector<T>(n, 11), m = random_vector<T>(n, 12, 0, 0.1);
    auto v = random_vector<T>(n, 13, 0, 0.01);
    auto p_dev = upload(*gpu, p), m_dev = upload(*gpu, m), v_dev = upload(*gpu, v);
    for (std::int64_t step = 1; step <= 3; ++step) {
      const auto g = random_vector<T>(n, 20 + static_cast<std::uint64_t>(step));
      const auto g_dev = upload(*gpu, g);
      const collx::mlp::AdamWStep h{1e-2, 0.9, 0.999, 1e-8, 0.1, step};
      cpu->adamw_update(p.data(), g.data(), m.data(), v.data(), n, h, decay);
      gpu->adamw_update(p_dev.data(), g_dev.data(), m_dev.data(), v_dev.data(), n, h, decay);
    }
    EXPECT_LE(relative_error(download(*gpu, p_dev), p), tol) << "adamw decay " << decay;
    EXPECT_LE(relative_error(download(*gpu, v_dev), v), tol) << "adamw decay " << decay;

    auto q = random_vector<T>(n, 14), vel = random_vector<T>(n, 15);
    auto q_dev = upload(*gpu, q), vel_dev = upload(*gpu, vel);
    for (int step = 1; step <= 3; ++step) {
      const auto g = random_vector<T>(n, 30 + static_cast<std::uint64_t>(step));
      const auto g_dev = upload(*gpu, g);
      const collx::mlp::SgdStep h{0.05, 0.9, 5e-4};
      cpu->sgd_update(q.data(), g.data(), vel.data(), n, h, decay);
      gpu->sgd_update(q_dev.data(), g_dev.data(), vel_dev.data(), n, h, decay);
    }
    EXPECT_LE(relative_error(download(*gpu, q_dev), q), tol) << "sgd decay " << decay;
  }
}

// A small model's forward pass (through the loss) and backward pass on both backends.
TYPED_TEST(CudaBackendTest, ForwardBackwardMatchesCpu) {
  using T = TypeParam;
  SKIP_WITHOUT_CUDA();
  auto cpu = collx::mlp::make_backend<T>(Device::cpu);
  auto gpu = collx::mlp::make_backend<T>(Device::cuda);
  const ModelShape shape{{29, 24, 16, 7}};
  const std::size_t rows = 33;
  Mlp<T> mlp_cpu(*cpu, shape, rows);
  Mlp<T> mlp_gpu(*gpu, shape, rows);
  std::vector<T> params(mlp_cpu.layout().count());
  initialize_parameters(shape, 3, params.data(), params.size());
  Random random(11);
  for (T& p : params)
    p += static_cast<T>(0.1 * (random.uniform() - 0.5));  // non-zero biases too
  const auto inputs = random_vector<T>(rows * shape.sizes[0], 12);
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels)
    l = static_cast<std::int32_t>(random.below(7));

  const auto params_dev = upload(*gpu, params);
  const auto inputs_dev = upload(*gpu, inputs);
  std::vector<T> grads_cpu(params.size());
  DeviceBuffer<T> grads_dev(*gpu, params.size());
  const T scale = T(1) / static_cast<T>(rows);
  for (bool accumulate : {false, true}) {
    mlp_cpu.forward(params.data(), inputs.data(), rows);
    mlp_gpu.forward(params_dev.data(), inputs_dev.data(), rows);
    const auto loss_cpu = mlp_cpu.loss(labels.data(), true, scale);
    const auto loss_gpu = mlp_gpu.loss(labels.data(), true, scale);
    EXPECT_NEAR(loss_gpu.loss_sum, loss_cpu.loss_sum, tolerance<T>() * loss_cpu.loss_sum);
    EXPECT_EQ(loss_gpu.correct, loss_cpu.correct);
    mlp_cpu.backward(params.data(), inputs.data(), grads_cpu.data(), accumulate, nullptr);
    mlp_gpu.backward(params_dev.data(), inputs_dev.data(), grads_dev.data(), accumulate, nullptr);
    const double error = relative_error(download(*gpu, grads_dev), grads_cpu);
    EXPECT_LE(error, tolerance<T>()) << "accumulate " << accumulate;
    ::testing::Test::RecordProperty(
        std::string("gradient_relative_error_") + (accumulate ? "accumulated" : "first"),
        std::to_string(error));
  }
}

// ---- whole training steps on the ranks of MPI_COMM_WORLD ----

TrainConfig small_config(collx::DataType dtype, Device device) {
  TrainConfig c = collx::train::testing::small_config(dtype, device);
  // Several buckets: the overlap path launches some during the backward pass.
  c.bucket_mb = 0.01;
  c.first_bucket_mb = 0.002;
  return c;
}

class TrainCuda : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
};

// One step on the GPU against one step on the CPU, both on these ranks; the CPU path's own
// tests show that N ranks equal one process.
TEST_F(TrainCuda, OneStepMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  for (collx::DataType dtype : {collx::DataType::float64, collx::DataType::float32}) {
    const double tol = dtype == collx::DataType::float64 ? 1e-10 : 1e-4;
    for (OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adamw}) {
      for (bool shard : {false, true}) {
        TrainConfig config = small_config(dtype, Device::cpu);
        config.optimizer.kind = kind;
        config.shard = shard;
        const TrainRun cpu = train_steps(config, comm, 1);
        config.device = Device::cuda;
        const TrainRun gpu = train_steps(config, comm, 1);
        const std::string what = std::string(collx::to_string(dtype)) + " " +
                                 std::string(to_string(kind)) + (shard ? " sharded" : "");
        EXPECT_LE(relative_error(gpu.params, cpu.params), tol) << what;
        EXPECT_NEAR(gpu.losses[0], cpu.losses[0], tol * cpu.losses[0]) << what;
        EXPECT_EQ(gpu.test.samples, 101u) << what;
        EXPECT_NEAR(gpu.test.loss, cpu.test.loss, tol * cpu.test.loss) << what;
      }
    }
  }
}

// Ten steps: the loss curves stay together (float64).
TEST_F(TrainCuda, TenStepsFollowCpu) {
  SKIP_WITHOUT_CUDA();
  TrainConfig config = small_config(collx::DataType::float64, Device::cpu);
  const TrainRun cpu = train_steps(config, comm, 10);
  config.device = Device::cuda;
  const TrainRun gpu = train_steps(config, comm, 10);
  for (int s = 0; s < 10; ++s)
    EXPECT_NEAR(gpu.losses[s], cpu.losses[s], 1e-9 * cpu.losses[s]) << "step " << s;
  EXPECT_LE(relative_error(gpu.params, cpu.params), 1e-9);
}

TEST_F(TrainCuda, WeightsIdenticalOnEveryRankAfterEveryStep) {
  SKIP_WITHOUT_CUDA();
  for (bool shard : {false, true}) {
    for (bool overlap : {true, false}) {
      TrainConfig config = small_config(collx::DataType::float32, Device::cuda);
      config.verify_replicas = true;  // the trainer's own check after every step
      config.shard = shard;
      config.overlap = overlap;
      auto trainer = make_trainer(config, comm, small_data());
      trainer->initialize();
      for (int s = 0; s < 6; ++s) {
        EXPECT_NO_THROW(trainer->train_step());
        if (trainer->step_in_epoch() == trainer->steps_per_epoch()) trainer->next_epoch();
        const auto params = trainer->parameters();
        ASSERT_TRUE(identical_on_all_ranks(params.data(), params.size() * sizeof(double)))
            << "step " << s << (shard ? " sharded" : "") << (overlap ? "" : " no overlap");
      }
      EXPECT_NE(trainer->backend_description().find("cuda"), std::string::npos);
    }
  }
}

// Overlap on and off: the same kernels and the same reductions, so the same bits.
TEST_F(TrainCuda, OverlapOnOffIsBitwiseIdentical) {
  SKIP_WITHOUT_CUDA();
  for (bool shard : {false, true}) {
    TrainConfig config = small_config(collx::DataType::float64, Device::cuda);
    config.shard = shard;
    const TrainRun overlapped = train_steps(config, comm, 6);
    config.overlap = false;
    const TrainRun after = train_steps(config, comm, 6);
    EXPECT_TRUE(bitwise_equal(overlapped.params, after.params)) << (shard ? "sharded" : "");
    EXPECT_EQ(overlapped.losses, after.losses);
  }
}

}  // namespace
