// The pipeline's stage partition: which consecutive layers each stage holds. Pure functions,
// no MPI: tested on their own (train_unit_test).
//
// A stage's cost is not one number. Its forward and backward passes run at different points of
// a schedule, and an MLP's stages cannot be equal in both: the first layer computes no input
// gradient, so the stage holding it has a backward pass of about its forward's cost, the others
// of about twice theirs. GPipe runs every forward at the pace of the slowest forward and every
// backward at the pace of the slowest backward; 1F1B's steady state is paced by forward +
// backward. So the partition is chosen by the schedule itself: every contiguous cut is replayed
// (pipeline_schedule.hpp) with its stages' GEMM work, and the shortest predicted step wins
// (with a fixed amount of work, the shortest step is the smallest bubble).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipeline_schedule.hpp"

namespace collx::train {

// One layer's cost per sample: forward; backward (weight gradient + input gradient); and of that
// the input gradient (0 for the first layer, which computes none).
struct LayerCost {
  double forward = 0;
  double backward = 0;
  double input_gradient = 0;
};

// An MLP's layers (widths sizes[0] -> sizes[1] -> ...) in multiply-adds of their GEMMs per sample:
// in x out forward, as many for the weight gradient, as many again for the input gradient but in
// the first layer. Biases and activations are left out (under 1 % of the GEMMs here).
inline std::vector<LayerCost> mlp_layer_costs(const std::vector<std::size_t>& sizes) {
  std::vector<LayerCost> costs;
  for (std::size_t l = 0; l + 1 < sizes.size(); ++l) {
    const double gemm = static_cast<double>(sizes[l]) * static_cast<double>(sizes[l + 1]);
    const double input = l == 0 ? 0.0 : gemm;
    costs.push_back({gemm, gemm + input, input});
  }
  return costs;
}

// Stage s holds layers [first[s], first[s + 1]).
struct StageCosts {
  std::vector<double> forward;
  std::vector<double> backward;
  // The part of backward done before the stage sends its input gradient: with input-first only
  // the input gradients' GEMMs (a stage after the first), otherwise the whole pass.
  std::vector<double> backward_input;
};

inline StageCosts stage_costs(const std::vector<LayerCost>& layers,
                              const std::vector<std::size_t>& first, bool input_first) {
  StageCosts costs;
  for (std::size_t s = 0; s + 1 < first.size(); ++s) {
    double forward = 0, backward = 0, input = 0;
    for (std::size_t l = first[s]; l < first[s + 1]; ++l) {
      forward += layers[l].forward;
      backward += layers[l].backward;
      input += layers[l].input_gradient;
    }
    costs.forward.push_back(forward);
    costs.backward.push_back(backward);
    costs.backward_input.push_back(input_first && s > 0 ? input : backward);
  }
  return costs;
}

// The step `schedule` takes with these stages, m micro-batches and messages free.
inline double predicted_step(PipelineSchedule schedule, const StageCosts& costs, std::size_t m) {
  PassTimes times;
  for (std::size_t s = 0; s < costs.forward.size(); ++s) {
    times.forward.emplace_back(m, costs.forward[s]);
    times.backward.emplace_back(m, costs.backward[s]);
    times.backward_input.emplace_back(m, costs.backward_input[s]);
  }
  return replay_pipeline(schedule, times).seconds;
}

// Cuts layers with these costs into `stages` contiguous runs minimising the largest run's cost;
// returns each stage's first layer, and the end.
inline std::vector<std::size_t> min_max_stages(const std::vector<double>& cost,
                                               std::size_t stages) {
  const std::size_t n = cost.size();
  std::vector<double> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][i]: the smallest largest cost of the first i layers in s stages; cut[s][i]: where
  // the last of those stages begins.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<std::size_t>> cut(stages + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t s = 1; s <= stages; ++s) {
    for (std::size_t i = s; i <= n; ++i) {
      for (std::size_t j = s - 1; j < i; ++j) {
        const double value = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (value < best[s][i]) {
          best[s][i] = value;
          cut[s][i] = j;
        }
      }
    }
  }
  std::vector<std::size_t> first(stages + 1);
  first[stages] = n;
  for (std::size_t s = stages, i = n; s > 0; --s) {
    i = cut[s][i];
    first[s - 1] = i;
  }
  return first;
}

