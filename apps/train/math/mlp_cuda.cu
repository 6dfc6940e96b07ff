// The CUDA backend of collx-train's math: cuBLAS (cublasSgemm / cublasDgemm) for the GEMMs and
// the kernels below for the rest, all on device memory and one stream per backend.
//
// Each kernel computes what the CPU backend's loop computes (mlp_math.cpp), with the same
// formula in the same order of operations: this file is compiled without FMA contraction
// (-fmad=false), with IEEE division and square root, so bias add, ReLU, its derivative, the bias
// gradient (rows summed in order, one thread per column), the input normalisation and the
// SGD / AdamW updates give the CPU's bits for the same inputs. What differs: exp and log (CUDA's
// are within 1-2 ulp, glibc's too, not always the same ulp), and the GEMMs (cuBLAS sums the
// products in another order than OpenBLAS). Results are close, not equal: the tests ask for a
// relative error <= 1e-10 in float64 and <= 1e-4 in float32 (tests/train/train_cuda_test.cpp).
//
// cuBLAS runs in CUBLAS_DEFAULT_MATH (no TF32 for float32), on the backend's stream, with one
// handle per backend: the same inputs give the same bits on the same GPU model, run after run
// (cuBLAS's reproducibility guarantee), which the trainer's replica checks rely on.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "mlp_cuda.hpp"

namespace collx::mlp {

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error(std::string("collx-train (cuda): ") + what + ": " +
                             cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
  }
}

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("collx-train (cuda): ") + what + ": " +
                             cublasGetStatusName(status) + " (" + cublasGetStatusString(status) +
                             ")");
  }
}

// After a kernel launch: a bad configuration shows here, a fault at the next synchronisation.
void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

constexpr unsigned kThreads = 256;

// Blocks of a grid-stride loop over n items: enough to fill the device, no more than needed.
unsigned blocks_for(std::size_t n, int sm_count) {
  const std::size_t needed = (n + kThreads - 1) / kThreads;
  const std::size_t most = static_cast<std::size_t>(std::max(sm_count, 1)) * 8;
  return static_cast<unsigned>(std::max<std::size_t>(1, std::min(needed, most)));
}

int to_int(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(INT_MAX)) {
    throw std::length_error(std::string("mlp gemm (cuBLAS): ") + what + " " +
                            std::to_string(value) + " exceeds the cuBLAS integer range");
  }
  return static_cast<int>(value);
}

cublasOperation_t to_cublas(Transpose t) {
  return t == Transpose::yes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// ---- kernels: each the CPU backend's loop body, in a grid-stride loop ----

template <class T>
__global__ void normalize_kernel(const std::uint8_t* pixels, std::size_t n, T mean, T inv_std,
                                 T* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = (static_cast<T>(pixels[i]) - mean) * inv_std;
  }
}

// C (m x n, ldc) = beta * C; beta == 0 writes zeros (the k == 0 GEMM).
template <class T>
__global__ void scale_kernel(T* c, std::size_t m, std::size_t n, std::size_t ldc, T beta) {
  const std::size_t total = m * n;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / n, j = i % n;
    c[r * ldc + j] = beta == T(0) ? T(0) : beta * c[r * ldc + j];
  }
}

template <class T>
__global__ void add_bias_kernel(T* y, const T* bias, std::size_t rows, std::size_t cols,
                                bool relu) {
  const std::size_t total = rows * cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const T v = y[i] + bias[i % cols];
    y[i] = relu ? (v > T(0) ? v : T(0)) : v;
  }
}

template <class T>
__global__ void relu_backward_kernel(T* grad, const T* activation, std::size_t count) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    grad[i] = activation[i] > T(0) ? grad[i] : T(0);
  }
}

// One thread per column, the rows summed in order (the CPU's order, hence its bits); adjacent
// threads read adjacent columns, so each row is read coalesced.
template <class T>
__global__ void bias_gradient_kernel(const T* grad_out, std::size_t rows, std::size_t cols,
                                     T* grad_bias, bool accumulate) {
  for (std::size_t j = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; j < cols;
       j += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    T sum = accumulate ? grad_bias[j] : T(0);
    for (std::size_t r = 0; r < rows; ++r)
      sum += grad_out[r * cols + j];
    grad_bias[j] = sum;
  }
}

