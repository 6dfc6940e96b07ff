// The math of collx-train's MLP behind one small interface, mlp::Backend<T>: where the trainer's
// tensors live (allocate, upload, download) and every operation the forward pass, the backward
// pass and the optimizers run on them. The CPU backend (OpenBLAS cblas for the GEMMs, plain
// loops for the rest, mlp_math.cpp) is the reference; the CUDA backend (cuBLAS for the GEMMs,
// the kernels of mlp_cuda.cu for the rest, in a build with CUDA) implements the same interface
// on device memory, with the same formulas in the same order of operations.
//
// Matrices are row-major. Every operation is deterministic: the same inputs give the same bits,
// run after run, which the trainer's bitwise tests (resume, bucket sizes, replicas) rely on.
//
// The CPU backend computes synchronously. The CUDA backend enqueues its work on one stream
// (stream()) and returns; download() and softmax_cross_entropy() wait for that stream, and the
// ordering calls (record_event / wait_event / ready / synchronize) let the trainer order the
// collectives it runs on other streams with that work. For the CPU backend they do nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace collx::mlp {

enum class Device { cpu, cuda };
std::string_view to_string(Device device);

enum class Transpose { no, yes };

// Result of a softmax cross-entropy pass over some rows.
struct LossSums {
  double loss_sum = 0;      // sum over the rows of -log softmax(logits)[label]
  std::size_t correct = 0;  // rows whose largest logit is the label's (first maximum wins)
};

// Hyper-parameters of one AdamW update (decoupled weight decay, Loshchilov & Hutter).
struct AdamWStep {
  double lr = 0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  std::int64_t step = 1;  // 1-based, for the bias corrections
};

// Hyper-parameters of one SGD-with-momentum update (PyTorch's form: the weight decay is added
// to the gradient, velocity = momentum * velocity + gradient, parameter -= lr * velocity).
struct SgdStep {
  double lr = 0;
  double momentum = 0.9;
  double weight_decay = 0;
};

template <class T>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // "cpu (OpenBLAS 0.3.21, 1 thread, Zen)"; says which library computes.
  virtual std::string description() const = 0;

  // ---- memory: pointers below are the backend's (host memory for cpu) ----
  virtual T* allocate(std::size_t count) = 0;  // zero-filled
  virtual void release(T* data) noexcept = 0;
  virtual void upload(T* dst, const T* host_src, std::size_t count) = 0;
  virtual void download(T* host_dst, const T* src, std::size_t count) = 0;
  virtual void fill_zero(T* data, std::size_t count) = 0;

  // out[r, :] = (images[rows[r], :] - mean) * inv_std for r < count; images are host bytes.
  virtual void gather_inputs(const std::uint8_t* images, std::size_t features,
                             const std::uint32_t* rows, std::size_t count, T mean, T inv_std,
                             T* out) = 0;

  // C (m x n) = alpha * op(A) * op(B) + beta * C.
  virtual void gemm(Transpose trans_a, Transpose trans_b, std::size_t m, std::size_t n,
                    std::size_t k, T alpha, const T* a, std::size_t lda, const T* b,
                    std::size_t ldb, T beta, T* c, std::size_t ldc) = 0;
  // y[r, :] += bias, then max(y, 0) when relu.
  virtual void add_bias(T* y, const T* bias, std::size_t rows, std::size_t cols, bool relu) = 0;
  // grad[i] = 0 where activation[i] <= 0 (the ReLU's derivative, from its output).
  virtual void relu_backward(T* grad, const T* activation, std::size_t count) = 0;
  // grad_bias[c] (+)= sum over rows of grad_out[r, c], rows summed in order.
  virtual void bias_gradient(const T* grad_out, std::size_t rows, std::size_t cols, T* grad_bias,
                             bool accumulate) = 0;
  // Loss sums over `rows` rows of `classes` logits; when grad_logits is not null it receives
  // (softmax - onehot(label)) * grad_scale. Labels (host memory for every backend) must be
  // < classes. Returns once the sums are known (the CUDA backend waits for its stream).
  virtual LossSums softmax_cross_entropy(const T* logits, const std::int32_t* labels,
                                         std::size_t rows, std::size_t classes, T grad_scale,
                                         T* grad_logits) = 0;

  // ---- optimizer updates of `count` parameters; state arrays are the optimizer's ----
  // decay: apply the weight decay to these parameters (weights yes, biases no).
  virtual void adamw_update(T* params, const T* grads, T* first_moment, T* second_moment,
                            std::size_t count, const AdamWStep& hyper, bool decay) = 0;
  virtual void sgd_update(T* params, const T* grads, T* velocity, std::size_t count,
                          const SgdStep& hyper, bool decay) = 0;

  // ---- ordering with work on other streams (device backends; no-ops for the CPU) ----
  // The stream the backend computes on (a cudaStream_t); nullptr for the CPU backend.
  virtual void* stream() const { return nullptr; }
  // A second stream of the same device for work beside the computation (the trainer's
  // gradient collectives); nullptr for the CPU backend.
  virtual void* side_stream() const { return nullptr; }
  // Records event number `slot` (created on first use) on `stream`: its completion marks the
  // work enqueued there so far.
  virtual void record_event(std::size_t /*slot*/, void* /*stream*/) {}
  // Work enqueued on `stream` from now on runs after event `slot` as last recorded.
  virtual void wait_event(void* /*stream*/, std::size_t /*slot*/) {}
  // True when everything enqueued on stream() has completed (never blocks).
  virtual bool ready() { return true; }
  // Blocks until everything enqueued on stream() has completed.
  virtual void synchronize() {}
};

// Empty when `device` can compute in this process; otherwise why not, for the user ("this
// build has no CUDA support", "no CUDA device is visible"), a sentence that starts lower-case.
std::string unavailable_reason(Device device);

// The backend for `device`; Device::cuda throws std::runtime_error with the reason it is not
// available (unavailable_reason). The CPU backend pins OpenBLAS to one thread (one rank per
// core). The CUDA backend makes device `local_rank % device count` current for the calling
// thread (local_rank: the process's rank among those of its node) and computes there.
template <class T>
std::unique_ptr<Backend<T>> make_backend(Device device, int local_rank = 0);

// Owns `count` elements of a backend's memory.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend<T>& backend, std::size_t count)
      : backend_(&backend), data_(count ? backend.allocate(count) : nullptr), count_(count) {}
  ~DeviceBuffer() {
    if (data_) backend_->release(data_);
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer moved(std::move(other));
    swap(moved);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* data() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  Backend<T>* backend_ = nullptr;
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace collx::mlp
