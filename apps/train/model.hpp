// The MLP: layer sizes, where each parameter lives in the one flat buffer, and the forward and
// backward passes on a mlp::Backend.
//
// The flat buffer holds the layers in the order the backward pass produces their gradients:
// last layer first, each as [bias, weight (out x in, row-major)]. A prefix of the gradient
// buffer is therefore complete at every moment of the backward pass, and a bucket can be sent
// as soon as the prefix covers it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mlp_math.hpp"

namespace collx::train {

// sizes = {inputs, hidden..., classes}.
struct ModelShape {
  std::vector<std::size_t> sizes;
  std::size_t layers() const { return sizes.size() - 1; }
  std::string to_string() const;  // "784-512-256-10"
  friend bool operator==(const ModelShape&, const ModelShape&) = default;
};

// One tensor of the flat buffer.
struct Segment {
  std::size_t offset = 0;
  std::size_t count = 0;
  std::size_t layer = 0;
  bool is_weight = false;  // weight decay applies to weights, not to biases
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const ModelShape& shape);
  std::size_t count() const { return count_; }
  std::size_t weight_offset(std::size_t layer) const { return weight_offset_[layer]; }
  std::size_t bias_offset(std::size_t layer) const { return bias_offset_[layer]; }
  // In buffer order.
  const std::vector<Segment>& segments() const { return segments_; }

 private:
  std::size_t count_ = 0;
  std::vector<std::size_t> weight_offset_;
  std::vector<std::size_t> bias_offset_;
  std::vector<Segment> segments_;
};

// He-uniform weights for the layers followed by a ReLU, LeCun-uniform for the output layer,
// zero biases; `count` >= layout.count() (the rest, padding, stays zero). Host memory.
template <class T>
void initialize_parameters(const ModelShape& shape, std::uint64_t seed, T* params,
                           std::size_t count);

// Told by the backward pass how far the gradient buffer is complete, and given the chance to
// progress communication between pieces of compute.
class GradientHooks {
 public:
  virtual ~GradientHooks() = default;
  // Gradients [0, end) of the flat buffer are final.
  virtual void gradients_ready(std::size_t end) = 0;
  // Between two pieces of compute.
  virtual void poll() = 0;
};

template <class T>
class Mlp {
 public:
  // Buffers for up to `max_rows` samples per pass.
  Mlp(mlp::Backend<T>& backend, ModelShape shape, std::size_t max_rows);

  const ModelShape& shape() const { return shape_; }
  const ParameterLayout& layout() const { return layout_; }
  std::size_t max_rows() const { return max_rows_; }
  // Elements of the activations and their gradients' buffers.
  std::size_t activation_elements() const {
    std::size_t n = grad_a_.size() + grad_b_.size();
    for (const auto& a : activations_)
      n += a.size();
    return n;
  }

  // inputs: rows x sizes[0] (backend memory). Keeps the activations for backward().
  void forward(const T* params, const T* inputs, std::size_t rows);
  // After forward(): loss sums of the rows; with gradients, also d(loss * grad_scale)/d(logits)
  // for backward().
  mlp::LossSums loss(const std::int32_t* labels, bool gradients, T grad_scale);
  // After loss(..., true): writes (accumulate: adds) the parameter gradients to `grads`.
  // hooks (may be null) hear how far the buffer is complete and get to poll in between.
  void backward(const T* params, const T* inputs, T* grads, bool accumulate, GradientHooks* hooks);

  // Rows of a weight-gradient GEMM per piece: pieces let a bucket leave as soon as it is
  // complete. A function of the shape only, so the arithmetic never depends on the buckets.
  static std::size_t rows_per_piece(std::size_t inputs);

 private:
  mlp::Backend<T>& backend_;
  ModelShape shape_;
  ParameterLayout layout_;
  std::size_t max_rows_;
  std::size_t rows_ = 0;
  std::vector<mlp::DeviceBuffer<T>> activations_;  // [l]: output of layer l, max_rows x sizes[l+1]
  mlp::DeviceBuffer<T> grad_a_;                    // max_rows x widest layer
  mlp::DeviceBuffer<T> grad_b_;
};

}  // namespace collx::train
