// The CPU backend of collx-train's math: OpenBLAS cblas for the GEMMs, plain loops (which the
// compiler vectorises) for the rest.
#include "mlp_math.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

#if COLLX_MLP_CUDA
#include "mlp_cuda.hpp"
#endif

namespace collx::mlp {

std::string_view to_string(Device device) {
  return device == Device::cuda ? "cuda" : "cpu";
}

namespace {

CBLAS_TRANSPOSE to_cblas(Transpose t) {
  return t == Transpose::yes ? CblasTrans : CblasNoTrans;
}

blasint to_blasint(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(std::numeric_limits<blasint>::max())) {
    throw std::length_error(std::string("mlp gemm: ") + what + " " + std::to_string(value) +
                            " exceeds the BLAS integer range");
  }
  return static_cast<blasint>(value);
}

template <class T>
class CpuBackend final : public Backend<T> {
 public:
  CpuBackend() {
    // One rank per core: BLAS threads would compete with the other ranks for the same cores.
    openblas_set_num_threads(1);
  }

  Device device() const override { return Device::cpu; }

  std::string description() const override {
    const char* core = openblas_get_corename();
    return std::string("cpu (OpenBLAS, 1 thread, kernels for ") + (core ? core : "?") + ")";
  }

  T* allocate(std::size_t count) override {
    // 64-byte alignment: whole cache lines and AVX-512 vectors for BLAS and the loops.
    const std::size_t bytes = (count * sizeof(T) + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    return static_cast<T*>(p);
  }
  void release(T* data) noexcept override { std::free(data); }
  void upload(T* dst, const T* host_src, std::size_t count) override {
    if (count) std::memcpy(dst, host_src, count * sizeof(T));
  }
  void download(T* host_dst, const T* src, std::size_t count) override {
    if (count) std::memcpy(host_dst, src, count * sizeof(T));
  }
  void fill_zero(T* data, std::size_t count) override {
    if (count) std::memset(data, 0, count * sizeof(T));
  }

  void gather_inputs(const std::uint8_t* images, std::size_t features, const std::uint32_t* rows,
                     std::size_t count, T mean, T inv_std, T* out) override {
    for (std::size_t r = 0; r < count; ++r) {
      const std::uint8_t* src = images + static_cast<std::size_t>(rows[r]) * features;
      T* dst = out + r * features;
      for (std::size_t j = 0; j < features; ++j) {
        dst[j] = (static_cast<T>(src[j]) - mean) * inv_std;
      }
    }
  }

  void gemm(Transpose trans_a, Transpose trans_b, std::size_t m, std::size_t n, std::size_t k,
            T alpha, const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
            std::size_t ldc) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      // An empty product: C = beta * C (BLAS would do the same; explicit for beta == 0).
      for (std::size_t i = 0; i < m; ++i) {
        for (std::size_t j = 0; j < n; ++j) {
          c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
        }
      }
      return;
    }
    const blasint bm = to_blasint(m, "m"), bn = to_blasint(n, "n"), bk = to_blasint(k, "k");
    const blasint blda = to_blasint(lda, "lda"), bldb = to_blasint(ldb, "ldb"),
                  bldc = to_blasint(ldc, "ldc");
    if constexpr (std::is_same_v<T, float>) {
      cblas_sgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a, blda,
                  b, bldb, beta, c, bldc);
    } else {
      cblas_dgemm(CblasRowMajor, to_cblas(trans_a), to_cblas(trans_b), bm, bn, bk, alpha, a, blda,
                  b, bldb, beta, c, bldc);
    }
  }

  void add_bias(T* y, const T* bias, std::size_t rows, std::size_t cols, bool relu) override {
    for (std::size_t r = 0; r < rows; ++r) {
      T* row = y + r * cols;
      if (relu) {
        for (std::size_t j = 0; j < cols; ++j) {
          const T v = row[j] + bias[j];
          row[j] = v > T(0) ? v : T(0);
        }
      } else {
        for (std::size_t j = 0; j < cols; ++j)
          row[j] += bias[j];
      }
    }
  }

  void relu_backward(T* grad, const T* activation, std::size_t count) override {
    for (std::size_t i = 0; i < count; ++i) {
      grad[i] = activation[i] > T(0) ? grad[i] : T(0);
    }
  }

  void bias_gradient(const T* grad_out, std::size_t rows, std::size_t cols, T* grad_bias,
                     bool accumulate) override {
    if (!accumulate) fill_zero(grad_bias, cols);
    for (std::size_t r = 0; r < rows; ++r) {
      const T* row = grad_out + r * cols;
      for (std::size_t j = 0; j < cols; ++j)
        grad_bias[j] += row[j];
    }
  }

  LossSums softmax_cross_entropy(const T* logits, const std::int32_t* labels, std::size_t rows,
                                 std::size_t classes, T grad_scale, T* grad_logits) override {
    LossSums sums;
    for (std::size_t r = 0; r < rows; ++r) {
      const T* z = logits + r * classes;
      const auto label = static_cast<std::size_t>(labels[r]);
      std::size_t argmax = 0;
      for (std::size_t j = 1; j < classes; ++j) {
        if (z[j] > z[argmax]) argmax = j;
      }
      if (argmax == label) ++sums.correct;
      const T max = z[argmax];
      T total = 0;
      for (std::size_t j = 0; j < classes; ++j)
        total += std::exp(z[j] - max);
      // -log softmax = log(sum exp(z - max)) - (z_label - max), >= 0 up to rounding.
      sums.loss_sum += std::log(static_cast<double>(total)) - static_cast<double>(z[label] - max);
      if (grad_logits) {
        T* g = grad_logits + r * classes;
        const T inv_total = T(1) / total;
        for (std::size_t j = 0; j < classes; ++j) {
          const T p = std::exp(z[j] - max) * inv_total;
          g[j] = (p - (j == label ? T(1) : T(0))) * grad_scale;
        }
      }
    }
    return sums;
  }

  void adamw_update(T* params, const T* grads, T* first_moment, T* second_moment, std::size_t count,
                    const AdamWStep& h, bool decay) override {
    const double t = static_cast<double>(h.step);
    const T keep = static_cast<T>(decay ? 1.0 - h.lr * h.weight_decay : 1.0);
    const T beta1 = static_cast<T>(h.beta1), one_minus_beta1 = static_cast<T>(1.0 - h.beta1);
    const T beta2 = static_cast<T>(h.beta2), one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
    // PyTorch's arrangement: step = lr / (1 - beta1^t), denominator sqrt(v) / sqrt(1 - beta2^t)
    // + eps.
    const T step_size = static_cast<T>(h.lr / (1.0 - std::pow(h.beta1, t)));
    const T inv_sqrt_correction2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(h.beta2, t)));
    const T eps = static_cast<T>(h.eps);
    for (std::size_t i = 0; i < count; ++i) {
      const T g = grads[i];
      const T m = beta1 * first_moment[i] + one_minus_beta1 * g;
      const T v = beta2 * second_moment[i] + one_minus_beta2 * (g * g);
      first_moment[i] = m;
      second_moment[i] = v;
      const T denominator = std::sqrt(v) * inv_sqrt_correction2 + eps;
      params[i] = params[i] * keep - step_size * (m / denominator);
    }
  }

  void sgd_update(T* params, const T* grads, T* velocity, std::size_t count, const SgdStep& h,
                  bool decay) override {
    const T weight_decay = static_cast<T>(decay ? h.weight_decay : 0.0);
    const T momentum = static_cast<T>(h.momentum);
    const T lr = static_cast<T>(h.lr);
    for (std::size_t i = 0; i < count; ++i) {
      const T g = grads[i] + weight_decay * params[i];
      const T v = momentum * velocity[i] + g;
      velocity[i] = v;
      params[i] -= lr * v;
    }
  }
};

}  // namespace

std::string unavailable_reason(Device device) {
  if (device == Device::cpu) return {};
#if COLLX_MLP_CUDA
  return cuda_unavailable_reason();
#else
  return "this build of collx has no CUDA support (configure it where nvcc and the CUDA "
         "toolkit with cuBLAS are installed, -DCOLLX_CUDA=ON)";
#endif
}

template <class T>
std::unique_ptr<Backend<T>> make_backend(Device device, int local_rank) {
  if (device == Device::cuda) {
    const std::string reason = unavailable_reason(device);
    if (!reason.empty()) {
      throw std::runtime_error("--device cuda is not available: " + reason + "; use --device cpu");
    }
#if COLLX_MLP_CUDA
    return make_cuda_backend<T>(local_rank);
#endif
  }
  (void)local_rank;
  return std::make_unique<CpuBackend<T>>();
}

template std::unique_ptr<Backend<float>> make_backend<float>(Device, int);
template std::unique_ptr<Backend<double>> make_backend<double>(Device, int);

}  // namespace collx::mlp
