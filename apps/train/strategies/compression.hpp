// Gradient compression as comm hooks on the data-parallel path (--compress): each takes a
// rank's complete local gradients and leaves there what the step applies, the same on every
// rank, in place of the plain allreduce sum.
//
// - bf16 / fp16: each gradient rounded to 16 bits, the 16-bit buffer allreduced (collx sums
//   16-bit values in float32 and rounds once per step), widened back. Half the bytes of float32.
// - PowerSGD (Vogels et al., 2019): each weight matrix M (out x in) of gradient plus the rank's
//   error feedback is replaced by a rank-r approximation P Q^T: P = M Q allreduced and
//   orthonormalised, Q = M^T P allreduced; the rank keeps M - P Q^T / ranks as its error
//   feedback for the next step, so what compression drops is applied later rather than lost.
//   Biases (1-D) go through a plain allreduce, and so does everything during the first
//   --powersgd-warmup steps. Q starts from the same seeded random values on every rank and is
//   warm-started from the previous step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "mlp_math.hpp"
#include "model.hpp"
#include "trainer.hpp"

namespace collx::train {

template <class T>
class CompressionHook {
 public:
  virtual ~CompressionHook() = default;
  // grads: the whole flat gradient buffer (host memory); step: 0-based optimizer step.
  // Collective over the hook's communicator.
  virtual void allreduce(T* grads, std::int64_t step) = 0;
  // Bus bytes of the last allreduce() call (StepResult::comm_bytes).
  double last_bytes() const { return last_bytes_; }
  // "bf16 compressed allreduce (...)", for the header.
  virtual std::string description() const = 0;

 protected:
  double last_bytes_ = 0;
};

// bf16 or fp16.
template <class T>
class HalfPrecisionHook final : public CompressionHook<T> {
 public:
  HalfPrecisionHook(Communicator& comm, DataType half, std::size_t count);
  void allreduce(T* grads, std::int64_t step) override;
  std::string description() const override;

 private:
  Communicator& comm_;
  DataType half_;
  std::vector<std::uint16_t> buffer_;
};

template <class T>
class PowerSgdHook final : public CompressionHook<T> {
 public:
  PowerSgdHook(Communicator& comm, mlp::Backend<T>& backend, const ModelShape& shape,
               std::size_t rank, std::int64_t warmup, std::uint64_t seed);
  void allreduce(T* grads, std::int64_t step) override;
  std::string description() const override;
  // This rank's error feedback, in the flat layout (zero at biases).
  const std::vector<T>& error_feedback() const { return error_; }

 private:
  struct Matrix {
    std::size_t offset = 0;  // of the weight in the flat buffer
    std::size_t rows = 0;    // out
    std::size_t cols = 0;    // in
    std::size_t rank = 0;    // min(requested rank, rows, cols)
    std::size_t p = 0;       // offsets of P (rows x rank) and Q (cols x rank) in their buffers
    std::size_t q = 0;
  };
  void plain(T* grads);

  Communicator& comm_;
  mlp::Backend<T>& backend_;
  ParameterLayout layout_;
  std::int64_t warmup_;
  std::size_t requested_rank_;
  std::vector<Matrix> matrices_;
  std::vector<Segment> biases_;
  std::vector<T> error_;  // flat layout
  std::vector<T> p_;      // every matrix's P, then the biases (from bias_at_): one allreduce
  std::size_t bias_at_ = 0;
  std::vector<T> q_;      // every matrix's Q
};

template <class T>
std::unique_ptr<CompressionHook<T>> make_compression_hook(const TrainConfig& config,
                                                          Communicator& comm,
                                                          mlp::Backend<T>& backend,
                                                          const ModelShape& shape);

}  // namespace collx::train
