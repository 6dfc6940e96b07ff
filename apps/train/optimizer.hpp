// SGD with momentum and AdamW over ranges of the flat parameter buffer, with their state, and
// the learning-rate schedule (linear scaling rule, warmup, decay).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mlp_math.hpp"
#include "model.hpp"

namespace collx::train {

enum class OptimizerKind { sgd, adamw };
std::string_view to_string(OptimizerKind kind);

struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::adamw;
  double momentum = 0.9;  // sgd
  double beta1 = 0.9;     // adamw
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // weights only, never biases
};

// Arrays of optimizer state per parameter: sgd 1 (velocity), adamw 2 (first and second moments).
inline std::size_t state_arrays(OptimizerKind kind) {
  return kind == OptimizerKind::adamw ? 2 : 1;
}

template <class T>
class Optimizer {
 public:
  // State for `state_count` parameters: all of them, or one rank's shard.
  Optimizer(mlp::Backend<T>& backend, OptimizerSettings settings, const ParameterLayout& layout,
            std::size_t state_count);
  // Over a buffer of its own tensors: `segments` say where weights (decayed) and biases lie.
  Optimizer(mlp::Backend<T>& backend, OptimizerSettings settings, std::vector<Segment> segments,
            std::size_t state_count);

  const OptimizerSettings& settings() const { return settings_; }
  std::size_t state_count() const { return state_count_; }
  // state(a): array a, state_count() elements (backend memory).
  T* state(std::size_t array) const { return state_[array].data(); }
  std::size_t arrays() const { return state_.size(); }

  // Updates params[first, first + count) from grads[0, count) with the state at state_offset.
  // step: 1-based number of this update (AdamW's bias correction); lr: this step's rate.
  void update(T* params, std::size_t first, std::size_t count, const T* grads,
              std::size_t state_offset, double lr, std::int64_t step);

 private:
  mlp::Backend<T>& backend_;
  OptimizerSettings settings_;
  std::vector<Segment> segments_;
  std::size_t state_count_;
  std::vector<mlp::DeviceBuffer<T>> state_;
};

enum class Schedule { constant, linear, cosine };
std::string_view to_string(Schedule schedule);

struct LrSchedule {
  double base_lr = 1e-3;  // at reference_batch samples per step
  std::size_t reference_batch = 256;
  std::size_t batch = 256;  // the global batch: lr = base_lr * batch / reference_batch
  std::int64_t warmup_steps = 0;
  std::int64_t total_steps = 1;
  Schedule schedule = Schedule::cosine;

  double peak() const;
  // Rate of update `step` (0-based): linear warmup from peak / warmup_steps to peak, then the
  // decay from peak towards 0 at total_steps.
  double at(std::int64_t step) const;
};

}  // namespace collx::train
