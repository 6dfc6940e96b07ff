// A run of dense layers with their activations, for the strategies that do not hold the whole
// model in one flat buffer (FSDP, pipeline stages, tensor-parallel ranks). Where its weights
// come from and what happens between a GEMM and the bias (a tensor-parallel allreduce) is the
// caller's, through LayerHooks; the arithmetic is the single-process MLP's, layer by layer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "mlp_math.hpp"

namespace collx::train {

// One layer as this rank computes it: y (rows x out) = x (rows x in) * W^T (+ bias, then ReLU).
struct LayerDims {
  std::size_t in = 0;
  std::size_t out = 0;
  bool relu = false;  // a ReLU follows (every layer of the model but the last)
};

// A layer's tensors for one pass (backend memory): weight out x in, bias out (null: the caller
// adds no bias here), and where their gradients go.
template <class T>
struct LayerTensors {
  const T* weight = nullptr;
  const T* bias = nullptr;
  T* grad_weight = nullptr;
  T* grad_bias = nullptr;
};

template <class T>
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  // Layer l's tensors, in forward (backward = false) or backward order.
  virtual LayerTensors<T> tensors(std::size_t l, bool backward) = 0;
  // y = x W^T is computed, the bias not yet added (tensor parallel: the row-parallel allreduce).
  virtual void after_forward_gemm(std::size_t /*l*/, T* /*y*/, std::size_t /*rows*/) {}
  // d loss / d x of layer l is computed, the previous ReLU's mask not yet applied (tensor
  // parallel: the column-parallel allreduce).
  virtual void after_input_gradient(std::size_t /*l*/, T* /*grad_x*/, std::size_t /*rows*/) {}
  // Layer l's weight and bias gradients are final (FSDP: reduce_scatter them).
  virtual void gradients_done(std::size_t /*l*/) {}
};

template <class T>
class LayerStack {
 public:
  // split_backward: keep every layer's output gradient, for backward_inputs() then
  // backward_weights() (a pipeline stage sends its input gradient before its weight gradients).
  LayerStack(mlp::Backend<T>& backend, std::vector<LayerDims> layers, std::size_t max_rows,
             bool split_backward = false)
      : backend_(backend), layers_(std::move(layers)), max_rows_(max_rows) {
    std::size_t widest = 0;
    for (const LayerDims& d : layers_) {
      activations_.emplace_back(backend_, max_rows_ * d.out);
      widest = std::max({widest, d.in, d.out});
    }
    grad_a_ = mlp::DeviceBuffer<T>(backend_, max_rows_ * widest);
    grad_b_ = mlp::DeviceBuffer<T>(backend_, max_rows_ * widest);
    // The last layer's output gradient is grad_a_; the others' their own.
    if (split_backward) {
      for (std::size_t l = 0; l + 1 < layers_.size(); ++l)
        output_gradients_.emplace_back(backend_, max_rows_ * layers_[l].out);
    }
  }

  const std::vector<LayerDims>& layers() const { return layers_; }
  std::size_t activation_elements() const {
    std::size_t n = grad_a_.size() + grad_b_.size();
    for (const auto& a : activations_)
      n += a.size();
    for (const auto& g : output_gradients_)
      n += g.size();
    return n;
  }

  // inputs: rows x layers().front().in, kept (not copied) for backward().
  void forward(const T* inputs, std::size_t rows, LayerHooks<T>& hooks) {
    inputs_ = inputs;
    rows_ = rows;
    const T* x = inputs;
    for (std::size_t l = 0; l < layers_.size(); ++l) {
      const LayerDims& d = layers_[l];
      const LayerTensors<T> t = hooks.tensors(l, false);
      T* y = activations_[l].data();
      backend_.gemm(mlp::Transpose::no, mlp::Transpose::yes, rows, d.out, d.in, T(1), x, d.in,
                    t.weight, d.in, T(0), y, d.out);
      hooks.after_forward_gemm(l, y, rows);
      backend_.add_bias(y, t.bias, rows, d.out, d.relu);
      x = y;
    }
  }

  // The last layer's output (rows x out) and where d loss / d output goes before backward().
  T* output() const { return activations_.back().data(); }
  T* output_gradient() const { return grad_a_.data(); }

