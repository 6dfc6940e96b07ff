#include "trainer_core.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "checksum.hpp"

namespace collx::train {

std::string broadcast_string(Communicator& comm, std::string text, int root) {
  std::uint64_t length = text.size();
  comm.broadcast(&length, 1, DataType::uint64, root);
  text.resize(length);
  if (length) comm.broadcast(text.data(), length, DataType::uint8, root);
  return text;
}

ModelShape model_shape(const TrainConfig& config, const DataSplit& data) {
  ModelShape shape;
  shape.sizes.push_back(data.train.features);
  shape.sizes.insert(shape.sizes.end(), config.hidden.begin(), config.hidden.end());
  shape.sizes.push_back(data.classes);
  return shape;
}

template <class T>
TrainerCore<T>::TrainerCore(const TrainConfig& config, Communicator& comm, const DataSplit& data)
    : config_(config),
      comm_(comm),
      data_(data),
      rank_(comm.rank()),
      nranks_(comm.size()),
      type_(datatype_of_v<T>),
      backend_(mlp::make_backend<T>(
          config.device,
          config.device == mlp::Device::cuda ? collx::node_placement(comm.mpi_comm()).rank : 0)),
      shape_(model_shape(config, data)),
      layout_(shape_),
      steps_per_epoch_(train::steps_per_epoch(data.train.rows, config.batch)) {
  schedule_.base_lr = config.lr;
  schedule_.reference_batch = config.lr_reference_batch;
  schedule_.batch = config.batch;
  schedule_.total_steps = static_cast<std::int64_t>(steps_per_epoch_) * config.epochs;
  schedule_.warmup_steps = static_cast<std::int64_t>(
      std::llround(config.warmup_epochs * static_cast<double>(steps_per_epoch_)));
  schedule_.schedule = config.schedule;
  mean_ = static_cast<T>(data.pixel_mean);
  inv_std_ = static_cast<T>(1.0 / data.pixel_stddev);
}

template <class T>
void TrainerCore<T>::initialize() {
  if (!config_.resume_path.empty()) {
    resume(config_.resume_path);
  } else {
    std::vector<T> params(layout_.count());
    if (rank_ == 0) initialize_parameters(shape_, config_.seed, params.data(), params.size());
    comm_.broadcast(params.data(), params.size(), type_, 0);
    import_state(params, {});
  }
  // Every rank checks that the model is what rank 0 sent.
  agreed_checksum();
  permutation_ = epoch_permutation(data_.train.rows, config_.seed, epoch_);
}

template <class T>
void TrainerCore<T>::next_epoch() {
  ++epoch_;
  step_in_epoch_ = 0;
  epoch_loss_sum_ = 0;
  epoch_samples_ = 0;
  permutation_ = epoch_permutation(data_.train.rows, config_.seed, epoch_);
}

template <class T>
void TrainerCore<T>::load_rows(const Dataset& data, const std::uint32_t* rows, std::size_t count,
                               T* inputs) {
  backend_->gather_inputs(data.images.data(), data.features, rows, count, mean_, inv_std_, inputs);
  load_labels(data, rows, count);
}

template <class T>
void TrainerCore<T>::load_labels(const Dataset& data, const std::uint32_t* rows,
                                 std::size_t count) {
  if (labels_.size() < count) labels_.resize(count);
  for (std::size_t i = 0; i < count; ++i)
    labels_[i] = data.labels[rows[i]];
}

template <class T>
void TrainerCore<T>::load_positions(Range range, T* inputs) {
  load_rows(data_.train, permutation_.data() + range.begin, range.size(), inputs);
}

template <class T>
void TrainerCore<T>::finish_step(StepResult& result, Range global, double loss_sum, double lr,
                                 Clock::time_point start) {
  ++step_;
  ++step_in_epoch_;
  epoch_loss_sum_ += loss_sum;
  epoch_samples_ += global.size();
  result.loss_sum = loss_sum;
  result.samples = global.size();
  result.loss = loss_sum / static_cast<double>(global.size());
  result.lr = lr;
  result.seconds = seconds_since(start);
}

template <class T>
EvalResult TrainerCore<T>::agree_evaluation(const mlp::LossSums& local, double samples) {
  // Counts below 2^53 are exact in float64.
  double sums[3] = {local.loss_sum, static_cast<double>(local.correct), samples};
  comm_.allreduce(in_place, sums, 3, DataType::float64, ReduceOp::sum);
  EvalResult result;
  result.samples = static_cast<std::size_t>(sums[2]);
  result.correct = static_cast<std::size_t>(sums[1]);
  result.loss = result.samples ? sums[0] / sums[2] : 0.0;
  result.accuracy = result.samples ? sums[1] / sums[2] : 0.0;
  return result;
}

template <class T>
void TrainerCore<T>::save_checkpoint(const std::string& path) {
  std::vector<T> params;
  std::vector<std::vector<T>> states;
  export_state(params, &states);
  std::string error;
  if (rank_ == 0) {
    std::vector<const void*> state_pointers;
    for (const auto& s : states)
      state_pointers.push_back(s.data());
    try {
      write_checkpoint(path, header(), params.data(), state_pointers);
    } catch (const CheckpointError& e) {
      error = e.what();
    }
  }
  error = broadcast_string(comm_, error, 0);
  if (!error.empty()) throw CheckpointError("checkpoint not written: " + error);
}

template <class T>
std::uint64_t TrainerCore<T>::agreed_checksum() {
  std::vector<T> params;
  export_state(params, nullptr);
  const std::uint64_t mine = checksum_bytes(params.data(), params.size() * sizeof(T));
  // min over [h, ~h] gives the smallest and (complemented) the largest checksum in one call.
  std::uint64_t extremes[2] = {mine, ~mine};
  comm_.allreduce(in_place, extremes, 2, DataType::uint64, ReduceOp::min);
  if (extremes[0] != ~extremes[1]) {
    throw std::runtime_error("the ranks hold different parameters (this rank's checksum " +
                             checksum_hex(mine) + ", smallest " + checksum_hex(extremes[0]) +
                             ", largest " + checksum_hex(~extremes[1]) + ")");
  }
  return mine;
}

template <class T>
std::vector<double> TrainerCore<T>::parameters() {
  std::vector<T> params;
  export_state(params, nullptr);
  return std::vector<double>(params.begin(), params.end());
}

template <class T>
CheckpointHeader TrainerCore<T>::header() const {
  CheckpointHeader h;
  h.dtype = std::string(to_string(type_));
  h.shape = shape_;
  h.optimizer = config_.optimizer.kind;
  h.parameters = layout_.count();
  h.step = step_;
  h.epoch = epoch_;
  h.step_in_epoch = step_in_epoch_;
  h.seed = config_.seed;
  h.batch = config_.batch;
  h.epoch_loss_sum = epoch_loss_sum_;
  h.epoch_samples = epoch_samples_;
  h.ranks = nranks_;
  return h;
}

template <class T>
void TrainerCore<T>::resume(const std::string& path) {
  // Rank 0 reads (the file need not be visible to the others) and sends what it read.
  CheckpointData saved;
  std::string error;
  if (rank_ == 0) {
    try {
      saved = read_checkpoint(path);
      const std::string mismatch = checkpoint_mismatch(saved.header, header());
      if (!mismatch.empty()) error = path + ": " + mismatch;
      if (error.empty() && saved.header.step_in_epoch >= steps_per_epoch_) {
        error = path + ": its position (step " + std::to_string(saved.header.step_in_epoch) +
                " of an epoch) is past this data set's " + std::to_string(steps_per_epoch_) +
                " steps per epoch";
      }
    } catch (const CheckpointError& e) {
      error = e.what();
    }
  }
  error = broadcast_string(comm_, error, 0);
  if (!error.empty()) throw CheckpointError("cannot resume: " + error);
  const CheckpointHeader h = header_from_json(
      broadcast_string(comm_, rank_ == 0 ? header_to_json(saved.header) : "", 0));
  const std::size_t count = layout_.count();
  auto receive = [&](const std::vector<std::byte>& bytes) {
    std::vector<T> values(count);
    if (rank_ == 0) std::copy_n(reinterpret_cast<const T*>(bytes.data()), count, values.begin());
    comm_.broadcast(values.data(), count, type_, 0);
    return values;
  };
  const std::vector<T> params = receive(saved.parameters);
  std::vector<std::vector<T>> states;
  for (std::size_t a = 0; a < state_arrays(config_.optimizer.kind); ++a)
    states.push_back(receive(rank_ == 0 ? saved.states[a] : std::vector<std::byte>{}));
  import_state(params, states);
  step_ = h.step;
  epoch_ = h.epoch;
  step_in_epoch_ = h.step_in_epoch;
  epoch_loss_sum_ = h.epoch_loss_sum;
  epoch_samples_ = h.epoch_samples;
}

template class TrainerCore<float>;
template class TrainerCore<double>;

}  // namespace collx::train
