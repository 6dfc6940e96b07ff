// What every strategy's trainer shares: the model's shape, the backend, the learning-rate
// schedule, the sampler's position, loading a batch, the checkpoint (always the whole model and
// optimizer state, unsharded, in the single-process layout: any strategy at any rank count
// resumes from any checkpoint, re-sharding it as it loads), and the agreed checksum. A strategy
// derives from TrainerCore and adds its step, its evaluation, and how its ranks' pieces make the
// whole model (export_state / import_state).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "collx/collx.hpp"
#include "dataset.hpp"
#include "mlp_math.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "sampler.hpp"
#include "trainer.hpp"

namespace collx::train {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Bus bytes of one call (StepResult::comm_bytes): `bytes` is the call's whole buffer (allreduce,
// and the gathered or reduced whole for allgather and reduce_scatter).
inline double allreduce_bus_bytes(double bytes, int ranks) {
  return ranks > 1 ? 2.0 * (ranks - 1) / ranks * bytes : 0.0;
}
inline double gather_bus_bytes(double bytes, int ranks) {
  return ranks > 1 ? static_cast<double>(ranks - 1) / ranks * bytes : 0.0;
}

// Rank `root`'s string on every rank.
std::string broadcast_string(Communicator& comm, std::string text, int root);

ModelShape model_shape(const TrainConfig& config, const DataSplit& data);

template <class T>
class TrainerCore : public TrainerBase {
 public:
  TrainerCore(const TrainConfig& config, Communicator& comm, const DataSplit& data);

  // Rank 0 initialises the whole model (or reads config.resume_path) and broadcasts it; each
  // rank takes its part (import_state); every rank checks the agreed checksum.
  void initialize() override;
  void save_checkpoint(const std::string& path) override;
  std::uint64_t agreed_checksum() override;
  std::vector<double> parameters() override;

  std::int64_t step() const override { return step_; }
  std::int64_t epoch() const override { return epoch_; }
  std::size_t step_in_epoch() const override { return step_in_epoch_; }
  std::size_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::int64_t total_steps() const override { return schedule_.total_steps; }
  double epoch_loss_sum() const override { return epoch_loss_sum_; }
  std::size_t epoch_samples() const override { return epoch_samples_; }
  void next_epoch() override;
  std::size_t parameter_count() const override { return layout_.count(); }
  const LrSchedule& schedule() const override { return schedule_; }
  std::string backend_description() const override { return backend_->description(); }

 protected:
  // The whole model (layout_.count() elements, the single-process layout) and, when states is
  // not null, the optimizer's arrays the same way; host memory, every rank. Collective.
  virtual void export_state(std::vector<T>& params, std::vector<std::vector<T>>* states) = 0;
  // This rank's part of the whole model and optimizer state (host memory, layout_.count()
  // elements each; no states: fresh optimizer state). Every rank holds all of it.
  virtual void import_state(const std::vector<T>& params,
                            const std::vector<std::vector<T>>& states) = 0;

  // This step's global batch (positions in the epoch's permutation).
  Range global_batch() const {
    return batch_positions(data_.train.rows, config_.batch, step_in_epoch_);
  }
  // Normalised inputs of permutation positions [range) of the training set into `inputs`,
  // their labels into labels_ (from index 0).
  void load_positions(Range range, T* inputs);
  // Normalised inputs and labels of `count` samples of `data` into inputs / labels_.
  void load_rows(const Dataset& data, const std::uint32_t* rows, std::size_t count, T* inputs);
  // Only the labels of permutation positions [range) (a pipeline's last stage).
  void load_labels(const Dataset& data, const std::uint32_t* rows, std::size_t count);
  void load_position_labels(Range range) {
    load_labels(data_.train, permutation_.data() + range.begin, range.size());
  }
  // Advances the sampler and fills the result's common fields.
  void finish_step(StepResult& result, Range global, double loss_sum, double lr,
                   Clock::time_point start);
  // Calls pass(rows, n) for consecutive passes of at most config_.eval_rows rows of `range` (row
  // indices of the data set), and sums the loss sums the passes return.
  template <class Pass>
  mlp::LossSums evaluate_passes(Range range, Pass pass) {
    mlp::LossSums total;
    std::vector<std::uint32_t> rows(config_.eval_rows);
    for (std::size_t begin = range.begin; begin < range.end; begin += config_.eval_rows) {
      const std::size_t n = std::min(config_.eval_rows, range.end - begin);
      for (std::size_t i = 0; i < n; ++i)
        rows[i] = static_cast<std::uint32_t>(begin + i);
      const mlp::LossSums sums = pass(rows.data(), n);
      total.loss_sum += sums.loss_sum;
      total.correct += sums.correct;
    }
    return total;
  }
  // Loss sum, correct, samples summed over every rank (each rank adds what it alone counts).
  EvalResult agree_evaluation(const mlp::LossSums& sums, double samples);
  // The optimizer over a strategy's own buffer (one rank's pieces).
  Optimizer<T> make_optimizer(std::vector<Segment> segments, std::size_t count) {
    return Optimizer<T>(*backend_, config_.optimizer, std::move(segments), count);
  }

  const TrainConfig config_;
  Communicator& comm_;
  const DataSplit& data_;
  int rank_;
  int nranks_;
  DataType type_;
  std::unique_ptr<mlp::Backend<T>> backend_;
  ModelShape shape_;
  ParameterLayout layout_;
  std::size_t steps_per_epoch_;
  LrSchedule schedule_;
  std::vector<std::int32_t> labels_;
  std::vector<std::uint32_t> permutation_;
  T mean_ = 0;
  T inv_std_ = 1;
  std::int64_t step_ = 0;
  std::int64_t epoch_ = 0;
  std::size_t step_in_epoch_ = 0;
  double epoch_loss_sum_ = 0;
  std::size_t epoch_samples_ = 0;

 private:
  CheckpointHeader header() const;
  void resume(const std::string& path);
};

// Each strategy's trainer (strategies/*.cpp).
template <class T>
std::unique_ptr<TrainerBase> make_data_parallel(const TrainConfig&, Communicator&,
                                                const DataSplit&);
template <class T>
std::unique_ptr<TrainerBase> make_fsdp(const TrainConfig&, Communicator&, const DataSplit&);
template <class T>
std::unique_ptr<TrainerBase> make_pipeline(const TrainConfig&, Communicator&, const DataSplit&);
template <class T>
std::unique_ptr<TrainerBase> make_tensor_parallel(const TrainConfig&, Communicator&,
                                                  const DataSplit&);

}  // namespace collx::train
