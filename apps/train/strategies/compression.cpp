#include "compression.hpp"

#include <algorithm>
#include <cmath>

#include "random.hpp"
#include "trainer_core.hpp"

namespace collx::train {

template <class T>
HalfPrecisionHook<T>::HalfPrecisionHook(Communicator& comm, DataType half, std::size_t count)
    : comm_(comm), half_(half), buffer_(count) {}

template <class T>
void HalfPrecisionHook<T>::allreduce(T* grads, std::int64_t /*step*/) {
  const bool bf16 = half_ == DataType::bfloat16;
  // float64 gradients are rounded to float32 first: two roundings, each to nearest even.
  for (std::size_t i = 0; i < buffer_.size(); ++i) {
    const auto value = static_cast<float>(grads[i]);
    buffer_[i] = bf16 ? float_to_bfloat16_bits(value) : float_to_half_bits(value);
  }
  comm_.allreduce(in_place, buffer_.data(), buffer_.size(), half_, ReduceOp::sum);
  for (std::size_t i = 0; i < buffer_.size(); ++i) {
    grads[i] = static_cast<T>(bf16 ? bfloat16_bits_to_float(buffer_[i])
                                   : half_bits_to_float(buffer_[i]));
  }
  this->last_bytes_ = allreduce_bus_bytes(2.0 * static_cast<double>(buffer_.size()), comm_.size());
}

template <class T>
std::string HalfPrecisionHook<T>::description() const {
  return std::string(half_ == DataType::bfloat16 ? "bf16" : "fp16") +
         " compressed allreduce (each gradient rounded to 16 bits, summed in float32, widened "
         "back)";
}

template <class T>
PowerSgdHook<T>::PowerSgdHook(Communicator& comm, mlp::Backend<T>& backend,
                              const ModelShape& shape, std::size_t rank, std::int64_t warmup,
                              std::uint64_t seed)
    : comm_(comm),
      backend_(backend),
      layout_(shape),
      warmup_(warmup),
      requested_rank_(rank),
      error_(layout_.count(), T(0)) {
  std::size_t p = 0, q = 0;
  for (const Segment& s : layout_.segments()) {
    if (!s.is_weight) {
      biases_.push_back(s);
      continue;
    }
    Matrix m;
    m.offset = s.offset;
    m.rows = shape.sizes[s.layer + 1];
    m.cols = shape.sizes[s.layer];
    m.rank = std::min({rank, m.rows, m.cols});
    m.p = p;
    m.q = q;
    p += m.rows * m.rank;
    q += m.cols * m.rank;
    matrices_.push_back(m);
  }
  std::size_t bias_count = 0;
  for (const Segment& b : biases_)
    bias_count += b.count;
  bias_at_ = p;
  p_.assign(p + bias_count, T(0));
  q_.resize(q);
  // The same Q on every rank (the seed is shared), as the first P = M Q needs.
  Random random(mix64(seed) ^ 0x505753ull);
  for (T& v : q_)
    v = static_cast<T>(2.0 * random.uniform() - 1.0);
}

template <class T>
void PowerSgdHook<T>::plain(T* grads) {
  comm_.allreduce(in_place, grads, layout_.count(), datatype_of_v<T>, ReduceOp::sum);
  this->last_bytes_ =
      allreduce_bus_bytes(static_cast<double>(layout_.count() * sizeof(T)), comm_.size());
}

// Columns of a (rows x cols, row-major) orthonormal, in order (modified Gram-Schmidt); a column
// that vanishes stays zero.
template <class T>
void orthonormalize_columns(T* a, std::size_t rows, std::size_t cols) {
  for (std::size_t j = 0; j < cols; ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      T dot = 0;
      for (std::size_t r = 0; r < rows; ++r)
        dot += a[r * cols + i] * a[r * cols + j];
      for (std::size_t r = 0; r < rows; ++r)
        a[r * cols + j] -= dot * a[r * cols + i];
    }
    T norm = 0;
    for (std::size_t r = 0; r < rows; ++r)
      norm += a[r * cols + j] * a[r * cols + j];
    norm = std::sqrt(norm);
    const T scale = norm > T(0) ? T(1) / norm : T(0);
    for (std::size_t r = 0; r < rows; ++r)
      a[r * cols + j] *= scale;
  }
}