// One thread per row: the CPU's loop over the classes. row_loss[r] = -log softmax(z)[label] in
// double, row_correct[r] = 1 when the first largest logit is the label's.
template <class T>
__global__ void softmax_cross_entropy_kernel(const T* logits, const std::int32_t* labels,
                                             std::size_t rows, std::size_t classes, T grad_scale,
                                             T* grad_logits, double* row_loss,
                                             std::uint8_t* row_correct) {
  for (std::size_t r = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const T* z = logits + r * classes;
    const auto label = static_cast<std::size_t>(labels[r]);
    std::size_t argmax = 0;
    for (std::size_t j = 1; j < classes; ++j) {
      if (z[j] > z[argmax]) argmax = j;
    }
    row_correct[r] = argmax == label ? 1 : 0;
    const T max = z[argmax];
    T total = 0;
    for (std::size_t j = 0; j < classes; ++j)
      total += exp(z[j] - max);
    row_loss[r] = log(static_cast<double>(total)) - static_cast<double>(z[label] - max);
    if (grad_logits) {
      T* g = grad_logits + r * classes;
      const T inv_total = T(1) / total;
      for (std::size_t j = 0; j < classes; ++j) {
        const T p = exp(z[j] - max) * inv_total;
        g[j] = (p - (j == label ? T(1) : T(0))) * grad_scale;
      }
    }
  }
}

template <class T>
struct AdamWArgs {
  T keep, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_correction2, eps;
};

template <class T>
__global__ void adamw_kernel(T* params, const T* grads, T* first_moment, T* second_moment,
                             std::size_t count, AdamWArgs<T> a) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const T g = grads[i];
    const T m = a.beta1 * first_moment[i] + a.one_minus_beta1 * g;
    const T v = a.beta2 * second_moment[i] + a.one_minus_beta2 * (g * g);
    first_moment[i] = m;
    second_moment[i] = v;
    const T denominator = sqrt(v) * a.inv_sqrt_correction2 + a.eps;
    params[i] = params[i] * a.keep - a.step_size * (m / denominator);
  }
}

template <class T>
__global__ void sgd_kernel(T* params, const T* grads, T* velocity, std::size_t count,
                           T weight_decay, T momentum, T lr) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const T g = grads[i] + weight_decay * params[i];
    const T v = momentum * velocity[i] + g;
    velocity[i] = v;
    params[i] -= lr * v;
  }
}

// Pinned host memory that grows on demand; the copy that last read it is marked by an event, so
// it is rewritten only once that copy is done.
// (Created on first use, on the backend's device: members are built before it is made current.)
class PinnedStaging {
 public:
  PinnedStaging() = default;
  ~PinnedStaging() {
    if (data_) (void)cudaFreeHost(data_);
    if (done_) (void)cudaEventDestroy(done_);
    (void)cudaGetLastError();
  }
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // At least `bytes`, free to be written (the previous copy out of it has completed).
  void* get(std::size_t bytes) {
    if (done_) check(cudaEventSynchronize(done_), "cudaEventSynchronize (staging)");
    if (bytes > capacity_) {
      if (data_) check(cudaFreeHost(data_), "cudaFreeHost");
      data_ = nullptr;
      capacity_ = 0;
      check(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault), "cudaHostAlloc");
      capacity_ = bytes;
    }
    return data_;
  }
  // After enqueueing the copy out of it on `stream`.
  void used(cudaStream_t stream) {
    if (!done_) check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(done_, stream), "cudaEventRecord");
  }

 private:
  void* data_ = nullptr;
  std::size_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
};