// Every cut is replayed while there are at most this many (C(layers - 1, stages - 1)) and their
// replays run at most kMaxReplayedPasses passes in all (well under a second); beyond, the
// min_max_stages of forward + backward.
constexpr double kMaxReplayedPartitions = 20000;
constexpr double kMaxReplayedPasses = 2e7;

inline double partition_count(std::size_t layers, std::size_t stages) {
  double count = 1;  // C(layers - 1, stages - 1)
  for (std::size_t k = 1; k < stages; ++k)
    count = count * static_cast<double>(layers - stages + k) / static_cast<double>(k);
  return count;
}

inline bool replays_every_cut(std::size_t layers, std::size_t stages, std::size_t m) {
  const double cuts = partition_count(layers, stages);
  return cuts <= kMaxReplayedPartitions &&
         cuts * static_cast<double>(stages) * 2 * static_cast<double>(m) <= kMaxReplayedPasses;
}

// The partition --pipeline-split auto takes: of every contiguous cut of the layers into
// `stages` non-empty stages, the one whose replayed step (schedule, m micro-batches, backward
// mode) is the shortest; among steps within 1e-9 of each other the one with the smaller largest
// forward + backward, then the first (too many replays: min_max_stages). Each stage's first
// layer, and the end.
inline std::vector<std::size_t> balanced_stages(const std::vector<LayerCost>& layers,
                                                std::size_t stages, PipelineSchedule schedule,
                                                std::size_t m, bool input_first) {
  const std::size_t n = layers.size();
  if (stages == 0 || stages > n) {
    throw std::invalid_argument("cannot cut " + std::to_string(n) + " layers into " +
                                std::to_string(stages) + " stages");
  }
  if (!replays_every_cut(n, stages, m)) {
    std::vector<double> total;
    for (const LayerCost& layer : layers)
      total.push_back(layer.forward + layer.backward);
    return min_max_stages(total, stages);
  }
  std::vector<std::size_t> first(stages + 1), best;
  double best_step = 0, best_largest = 0;
  // Visits every cut: first[0] = 0, first[stages] = n, strictly increasing in between.
  auto visit = [&](auto&& self, std::size_t s) -> void {
    if (s == stages) {
      const StageCosts costs = stage_costs(layers, first, input_first);
      const double step = predicted_step(schedule, costs, m);
      double largest = 0;
      for (std::size_t k = 0; k < stages; ++k)
        largest = std::max(largest, costs.forward[k] + costs.backward[k]);
      const double tolerance = 1e-9 * std::max(step, best_step);
      if (best.empty() || step < best_step - tolerance ||
          (step <= best_step + tolerance && largest < best_largest)) {
        best = first;
        best_step = step;
        best_largest = largest;
      }
      return;
    }
    // Stage s starts after stage s - 1 and leaves a layer for each later stage.
    for (std::size_t begin = first[s - 1] + 1; begin + (stages - s) <= n; ++begin) {
      first[s] = begin;
      self(self, s + 1);
    }
  };
  first[0] = 0;
  first[stages] = n;
  visit(visit, 1);
  return best;
}

// --pipeline-split's layer counts per stage (4,3: stage 0 holds 4 layers, stage 1 the next 3)
// as each stage's first layer and the end; what is wrong with them as an std::invalid_argument.
inline std::vector<std::size_t> stages_from_counts(const std::vector<std::size_t>& counts,
                                                   std::size_t layers, std::size_t stages) {
  std::string given;
  std::size_t sum = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    given += std::string(k ? "," : "") + std::to_string(counts[k]);
    sum += counts[k];
  }
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] == 0) {
      throw std::invalid_argument("--pipeline-split " + given + ": stage " + std::to_string(k) +
                                  " holds no layer (each stage needs at least one)");
    }
  }
  if (counts.size() != stages) {
    throw std::invalid_argument("--pipeline-split " + given + " gives " +
                                std::to_string(counts.size()) + " stages, the pipeline has " +
                                std::to_string(stages) + " (ranks / --replicas)");
  }
  if (sum != layers) {
    throw std::invalid_argument("--pipeline-split " + given + " places " + std::to_string(sum) +
                                " layers, the model has " + std::to_string(layers) +
                                " (--hidden widths + 1)");
  }
  std::vector<std::size_t> first{0};
  for (std::size_t count : counts)
    first.push_back(first.back() + count);
  return first;
}

}  // namespace collx::train
