#include "model.hpp"

#include <algorithm>
#include <cmath>

#include "random.hpp"

namespace collx::train {

std::string ModelShape::to_string() const {
  std::string text;
  for (std::size_t s : sizes) {
    if (!text.empty()) text += '-';
    text += std::to_string(s);
  }
  return text;
}

ParameterLayout::ParameterLayout(const ModelShape& shape)
    : weight_offset_(shape.layers()), bias_offset_(shape.layers()) {
  for (std::size_t l = shape.layers(); l-- > 0;) {
    const std::size_t in = shape.sizes[l], out = shape.sizes[l + 1];
    bias_offset_[l] = count_;
    segments_.push_back({count_, out, l, false});
    count_ += out;
    weight_offset_[l] = count_;
    segments_.push_back({count_, out * in, l, true});
    count_ += out * in;
  }
}

template <class T>
void initialize_parameters(const ModelShape& shape, std::uint64_t seed, T* params,
                           std::size_t count) {
  const ParameterLayout layout(shape);
  std::fill(params, params + count, T(0));
  // One stream per layer: a layer's initial values do not depend on the other layers' sizes.
  for (std::size_t l = 0; l < shape.layers(); ++l) {
    Random random(mix64(seed) ^ mix64(0x1A7E5ull + l));
    const std::size_t in = shape.sizes[l], out = shape.sizes[l + 1];
    const bool relu_follows = l + 1 < shape.layers();
    const double bound = std::sqrt((relu_follows ? 6.0 : 3.0) / static_cast<double>(in));
    T* w = params + layout.weight_offset(l);
    for (std::size_t i = 0; i < out * in; ++i)
      w[i] = static_cast<T>((2.0 * random.uniform() - 1.0) * bound);
  }
}

template void initialize_parameters<float>(const ModelShape&, std::uint64_t, float*, std::size_t);
template void initialize_parameters<double>(const ModelShape&, std::uint64_t, double*, std::size_t);

template <class T>
Mlp<T>::Mlp(mlp::Backend<T>& backend, ModelShape shape, std::size_t max_rows)
    : backend_(backend), shape_(std::move(shape)), layout_(shape_), max_rows_(max_rows) {
  const std::size_t widest = *std::max_element(shape_.sizes.begin(), shape_.sizes.end());
  for (std::size_t l = 0; l < shape_.layers(); ++l)
    activations_.emplace_back(backend_, max_rows_ * shape_.sizes[l + 1]);
  grad_a_ = mlp::DeviceBuffer<T>(backend_, max_rows_ * widest);
  grad_b_ = mlp::DeviceBuffer<T>(backend_, max_rows_ * widest);
}

template <class T>
std::size_t Mlp<T>::rows_per_piece(std::size_t inputs) {
  // About 32K gradient elements per piece: a few hundred microseconds of GEMM, long enough
  // to run near full speed, short enough that a finished bucket waits little.
  return std::max<std::size_t>(16, (32768 + inputs - 1) / inputs);
}

template <class T>
void Mlp<T>::forward(const T* params, const T* inputs, std::size_t rows) {
  rows_ = rows;
  const T* x = inputs;
  for (std::size_t l = 0; l < shape_.layers(); ++l) {
    const std::size_t in = shape_.sizes[l], out = shape_.sizes[l + 1];
    T* y = activations_[l].data();
    // y (rows x out) = x (rows x in) * W^T, W is out x in.
    backend_.gemm(mlp::Transpose::no, mlp::Transpose::yes, rows, out, in, T(1), x, in,
                  params + layout_.weight_offset(l), in, T(0), y, out);
    backend_.add_bias(y, params + layout_.bias_offset(l), rows, out, l + 1 < shape_.layers());
    x = y;
  }
}

template <class T>
mlp::LossSums Mlp<T>::loss(const std::int32_t* labels, bool gradients, T grad_scale) {
  return backend_.softmax_cross_entropy(activations_.back().data(), labels, rows_,
                                        shape_.sizes.back(), grad_scale,
                                        gradients ? grad_a_.data() : nullptr);
}

template <class T>
void Mlp<T>::backward(const T* params, const T* inputs, T* grads, bool accumulate,
                      GradientHooks* hooks) {
  const std::size_t rows = rows_;
  const T beta = accumulate ? T(1) : T(0);
  T* grad_out = grad_a_.data();  // d loss / d (output of layer l), rows x out
  T* grad_in = grad_b_.data();
  auto poll = [&] {
    if (hooks) hooks->poll();
  };
  for (std::size_t l = shape_.layers(); l-- > 0;) {
    const std::size_t in = shape_.sizes[l], out = shape_.sizes[l + 1];
    const T* x = l > 0 ? activations_[l - 1].data() : inputs;  // the layer's input, rows x in
    backend_.bias_gradient(grad_out, rows, out, grads + layout_.bias_offset(l), accumulate);
    if (hooks) hooks->gradients_ready(layout_.bias_offset(l) + out);
    // dW (out x in) = grad_out^T (out x rows) * x (rows x in), in pieces of output rows.
    const std::size_t piece = rows_per_piece(in);
    T* grad_w = grads + layout_.weight_offset(l);
    for (std::size_t r0 = 0; r0 < out; r0 += piece) {
      const std::size_t r1 = std::min(out, r0 + piece);
      backend_.gemm(mlp::Transpose::yes, mlp::Transpose::no, r1 - r0, in, rows, T(1), grad_out + r0,
                    out, x, in, beta, grad_w + r0 * in, in);
      if (hooks) hooks->gradients_ready(layout_.weight_offset(l) + r1 * in);
      poll();
    }
    if (l == 0) break;
    // d loss / d x (rows x in) = grad_out (rows x out) * W (out x in), in pieces of samples so
    // that communication in flight keeps moving.
    const T* w = params + layout_.weight_offset(l);
    const std::size_t sample_piece = std::max<std::size_t>(32, (32768 + in - 1) / in);
    for (std::size_t s0 = 0; s0 < rows; s0 += sample_piece) {
      const std::size_t s1 = std::min(rows, s0 + sample_piece);
      backend_.gemm(mlp::Transpose::no, mlp::Transpose::no, s1 - s0, in, out, T(1),
                    grad_out + s0 * out, out, w, in, T(0), grad_in + s0 * in, in);
      poll();
    }
    backend_.relu_backward(grad_in, activations_[l - 1].data(), rows * in);
    std::swap(grad_out, grad_in);
  }
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace collx::train
