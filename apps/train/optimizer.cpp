#include "optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

namespace collx::train {

std::string_view to_string(OptimizerKind kind) {
  return kind == OptimizerKind::adamw ? "adamw" : "sgd";
}

std::string_view to_string(Schedule schedule) {
  switch (schedule) {
    case Schedule::constant:
      return "constant";
    case Schedule::linear:
      return "linear";
    case Schedule::cosine:
      return "cosine";
  }
  return "?";
}

template <class T>
Optimizer<T>::Optimizer(mlp::Backend<T>& backend, OptimizerSettings settings,
                        const ParameterLayout& layout, std::size_t state_count)
    : Optimizer(backend, settings, layout.segments(), state_count) {}

template <class T>
Optimizer<T>::Optimizer(mlp::Backend<T>& backend, OptimizerSettings settings,
                        std::vector<Segment> segments, std::size_t state_count)
    : backend_(backend),
      settings_(settings),
      segments_(std::move(segments)),
      state_count_(state_count) {
  for (std::size_t a = 0; a < state_arrays(settings_.kind); ++a)
    state_.emplace_back(backend_, state_count_);
}

template <class T>
void Optimizer<T>::update(T* params, std::size_t first, std::size_t count, const T* grads,
                          std::size_t state_offset, double lr, std::int64_t step) {
  // Cut the range at the tensors' boundaries: weights decay, biases do not. Past the last
  // tensor lies the sharded mode's padding: zero, with zero gradients, it stays zero.
  const std::size_t last = first + count;
  std::size_t position = first;
  auto apply = [&](std::size_t begin, std::size_t end, bool decay) {
    if (begin >= end) return;
    const std::size_t offset = begin - first;
    T* p = params + begin;
    const T* g = grads + offset;
    if (settings_.kind == OptimizerKind::adamw) {
      const mlp::AdamWStep hyper{
          lr, settings_.beta1, settings_.beta2, settings_.eps, settings_.weight_decay, step};
      backend_.adamw_update(p, g, state_[0].data() + state_offset + offset,
                            state_[1].data() + state_offset + offset, end - begin, hyper, decay);
    } else {
      const mlp::SgdStep hyper{lr, settings_.momentum, settings_.weight_decay};
      backend_.sgd_update(p, g, state_[0].data() + state_offset + offset, end - begin, hyper,
                          decay);
    }
  };
  for (const Segment& s : segments_) {
    const std::size_t begin = std::max(position, s.offset);
    const std::size_t end = std::min(last, s.offset + s.count);
    if (begin < end) {
      apply(begin, end, s.is_weight);
      position = end;
    }
  }
  apply(
      std::max(position, segments_.empty() ? 0 : segments_.back().offset + segments_.back().count),
      last, false);
}

template class Optimizer<float>;
template class Optimizer<double>;

double LrSchedule::peak() const {
  return base_lr * static_cast<double>(batch) / static_cast<double>(reference_batch);
}

double LrSchedule::at(std::int64_t step) const {
  const double top = peak();
  if (step < warmup_steps) {
    return top * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  }
  const std::int64_t decay_steps = std::max<std::int64_t>(1, total_steps - warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  switch (schedule) {
    case Schedule::constant:
      return top;
    case Schedule::linear:
      return top * (1.0 - progress);
    case Schedule::cosine:
      return top * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  }
  return top;
}

}  // namespace collx::train