template <class T>
void PowerSgdHook<T>::allreduce(T* grads, std::int64_t step) {
  if (step < warmup_) {
    plain(grads);
    return;
  }
  using mlp::Transpose;
  // M = gradient + error feedback (kept in error_ until the error is known), P = M Q.
  for (const Matrix& m : matrices_) {
    T* e = error_.data() + m.offset;
    const T* g = grads + m.offset;
    for (std::size_t i = 0; i < m.rows * m.cols; ++i)
      e[i] += g[i];
    backend_.gemm(Transpose::no, Transpose::no, m.rows, m.rank, m.cols, T(1), e, m.cols,
                  q_.data() + m.q, m.rank, T(0), p_.data() + m.p, m.rank);
  }
  // The biases ride along in the P allreduce.
  std::size_t at = bias_at_;
  for (const Segment& b : biases_) {
    std::copy_n(grads + b.offset, b.count, p_.data() + at);
    at += b.count;
  }
  const DataType type = datatype_of_v<T>;
  comm_.allreduce(in_place, p_.data(), p_.size(), type, ReduceOp::sum);
  for (const Matrix& m : matrices_) {
    orthonormalize_columns(p_.data() + m.p, m.rows, m.rank);
    backend_.gemm(Transpose::yes, Transpose::no, m.cols, m.rank, m.rows, T(1),
                  error_.data() + m.offset, m.cols, p_.data() + m.p, m.rank, T(0),
                  q_.data() + m.q, m.rank);
  }
  comm_.allreduce(in_place, q_.data(), q_.size(), type, ReduceOp::sum);
  const T inv_ranks = T(1) / static_cast<T>(comm_.size());
  for (const Matrix& m : matrices_) {
    // The applied gradient: P Q^T, the same on every rank; the error: M - P Q^T / ranks.
    T* g = grads + m.offset;
    backend_.gemm(Transpose::no, Transpose::yes, m.rows, m.cols, m.rank, T(1), p_.data() + m.p,
                  m.rank, q_.data() + m.q, m.rank, T(0), g, m.cols);
    T* e = error_.data() + m.offset;
    for (std::size_t i = 0; i < m.rows * m.cols; ++i)
      e[i] -= g[i] * inv_ranks;
  }
  at = bias_at_;
  for (const Segment& b : biases_) {
    std::copy_n(p_.data() + at, b.count, grads + b.offset);
    at += b.count;
  }
  this->last_bytes_ = allreduce_bus_bytes(static_cast<double>((p_.size() + q_.size()) * sizeof(T)),
                                          comm_.size());
}

template <class T>
std::string PowerSgdHook<T>::description() const {
  return "PowerSGD rank " + std::to_string(requested_rank_) +
         " (P and Q allreduced per step, error feedback; biases plain; plain allreduce for the "
         "first " +
         std::to_string(warmup_) + " steps)";
}

template <class T>
std::unique_ptr<CompressionHook<T>> make_compression_hook(const TrainConfig& config,
                                                          Communicator& comm,
                                                          mlp::Backend<T>& backend,
                                                          const ModelShape& shape) {
  switch (config.compression) {
    case Compression::none:
      return nullptr;
    case Compression::bf16:
    case Compression::fp16:
      return std::make_unique<HalfPrecisionHook<T>>(
          comm, config.compression == Compression::bf16 ? DataType::bfloat16 : DataType::float16,
          ParameterLayout(shape).count());
    case Compression::powersgd:
      return std::make_unique<PowerSgdHook<T>>(comm, backend, shape, config.powersgd_rank,
                                               config.powersgd_warmup, config.seed);
  }
  return nullptr;
}

template class HalfPrecisionHook<float>;
template class HalfPrecisionHook<double>;
template class PowerSgdHook<float>;
template class PowerSgdHook<double>;
template std::unique_ptr<CompressionHook<float>> make_compression_hook(const TrainConfig&,
                                                                       Communicator&,
                                                                       mlp::Backend<float>&,
                                                                       const ModelShape&);
template std::unique_ptr<CompressionHook<double>> make_compression_hook(const TrainConfig&,
                                                                        Communicator&,
                                                                        mlp::Backend<double>&,
                                                                        const ModelShape&);

}  // namespace collx::train
