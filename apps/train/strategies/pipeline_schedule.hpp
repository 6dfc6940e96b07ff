// The pipeline's schedules as data: which forward and backward passes a stage runs, in which
// order (the trainer runs exactly this list), and the replay of those lists over measured
// compute times, which gives the bubble a schedule leaves with those times when messages cost
// nothing. Pure functions, no MPI: tested on their own (train_unit_test).
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "trainer.hpp"

namespace collx::train {

struct PipelineOp {
  bool backward = false;
  std::size_t micro_batch = 0;
};

// Stage `stage` of `stages`, `m` micro-batches:
//   GPipe: every forward, then every backward;
//   1F1B:  min(S - s - 1, m) forwards, then one forward and one backward alternately, then the
//          remaining backwards: at most S - s micro-batches alive at once instead of m.
// Backwards run in micro-batch order in both, so both sum the gradients in the same order.
inline std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, std::size_t stages,
                                            std::size_t stage, std::size_t m) {
  std::vector<PipelineOp> ops;
  if (schedule == PipelineSchedule::gpipe) {
    for (std::size_t i = 0; i < m; ++i)
      ops.push_back({false, i});
    for (std::size_t i = 0; i < m; ++i)
      ops.push_back({true, i});
    return ops;
  }
  const std::size_t warmup = std::min(stages - stage - 1, m);
  for (std::size_t i = 0; i < warmup; ++i)
    ops.push_back({false, i});
  for (std::size_t i = 0; i + warmup < m; ++i) {
    ops.push_back({false, i + warmup});
    ops.push_back({true, i});
  }
  for (std::size_t i = m - warmup; i < m; ++i)
    ops.push_back({true, i});
  return ops;
}

// Compute seconds of each pass: forward[s][i], backward[s][i] of stage s, micro-batch i;
// backward_input[s][i]: how far into that backward pass its input gradient was ready and sent
// (a stage computes its input gradient before its weight gradients); empty: at its end.
struct PassTimes {
  std::vector<std::vector<double>> forward;
  std::vector<std::vector<double>> backward;
  std::vector<std::vector<double>> backward_input;
};

struct ReplayedStep {
  double seconds = 0;        // from the first pass's start to the last one's end
  std::vector<double> idle;  // per stage: seconds - its passes' compute
};

// Runs every stage's list as soon as its inputs are there: forward i of stage s after forward
// i of stage s - 1, backward i once backward i of stage s + 1 has sent its input gradient (and
// after the stage's previous pass). Messages take no time, so what is idle is the schedule's
// bubble for these compute times; with equal times per pass on every stage (and the input
// gradient sent at a backward pass's end) it is (S - 1) / (m + S - 1) of the step.
inline ReplayedStep replay_pipeline(PipelineSchedule schedule, const PassTimes& times) {
  const std::size_t stages = times.forward.size();
  const std::size_t m = stages ? times.forward[0].size() : 0;
  std::vector<std::vector<PipelineOp>> ops(stages);
  for (std::size_t s = 0; s < stages; ++s)
    ops[s] = pipeline_ops(schedule, stages, s, m);
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> forward_end(stages, std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> gradient_sent(stages, std::vector<double>(m, kNotYet));
  std::vector<std::size_t> next(stages, 0);
  std::vector<double> free_at(stages, 0);
  ReplayedStep step;
  step.idle.assign(stages, 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t s = 0; s < stages; ++s) {
      while (next[s] < ops[s].size()) {
        const PipelineOp op = ops[s][next[s]];
        const std::size_t i = op.micro_batch;
        double ready = free_at[s];
        if (!op.backward && s > 0) {
          if (forward_end[s - 1][i] == kNotYet) break;
          ready = std::max(ready, forward_end[s - 1][i]);
        }
        if (op.backward && s + 1 < stages) {
          if (gradient_sent[s + 1][i] == kNotYet) break;
          ready = std::max(ready, gradient_sent[s + 1][i]);
        }
        const double cost = op.backward ? times.backward[s][i] : times.forward[s][i];
        free_at[s] = ready + cost;
        if (op.backward) {
          gradient_sent[s][i] =
              times.backward_input.empty() ? free_at[s] : ready + times.backward_input[s][i];
        } else {
          forward_end[s][i] = free_at[s];
        }
        step.idle[s] -= cost;
        ++next[s];
        moved = true;
      }
    }
  }
  for (std::size_t s = 0; s < stages; ++s) {
    if (next[s] != ops[s].size()) throw std::logic_error("pipeline schedule deadlocks");
    step.seconds = std::max(step.seconds, free_at[s]);
  }
  for (double& idle : step.idle)
    idle += step.seconds;
  return step;
}

// The formula for stages that are not equal: the bubble `schedule` leaves when every forward
// pass of stage s costs forward[s] and every backward backward[s], messages free (the replay of
// uniform passes): the mean over the stages of idle / step. With equal stages it is
// (S - 1) / (m + S - 1). An MLP's stages cannot be equal in both passes, as its first layer
// computes no input gradient (its backward costs about its forward, the others' about twice),
// and the schedules pay for that differently:
//   GPipe runs the forwards at the pace of the slowest forward and the backwards at the pace of
//     the slowest backward: step = sum(F) + sum(B) + (m - 1) (max F + max B) (a flow shop of m
//     equal jobs, twice), so cutting the layers by equal F + B still leaves a bubble that grows
//     with m towards 1 - mean(F + B) / (max F + max B);
//   1F1B alternates one forward and one backward in its steady state, so the stages' F + B
//     sets the pace, and stages of equal F + B come close to (S - 1) / (m + S - 1).
//
// backward_input[s]: the part of backward[s] done before the stage sends its input gradient
// (empty: all of it, the backward pass as one piece). A stage that computes its input gradient
// first and its weight gradients after sending it lets the previous stage start that much
// earlier; the formula then falls below (S - 1) / (m + S - 1), which takes a backward pass as
// indivisible.
inline double pipeline_bubble_formula(PipelineSchedule schedule, const std::vector<double>& forward,
                                      const std::vector<double>& backward, std::size_t m,
                                      const std::vector<double>& backward_input = {}) {
  const std::size_t stages = forward.size();
  if (stages == 0 || m == 0) return 0;
  PassTimes times;
  for (std::size_t s = 0; s < stages; ++s) {
    times.forward.emplace_back(m, forward[s]);
    times.backward.emplace_back(m, backward[s]);
    if (!backward_input.empty()) times.backward_input.emplace_back(m, backward_input[s]);
  }
  const ReplayedStep step = replay_pipeline(schedule, times);
  if (step.seconds <= 0) return 0;
  double idle = 0;
  for (double stage_idle : step.idle)
    idle += stage_idle;
  return idle / static_cast<double>(stages) / step.seconds;
}

}  // namespace collx::train