// Device scratch that grows on demand (used on the backend's stream only).
template <class E>
class Scratch {
 public:
  Scratch() = default;
  ~Scratch() {
    if (data_) (void)cudaFree(data_);
    (void)cudaGetLastError();
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  E* get(std::size_t count) {
    if (count > capacity_) {
      // cudaFree waits for the device: no kernel still uses the old buffer.
      if (data_) check(cudaFree(data_), "cudaFree");
      data_ = nullptr;
      capacity_ = 0;
      check(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(E)), "cudaMalloc");
      capacity_ = count;
    }
    return data_;
  }

 private:
  E* data_ = nullptr;
  std::size_t capacity_ = 0;
};

template <class T>
class CudaBackend final : public Backend<T> {
 public:
  explicit CudaBackend(int local_rank) {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count < 1) throw std::runtime_error("collx-train (cuda): no CUDA device is visible");
    device_ = (local_rank < 0 ? 0 : local_rank) % count;
    devices_ = count;
    check(cudaSetDevice(device_), "cudaSetDevice");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = prop.name;
    sm_count_ = prop.multiProcessorCount;
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cublasCreate(&cublas_), "cublasCreate");
    check(cublasSetStream(cublas_, stream_), "cublasSetStream");
    check(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
    int version = 0;
    check(cublasGetVersion(cublas_, &version), "cublasGetVersion");
    cublas_version_ = version;
  }

  ~CudaBackend() override {
    // Nothing may be in flight when the buffers of the work go away; errors cannot be reported.
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamSynchronize(side_stream_);
    for (cudaEvent_t e : events_) {
      if (e) (void)cudaEventDestroy(e);
    }
    if (cublas_) (void)cublasDestroy(cublas_);
    (void)cudaStreamDestroy(side_stream_);
    (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }

  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda; }

  std::string description() const override {
    const int v = cublas_version_;
    return "cuda (" + name_ + ", device " + std::to_string(device_) + " of " +
           std::to_string(devices_) + ", cuBLAS " + std::to_string(v / 10000) + "." +
           std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) + ")";
  }

  T* allocate(std::size_t count) override {
    void* p = nullptr;
    check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc");
    const cudaError_t status = cudaMemsetAsync(p, 0, count * sizeof(T), stream_);
    if (status != cudaSuccess) {
      (void)cudaFree(p);
      check(status, "cudaMemsetAsync");
    }
    return static_cast<T*>(p);
  }
  void release(T* data) noexcept override {
    // cudaFree waits for the work in flight on the device.
    if (cudaFree(data) != cudaSuccess) (void)cudaGetLastError();
  }
  void upload(T* dst, const T* host_src, std::size_t count) override {
    if (count == 0) return;
    check(cudaMemcpyAsync(dst, host_src, count * sizeof(T), cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (upload)");
    // The caller may reuse or free its host memory on return.
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (upload)");
  }
  void download(T* host_dst, const T* src, std::size_t count) override {
    if (count == 0) return;
    check(cudaMemcpyAsync(host_dst, src, count * sizeof(T), cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (download)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (download)");
  }
  void fill_zero(T* data, std::size_t count) override {
    if (count) {
      check(cudaMemsetAsync(data, 0, count * sizeof(T), stream_), "cudaMemsetAsync");
    }
  }

  // The selected rows' bytes are gathered on the host into pinned memory (a quarter of the
  // float32 bytes), copied, and normalised on the device.
  void gather_inputs(const std::uint8_t* images, std::size_t features, const std::uint32_t* rows,
                     std::size_t count, T mean, T inv_std, T* out) override {
    const std::size_t n = count * features;
    if (n == 0) return;
    auto* host = static_cast<std::uint8_t*>(pixels_staging_.get(n));
    for (std::size_t r = 0; r < count; ++r) {
      std::memcpy(host + r * features, images + static_cast<std::size_t>(rows[r]) * features,
                  features);
    }
    std::uint8_t* pixels = pixels_.get(n);
    check(cudaMemcpyAsync(pixels, host, n, cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (inputs)");
    pixels_staging_.used(stream_);
    normalize_kernel<T>
        <<<blocks_for(n, sm_count_), kThreads, 0, stream_>>>(pixels, n, mean, inv_std, out);
    check_launch("normalize_kernel");
  }

  void gemm(Transpose trans_a, Transpose trans_b, std::size_t m, std::size_t n, std::size_t k,
            T alpha, const T* a, std::size_t lda, const T* b, std::size_t ldb, T beta, T* c,
            std::size_t ldc) override {
    if (m == 0 || n == 0) return;
    if (k == 0) {
      scale_kernel<T><<<blocks_for(m * n, sm_count_), kThreads, 0, stream_>>>(c, m, n, ldc, beta);
      check_launch("scale_kernel");
      return;
    }
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the column-major
    // routine gets B first, m and n swapped, the same transpose flags and leading dimensions
    // (a row-major matrix with leading dimension ld is its transpose, column-major, with ld).
    const int im = to_int(m, "m"), in = to_int(n, "n"), ik = to_int(k, "k");
    const int ilda = to_int(lda, "lda"), ildb = to_int(ldb, "ldb"), ildc = to_int(ldc, "ldc");
    if constexpr (std::is_same_v<T, float>) {
      check(cublasSgemm(cublas_, to_cublas(trans_b), to_cublas(trans_a), in, im, ik, &alpha, b,
                        ildb, a, ilda, &beta, c, ildc),
            "cublasSgemm");
    } else {
      check(cublasDgemm(cublas_, to_cublas(trans_b), to_cublas(trans_a), in, im, ik, &alpha, b,
                        ildb, a, ilda, &beta, c, ildc),
            "cublasDgemm");
    }
  }

  void add_bias(T* y, const T* bias, std::size_t rows, std::size_t cols, bool relu) override {
    const std::size_t n = rows * cols;
    if (n == 0) return;
    add_bias_kernel<T>
        <<<blocks_for(n, sm_count_), kThreads, 0, stream_>>>(y, bias, rows, cols, relu);
    check_launch("add_bias_kernel");
  }

  void relu_backward(T* grad, const T* activation, std::size_t count) override {
    if (count == 0) return;
    relu_backward_kernel<T>
        <<<blocks_for(count, sm_count_), kThreads, 0, stream_>>>(grad, activation, count);
    check_launch("relu_backward_kernel");
  }

  void bias_gradient(const T* grad_out, std::size_t rows, std::size_t cols, T* grad_bias,
                     bool accumulate) override {
    if (cols == 0) return;
    const unsigned threads = 128;
    const auto blocks = static_cast<unsigned>((cols + threads - 1) / threads);
    bias_gradient_kernel<T>
        <<<blocks, threads, 0, stream_>>>(grad_out, rows, cols, grad_bias, accumulate);
    check_launch("bias_gradient_kernel");
  }

  LossSums softmax_cross_entropy(const T* logits, const std::int32_t* labels, std::size_t rows,
                                 std::size_t classes, T grad_scale, T* grad_logits) override {
    LossSums sums;
    if (rows == 0) return sums;
    // Labels: host memory, through pinned staging.
    auto* host_labels =
        static_cast<std::int32_t*>(labels_staging_.get(rows * sizeof(std::int32_t)));
    std::memcpy(host_labels, labels, rows * sizeof(std::int32_t));
    std::int32_t* device_labels = labels_.get(rows);
    check(cudaMemcpyAsync(device_labels, host_labels, rows * sizeof(std::int32_t),
                          cudaMemcpyHostToDevice, stream_),
          "cudaMemcpyAsync (labels)");
    labels_staging_.used(stream_);
    double* row_loss = row_loss_.get(rows);
    std::uint8_t* row_correct = row_correct_.get(rows);
    softmax_cross_entropy_kernel<T><<<blocks_for(rows, sm_count_), kThreads, 0, stream_>>>(
        logits, device_labels, rows, classes, grad_scale, grad_logits, row_loss, row_correct);
    check_launch("softmax_cross_entropy_kernel");
    // The per-row values to the host, summed there in row order as the CPU backend sums them.
    host_loss_.resize(rows);
    host_correct_.resize(rows);
    check(cudaMemcpyAsync(host_loss_.data(), row_loss, rows * sizeof(double),
                          cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (loss)");
    check(cudaMemcpyAsync(host_correct_.data(), row_correct, rows, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (correct)");
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (loss)");
    for (std::size_t r = 0; r < rows; ++r) {
      sums.loss_sum += host_loss_[r];
      sums.correct += host_correct_[r];
    }
    return sums;
  }

  void adamw_update(T* params, const T* grads, T* first_moment, T* second_moment, std::size_t count,
                    const AdamWStep& h, bool decay) override {
    if (count == 0) return;
    // The CPU backend's constants, computed the same way (double, then rounded to T).
    const double t = static_cast<double>(h.step);
    AdamWArgs<T> a;
    a.keep = static_cast<T>(decay ? 1.0 - h.lr * h.weight_decay : 1.0);
    a.beta1 = static_cast<T>(h.beta1);
    a.one_minus_beta1 = static_cast<T>(1.0 - h.beta1);
    a.beta2 = static_cast<T>(h.beta2);
    a.one_minus_beta2 = static_cast<T>(1.0 - h.beta2);
    a.step_size = static_cast<T>(h.lr / (1.0 - std::pow(h.beta1, t)));
    a.inv_sqrt_correction2 = static_cast<T>(1.0 / std::sqrt(1.0 - std::pow(h.beta2, t)));
    a.eps = static_cast<T>(h.eps);
    adamw_kernel<T><<<blocks_for(count, sm_count_), kThreads, 0, stream_>>>(
        params, grads, first_moment, second_moment, count, a);
    check_launch("adamw_kernel");
  }

  void sgd_update(T* params, const T* grads, T* velocity, std::size_t count, const SgdStep& h,
                  bool decay) override {
    if (count == 0) return;
    const T weight_decay = static_cast<T>(decay ? h.weight_decay : 0.0);
    sgd_kernel<T><<<blocks_for(count, sm_count_), kThreads, 0, stream_>>>(
        params, grads, velocity, count, weight_decay, static_cast<T>(h.momentum),
        static_cast<T>(h.lr));
    check_launch("sgd_kernel");
  }

  void* stream() const override { return stream_; }
  void* side_stream() const override { return side_stream_; }

  void record_event(std::size_t slot, void* stream) override {
    if (slot >= events_.size()) events_.resize(slot + 1, nullptr);
    if (!events_[slot]) {
      check(cudaEventCreateWithFlags(&events_[slot], cudaEventDisableTiming), "cudaEventCreate");
    }
    check(cudaEventRecord(events_[slot], static_cast<cudaStream_t>(stream)), "cudaEventRecord");
  }
  void wait_event(void* stream, std::size_t slot) override {
    if (slot >= events_.size() || !events_[slot]) return;  // never recorded: nothing to wait for
    check(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), events_[slot], 0),
          "cudaStreamWaitEvent");
  }
  bool ready() override {
    const cudaError_t status = cudaStreamQuery(stream_);
    if (status == cudaErrorNotReady) return false;
    check(status, "cudaStreamQuery");
    return true;
  }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

 private:
  int device_ = 0;
  int devices_ = 0;
  int sm_count_ = 1;
  int cublas_version_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<cudaEvent_t> events_;
  PinnedStaging pixels_staging_;
  PinnedStaging labels_staging_;
  Scratch<std::uint8_t> pixels_;
  Scratch<std::int32_t> labels_;
  Scratch<double> row_loss_;
  Scratch<std::uint8_t> row_correct_;
  std::vector<double> host_loss_;
  std::vector<std::uint8_t> host_correct_;
};

}  // namespace

std::string cuda_unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device is visible to this process (cudaGetDeviceCount: ") +
           cudaGetErrorName(status) + ", " + cudaGetErrorString(status) + ")";
  }
  if (count < 1) return "no CUDA device is visible to this process";
  return {};
}

template <class T>
std::unique_ptr<Backend<T>> make_cuda_backend(int local_rank) {
  return std::make_unique<CudaBackend<T>>(local_rank);
}

template std::unique_ptr<Backend<float>> make_cuda_backend<float>(int);
template std::unique_ptr<Backend<double>> make_cuda_backend<double>(int);

}  // namespace collx::mlp