  // From output_gradient(): the weight and bias gradients (accumulate: added), and, when
  // input_gradient is not null, d loss / d inputs there (rows x in), masked by the ReLU that
  // produced the inputs when input_relu.
  void backward(LayerHooks<T>& hooks, bool accumulate, T* input_gradient, bool input_relu) {
    const std::size_t rows = rows_;
    T* grad_out = grad_a_.data();
    T* grad_in = grad_b_.data();
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const LayerDims& d = layers_[l];
      const LayerTensors<T> t = hooks.tensors(l, true);
      const T* x = l > 0 ? activations_[l - 1].data() : inputs_;
      backend_.bias_gradient(grad_out, rows, d.out, t.grad_bias, accumulate);
      backend_.gemm(mlp::Transpose::yes, mlp::Transpose::no, d.out, d.in, rows, T(1), grad_out,
                    d.out, x, d.in, accumulate ? T(1) : T(0), t.grad_weight, d.in);
      hooks.gradients_done(l);
      if (l == 0 && !input_gradient) break;
      T* gx = l == 0 ? input_gradient : grad_in;
      backend_.gemm(mlp::Transpose::no, mlp::Transpose::no, rows, d.in, d.out, T(1), grad_out,
                    d.out, t.weight, d.in, T(0), gx, d.in);
      hooks.after_input_gradient(l, gx, rows);
      if (l == 0) {
        if (input_relu) backend_.relu_backward(gx, inputs_, rows * d.in);
        break;
      }
      backend_.relu_backward(gx, activations_[l - 1].data(), rows * d.in);
      std::swap(grad_out, grad_in);
    }
  }

  // backward() in two parts, the same arithmetic in another order (bitwise the same results):
  // first d loss / d output of every layer down to d loss / d inputs (into input_gradient, as in
  // backward(); null: none), then every layer's weight and bias gradients. Needs the stack built
  // with split_backward. A pipeline stage sends its input gradient between the two, so the
  // previous stage does not wait for the weight gradients, which nothing downstream needs.
  void backward_inputs(LayerHooks<T>& hooks, T* input_gradient, bool input_relu) {
    const std::size_t rows = rows_;
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const LayerDims& d = layers_[l];
      if (l == 0 && !input_gradient) break;
      const LayerTensors<T> t = hooks.tensors(l, true);
      T* gx = l == 0 ? input_gradient : layer_output_gradient(l - 1);
      backend_.gemm(mlp::Transpose::no, mlp::Transpose::no, rows, d.in, d.out, T(1),
                    layer_output_gradient(l), d.out, t.weight, d.in, T(0), gx, d.in);
      hooks.after_input_gradient(l, gx, rows);
      if (l > 0) {
        backend_.relu_backward(gx, activations_[l - 1].data(), rows * d.in);
      } else if (input_relu) {
        backend_.relu_backward(gx, inputs_, rows * d.in);
      }
    }
  }
  void backward_weights(LayerHooks<T>& hooks, bool accumulate) {
    const std::size_t rows = rows_;
    for (std::size_t l = layers_.size(); l-- > 0;) {
      const LayerDims& d = layers_[l];
      const LayerTensors<T> t = hooks.tensors(l, true);
      const T* x = l > 0 ? activations_[l - 1].data() : inputs_;
      const T* grad_out = layer_output_gradient(l);
      backend_.bias_gradient(grad_out, rows, d.out, t.grad_bias, accumulate);
      backend_.gemm(mlp::Transpose::yes, mlp::Transpose::no, d.out, d.in, rows, T(1), grad_out,
                    d.out, x, d.in, accumulate ? T(1) : T(0), t.grad_weight, d.in);
      hooks.gradients_done(l);
    }
  }

 private:
  T* layer_output_gradient(std::size_t l) const {
    return l + 1 == layers_.size() ? grad_a_.data() : output_gradients_.at(l).data();
  }

  mlp::Backend<T>& backend_;
  std::vector<LayerDims> layers_;
  std::size_t max_rows_;
  const T* inputs_ = nullptr;
  std::size_t rows_ = 0;
  std::vector<mlp::DeviceBuffer<T>> activations_;
  mlp::DeviceBuffer<T> grad_a_;
  mlp::DeviceBuffer<T> grad_b_;
  std::vector<mlp::DeviceBuffer<T>> output_gradients_;  // split_backward: layers but the last
};

}  // namespace collx::train
