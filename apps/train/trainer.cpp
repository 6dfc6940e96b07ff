#include "trainer.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "checksum.hpp"

namespace collx::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Splits a step's wall time into phases, each without the communication time inside it.
class PhaseTimer {
 public:
  explicit PhaseTimer(const CommClock& comm)
      : comm_(comm), last_(Clock::now()), last_comm_(comm.seconds()) {}
  // Compute seconds since the previous lap.
  double lap() {
    const auto now = Clock::now();
    const double wall = std::chrono::duration<double>(now - last_).count();
    const double comm = comm_.seconds() - last_comm_;
    last_ = now;
    last_comm_ = comm_.seconds();
    return wall - comm;
  }

 private:
  const CommClock& comm_;
  Clock::time_point last_;
  double last_comm_;
};

constexpr double kMiB = 1024.0 * 1024.0;

// Options for collectives on the backend's memory: nothing for the CPU backend (host memory,
// the defaults); for a device backend, device memory (not detected per call) and the
// stream-ordered form on `stream`, so the collective reads its inputs after the work enqueued
// there and the work enqueued there afterwards sees its result.
Options memory_options(Options options, void* stream) {
  if (stream) {
    options.memory = MemoryKind::device;
    options.stream = stream;
  }
  return options;
}

// Orders the gradient buckets' collectives (on the backend's side stream) with the backend's
// computation (its stream) through events: bucket b uses events 2b (its inputs are complete)
// and 2b + 1 (its result is).
template <class T>
class BackendStreamOrder final : public StreamOrder {
 public:
  explicit BackendStreamOrder(mlp::Backend<T>& backend) : backend_(backend) {}
  void before_launch(std::size_t bucket) override {
    backend_.record_event(2 * bucket, backend_.stream());
    backend_.wait_event(backend_.side_stream(), 2 * bucket);
  }
  void after_launch(std::size_t bucket) override {
    backend_.record_event(2 * bucket + 1, backend_.side_stream());
  }
  void use_result(std::size_t bucket) override {
    backend_.wait_event(backend_.stream(), 2 * bucket + 1);
  }

 private:
  mlp::Backend<T>& backend_;
};

// Rank `root`'s string on every rank.
std::string broadcast_string(Communicator& comm, std::string text, int root) {
  std::uint64_t length = text.size();
  comm.broadcast(&length, 1, DataType::uint64, root);
  text.resize(length);
  if (length) comm.broadcast(text.data(), length, DataType::uint8, root);
  return text;
}

template <class T>
class Trainer final : public TrainerBase {
 public:
  Trainer(const TrainConfig& config, Communicator& comm, const DataSplit& data)
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
        buckets_(make_buckets(layout_.count(), sizeof(T),
                              static_cast<std::size_t>(config.first_bucket_mb * kMiB),
                              static_cast<std::size_t>(config.bucket_mb * kMiB),
                              config.shard ? static_cast<std::size_t>(nranks_) : 1)),
        padded_(buckets_.back().end),
        max_rows_(std::max(micro_rows(config, nranks_), config.eval_rows)),
        mlp_(*backend_, shape_, max_rows_),
        optimizer_(*backend_, config.optimizer, layout_,
                   config.shard ? padded_ / static_cast<std::size_t>(nranks_) : layout_.count()),
        params_(*backend_, padded_),
        grads_(*backend_, padded_),
        shard_grads_(*backend_, config.shard ? padded_ / static_cast<std::size_t>(nranks_) : 0),
        inputs_(*backend_, max_rows_ * data.train.features),
        order_(backend_->stream() ? std::make_unique<BackendStreamOrder<T>>(*backend_) : nullptr),
        sync_(comm, type_, buckets_,
              config.shard ? GradientSync::Mode::reduce_scatter : GradientSync::Mode::allreduce,
              config.overlap, memory_options(gradient_options(config), backend_->side_stream()),
              clock_, order_.get()),
        allgather_options_(memory_options(allgather_options(config), backend_->stream())),
        device_options_(memory_options(Options{}, backend_->stream())),
        steps_per_epoch_(train::steps_per_epoch(data.train.rows, config.batch)) {
    schedule_.base_lr = config.lr;
    schedule_.reference_batch = config.lr_reference_batch;
    schedule_.batch = config.batch;
    schedule_.total_steps = static_cast<std::int64_t>(steps_per_epoch_) * config.epochs;
    schedule_.warmup_steps = static_cast<std::int64_t>(
        std::llround(config.warmup_epochs * static_cast<double>(steps_per_epoch_)));
    schedule_.schedule = config.schedule;
    labels_.resize(max_rows_);
    indices_.resize(max_rows_);
    mean_ = static_cast<T>(data.pixel_mean);
    inv_std_ = static_cast<T>(1.0 / data.pixel_stddev);
  }

  void initialize() override {
    if (!config_.resume_path.empty()) {
      resume(config_.resume_path);
    } else {
      if (rank_ == 0) {
        std::vector<T> host(padded_);
        initialize_parameters(shape_, config_.seed, host.data(), host.size());
        backend_->upload(params_.data(), host.data(), host.size());
      }
      comm_.broadcast(params_.data(), layout_.count(), type_, 0, device_options_);
    }
    // Every rank checks that it holds what rank 0 sent.
    agreed_checksum();
    permutation_ = epoch_permutation(data_.train.rows, config_.seed, epoch_);
  }

  StepResult train_step() override {
    const auto start = Clock::now();
    clock_.reset();
    const Range global = batch_positions(data_.train.rows, config_.batch, step_in_epoch_);
    const Range mine = rank_slice(global, rank_, nranks_);
    // Each rank's loss is divided by the global batch and the ranks' gradients are summed:
    // the single-process mean, whatever the number of ranks.
    const T scale = T(1) / static_cast<T>(global.size());
    sync_.begin(grads_.data(), shard_grads_.data());
    loss_local_ = 0;
    Request loss_request;
    StepResult result;
    PhaseTimer phase(clock_);
    for (std::size_t k = 0; k < config_.accum; ++k) {
      const Range part = split_evenly(mine.size(), config_.accum, k);
      const std::size_t rows =
          load_rows(data_.train, permutation_.data() + mine.begin + part.begin, part.size());
      mlp_.forward(params_.data(), inputs_.data(), rows);
      loss_local_ += mlp_.loss(labels_.data(), true, scale).loss_sum;
      const bool last = k + 1 == config_.accum;
      if (last) {
        CommClock::Scope timed(clock_);
        loss_request =
            comm_.iallreduce(&loss_local_, &loss_global_, 1, DataType::float64, ReduceOp::sum);
      }
      result.forward_seconds += phase.lap();
      // Only the last micro-batch communicates: the others just add to the local gradients.
      mlp_.backward(params_.data(), inputs_.data(), grads_.data(), k > 0, last ? &sync_ : nullptr);
      // A device backend has only enqueued the backward pass: its time is the device's, and
      // the buckets launched meanwhile keep moving (the CPU backend is always ready).
      if (last) {
        while (!backend_->ready())
          sync_.drive();
      }
      result.backward_seconds += phase.lap();
    }
    const double lr = schedule_.at(step_);
    update(lr);
    result.update_seconds = phase.lap();
    {
      CommClock::Scope timed(clock_);
      loss_request.wait();
    }
    if (config_.verify_replicas) {
      CommClock::Scope timed(clock_);
      verify_replicas();
    }
    ++step_;
    ++step_in_epoch_;
    epoch_loss_sum_ += loss_global_;
    epoch_samples_ += global.size();

    result.loss_sum = loss_global_;
    result.samples = global.size();
    result.loss = loss_global_ / static_cast<double>(global.size());
    result.lr = lr;
    result.seconds = seconds_since(start);
    result.comm_seconds = clock_.seconds();
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    // Contiguous, disjoint slices: every sample counted once whatever the rank count.
    const Range mine =
        split_evenly(data.rows, static_cast<std::size_t>(nranks_), static_cast<std::size_t>(rank_));
    double sums[3] = {0, 0, static_cast<double>(mine.size())};  // loss, correct, samples
    std::vector<std::uint32_t> rows(config_.eval_rows);
    for (std::size_t begin = mine.begin; begin < mine.end; begin += config_.eval_rows) {
      const std::size_t n = std::min(config_.eval_rows, mine.end - begin);
      for (std::size_t i = 0; i < n; ++i)
        rows[i] = static_cast<std::uint32_t>(begin + i);
      load_rows(data, rows.data(), n);
      mlp_.forward(params_.data(), inputs_.data(), n);
      const mlp::LossSums s = mlp_.loss(labels_.data(), false, T(0));
      sums[0] += s.loss_sum;
      sums[1] += static_cast<double>(s.correct);
    }
    // Counts below 2^53 are exact in float64.
    comm_.allreduce(in_place, sums, 3, DataType::float64, ReduceOp::sum);
    EvalResult result;
    result.samples = static_cast<std::size_t>(sums[2]);
    result.correct = static_cast<std::size_t>(sums[1]);
    result.loss = result.samples ? sums[0] / sums[2] : 0.0;
    result.accuracy = result.samples ? sums[1] / sums[2] : 0.0;
    return result;
  }

  void save_checkpoint(const std::string& path) override {
    const std::size_t count = layout_.count();
    std::vector<T> params(count);
    backend_->download(params.data(), params_.data(), count);
    std::vector<std::vector<T>> states(optimizer_.arrays(), std::vector<T>(count));
    for (std::size_t a = 0; a < optimizer_.arrays(); ++a) {
      if (config_.shard) {
        // Each rank holds its block of every bucket: gather the whole array.
        mlp::DeviceBuffer<T> full(*backend_, padded_);
        const auto n = static_cast<std::size_t>(nranks_);
        for (const Bucket& b : buckets_) {
          comm_.allgather(optimizer_.state(a) + b.begin / n, full.data() + b.begin, b.size() / n,
                          type_, device_options_);
        }
        backend_->download(states[a].data(), full.data(), count);
      } else {
        backend_->download(states[a].data(), optimizer_.state(a), count);
      }
    }
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

  std::uint64_t local_checksum() const override {
    std::vector<T> host(layout_.count());
    backend_->download(host.data(), params_.data(), host.size());
    return checksum_bytes(host.data(), host.size() * sizeof(T));
  }

  std::uint64_t agreed_checksum() override {
    const std::uint64_t mine = local_checksum();
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

  std::vector<double> parameters() const override {
    std::vector<T> host(layout_.count());
    backend_->download(host.data(), params_.data(), host.size());
    return std::vector<double>(host.begin(), host.end());
  }

  std::int64_t step() const override { return step_; }
  std::int64_t epoch() const override { return epoch_; }
  std::size_t step_in_epoch() const override { return step_in_epoch_; }
  std::size_t steps_per_epoch() const override { return steps_per_epoch_; }
  std::int64_t total_steps() const override { return schedule_.total_steps; }
  double epoch_loss_sum() const override { return epoch_loss_sum_; }
  std::size_t epoch_samples() const override { return epoch_samples_; }
  void next_epoch() override {
    ++epoch_;
    step_in_epoch_ = 0;
    epoch_loss_sum_ = 0;
    epoch_samples_ = 0;
    permutation_ = epoch_permutation(data_.train.rows, config_.seed, epoch_);
  }
  std::size_t parameter_count() const override { return layout_.count(); }
  const std::vector<Bucket>& buckets() const override { return buckets_; }
  const LrSchedule& schedule() const override { return schedule_; }
  std::string backend_description() const override { return backend_->description(); }

 private:
  static ModelShape model_shape(const TrainConfig& config, const DataSplit& data) {
    ModelShape shape;
    shape.sizes.push_back(data.train.features);
    shape.sizes.insert(shape.sizes.end(), config.hidden.begin(), config.hidden.end());
    shape.sizes.push_back(data.classes);
    return shape;
  }

  // The most samples one micro-batch of one rank can hold.
  static std::size_t micro_rows(const TrainConfig& config, int nranks) {
    const std::size_t per_rank =
        (config.batch + static_cast<std::size_t>(nranks) - 1) / static_cast<std::size_t>(nranks);
    return std::max<std::size_t>(1, (per_rank + config.accum - 1) / config.accum);
  }

  static Options gradient_options(const TrainConfig& config) {
    Options options;
    options.algorithm = config.algorithm;
    return options;
  }

  // --shard: the parameters' allgather runs the --algo algorithm where allgather has it (ring).
  static Options allgather_options(const TrainConfig& config) {
    Options options;
    if (implements(Collective::allgather, config.algorithm)) options.algorithm = config.algorithm;
    return options;
  }

  // Normalised inputs and labels of `count` samples of `data` into inputs_ / labels_.
  std::size_t load_rows(const Dataset& data, const std::uint32_t* rows, std::size_t count) {
    backend_->gather_inputs(data.images.data(), data.features, rows, count, mean_, inv_std_,
                            inputs_.data());
    for (std::size_t i = 0; i < count; ++i)
      labels_[i] = data.labels[rows[i]];
    return count;
  }

  // The optimizer step. With overlap, bucket by bucket as their reductions complete (in the
  // order they were launched), polling the others between pieces of the update; with --shard,
  // each bucket's allgather leaves as soon as this rank's block of it is updated. Without
  // overlap: wait for every reduction, update, then gather. The arithmetic is the same either
  // way (the update is elementwise), so the weights are bitwise the same.
  void update(double lr) {
    const auto n = static_cast<std::size_t>(nranks_);
    const auto r = static_cast<std::size_t>(rank_);
    const std::int64_t step = step_ + 1;
    if (config_.overlap) {
      sync_.launch_all();
    } else {
      sync_.finish();
    }
    gathers_.clear();
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      const Bucket& b = buckets_[k];
      sync_.wait(k);
      if (!config_.shard) {
        update_range(b.begin, b.size(), grads_.data() + b.begin, b.begin, lr, step);
        continue;
      }
      const std::size_t block = b.size() / n;
      update_range(b.begin + r * block, block, shard_grads_.data() + b.begin / n, b.begin / n, lr,
                   step);
      if (config_.overlap) gathers_.push_back(start_gather(b));
    }
    if (config_.shard && !config_.overlap) {
      for (const Bucket& b : buckets_)
        gathers_.push_back(start_gather(b));
    }
    {
      CommClock::Scope timed(clock_);
      for (Request& g : gathers_)
        g.wait();
    }
    // A device backend: the update's kernels are part of the step (CPU: nothing to wait for).
    backend_->synchronize();
  }

  // Between two pieces of the update: drives the reductions still in flight, or else the
  // allgathers (one test progresses every collx operation in flight).
  void progress() {
    if (!sync_.all_complete()) {
      sync_.poll();
      return;
    }
    for (Request& g : gathers_) {
      if (!g.valid()) continue;
      CommClock::Scope timed(clock_);
      g.test();
      return;
    }
  }

  // Updates params[first, first + count) in pieces, progressing communication in between.
  void update_range(std::size_t first, std::size_t count, const T* grads, std::size_t state_offset,
                    double lr, std::int64_t step) {
    constexpr std::size_t kPiece = 65536;
    for (std::size_t done = 0; done < count; done += kPiece) {
      const std::size_t n = std::min(kPiece, count - done);
      optimizer_.update(params_.data(), first + done, n, grads + done, state_offset + done, lr,
                        step);
      if (config_.overlap) progress();
    }
  }

  // Allgathers bucket b of the parameters (in place: this rank's block is already where the
  // gathered bucket puts it).
  Request start_gather(const Bucket& b) {
    CommClock::Scope timed(clock_);
    const std::size_t block = b.size() / static_cast<std::size_t>(nranks_);
    T* bucket = params_.data() + b.begin;
    return comm_.iallgather(bucket + static_cast<std::size_t>(rank_) * block, bucket, block, type_,
                            allgather_options_);
  }

  void verify_replicas() {
    const std::uint64_t mine = local_checksum();
    std::vector<std::uint64_t> all(static_cast<std::size_t>(nranks_));
    comm_.allgather(&mine, all.data(), 1, DataType::uint64);
    std::string differing;
    for (int r = 0; r < nranks_; ++r) {
      if (all[static_cast<std::size_t>(r)] != all[0]) {
        differing += ' ';
        differing += std::to_string(r);
      }
    }
    if (!differing.empty()) {
      throw std::runtime_error("after step " + std::to_string(step_ + 1) +
                               " the weights of rank(s)" + differing + " differ from rank 0's");
    }
  }

  CheckpointHeader header() const {
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

  void resume(const std::string& path) {
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
    if (rank_ == 0) {
      backend_->upload(params_.data(), reinterpret_cast<const T*>(saved.parameters.data()), count);
    }
    comm_.broadcast(params_.data(), count, type_, 0, device_options_);
    for (std::size_t a = 0; a < optimizer_.arrays(); ++a) {
      std::vector<T> full(padded_, T(0));
      if (rank_ == 0) {
        std::copy_n(reinterpret_cast<const T*>(saved.states[a].data()), count, full.begin());
      }
      comm_.broadcast(full.data(), count, type_, 0);
      if (!config_.shard) {
        backend_->upload(optimizer_.state(a), full.data(), count);
        continue;
      }
      const auto n = static_cast<std::size_t>(nranks_);
      const auto r = static_cast<std::size_t>(rank_);
      for (const Bucket& b : buckets_) {
        const std::size_t block = b.size() / n;
        backend_->upload(optimizer_.state(a) + b.begin / n, full.data() + b.begin + r * block,
                         block);
      }
    }
    step_ = h.step;
    epoch_ = h.epoch;
    step_in_epoch_ = h.step_in_epoch;
    epoch_loss_sum_ = h.epoch_loss_sum;
    epoch_samples_ = h.epoch_samples;
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
  std::vector<Bucket> buckets_;
  std::size_t padded_;
  std::size_t max_rows_;
  Mlp<T> mlp_;
  Optimizer<T> optimizer_;
  mlp::DeviceBuffer<T> params_;
  mlp::DeviceBuffer<T> grads_;
  mlp::DeviceBuffer<T> shard_grads_;
  mlp::DeviceBuffer<T> inputs_;
  CommClock clock_;
  std::unique_ptr<StreamOrder> order_;  // device backends: buckets ordered with the computation
  GradientSync sync_;
  std::vector<Request> gathers_;  // --shard: this step's parameter allgathers, one per bucket
  Options allgather_options_;
  Options device_options_;  // collectives on parameters and optimizer state
  std::size_t steps_per_epoch_;
  LrSchedule schedule_;
  std::vector<std::int32_t> labels_;
  std::vector<std::uint32_t> indices_;
  std::vector<std::uint32_t> permutation_;
  T mean_ = 0;
  T inv_std_ = 1;
  double loss_local_ = 0;
  double loss_global_ = 0;
  std::int64_t step_ = 0;
  std::int64_t epoch_ = 0;
  std::size_t step_in_epoch_ = 0;
  double epoch_loss_sum_ = 0;
  std::size_t epoch_samples_ = 0;
};

}  // namespace

void validate(const TrainConfig& c, int nranks) {
  auto fail = [](const std::string& message) { throw std::invalid_argument(message); };
  if (c.batch < static_cast<std::size_t>(nranks)) {
    fail("--batch " + std::to_string(c.batch) + " is smaller than the number of ranks (" +
         std::to_string(nranks) + "): the global batch must give every rank at least one sample");
  }
  if (c.accum < 1) fail("--accum must be at least 1");
  if (c.epochs < 1) fail("--epochs must be at least 1");
  for (std::size_t h : c.hidden) {
    if (h == 0) fail("--hidden: a layer needs at least one unit");
  }
  if (const std::string reason = mlp::unavailable_reason(c.device); !reason.empty()) {
    fail("--device " + std::string(mlp::to_string(c.device)) + " is not available: " + reason +
         "; use --device cpu");
  }
  if (c.dtype != DataType::float32 && c.dtype != DataType::float64) {
    fail("--dtype must be float32 or float64");
  }
  if (!(c.lr > 0)) fail("--lr must be positive");
  if (c.lr_reference_batch < 1) fail("--lr-batch must be at least 1");
  if (!(c.bucket_mb > 0) || !(c.first_bucket_mb > 0)) fail("bucket sizes must be positive");
  if (c.warmup_epochs < 0) fail("--warmup-epochs must not be negative");
  if (c.checkpoint_every < 0 || c.stop_after < 0) fail("step counts must not be negative");
  if (c.checkpoint_every > 0 && c.checkpoint_path.empty()) {
    fail("--checkpoint-every needs --checkpoint PATH");
  }
  if (c.eval_rows < 1) fail("--eval-batch must be at least 1");
  // The gradients go through allreduce, or reduce_scatter with --shard.
  const Collective reduction = c.shard ? Collective::reduce_scatter : Collective::allreduce;
  if (c.algorithm != Algorithm::automatic && !implements(reduction, c.algorithm)) {
    std::string offered;
    for (Algorithm a : algorithms_of(reduction)) {
      offered += offered.empty() ? "" : ", ";
      offered += to_string(a);
    }
    fail("--algo " + std::string(to_string(c.algorithm)) + " is not a " +
         std::string(to_string(reduction)) + " algorithm" +
         (c.shard ? " (--shard reduces the gradients with reduce_scatter)" : "") + "; use auto, " +
         offered);
  }
}

std::unique_ptr<TrainerBase> make_trainer(const TrainConfig& config, Communicator& comm,
                                          const DataSplit& data) {
  validate(config, comm.size());
  if (config.dtype == DataType::float64)
    return std::make_unique<Trainer<double>>(config, comm, data);
  return std::make_unique<Trainer<float>>(config, comm, data);
}

FinalReport run_training(const TrainConfig& config, Communicator& comm, const DataSplit& data,
                         TrainObserver& observer, Clock::time_point program_start) {
  auto trainer = make_trainer(config, comm, data);
  trainer->initialize();
  observer.on_start(*trainer);
  FinalReport final_report;
  std::int64_t last_saved = -1;
  bool have_test = false;
  auto save = [&] {
    trainer->save_checkpoint(config.checkpoint_path);
    last_saved = trainer->step();
    observer.on_checkpoint(config.checkpoint_path, trainer->step());
  };
  while (trainer->epoch() < config.epochs && !final_report.stopped_early) {
    // Summed over the epoch's steps: step, comm, forward, backward, update seconds.
    double sums[5] = {0, 0, 0, 0, 0};
    std::size_t samples = 0;
    have_test = false;
    while (trainer->step_in_epoch() < trainer->steps_per_epoch()) {
      const StepResult step = trainer->train_step();
      sums[0] += step.seconds;
      sums[1] += step.comm_seconds;
      sums[2] += step.forward_seconds;
      sums[3] += step.backward_seconds;
      sums[4] += step.update_seconds;
      samples += step.samples;
      observer.on_step(*trainer, step);
      const bool epoch_done = trainer->step_in_epoch() == trainer->steps_per_epoch();
      if (epoch_done) {
        EpochReport report;
        report.epoch = trainer->epoch() + 1;
        report.epochs = config.epochs;
        report.train_loss =
            trainer->epoch_loss_sum() / static_cast<double>(trainer->epoch_samples());
        const auto eval_start = Clock::now();
        report.test = trainer->evaluate(data.test);
        final_report.test = report.test;
        have_test = true;
        report.eval_seconds = seconds_since(eval_start);
        // The slowest rank's time for the throughput; the ranks' mean for the split.
        double slowest = sums[0];
        comm.allreduce(in_place, &slowest, 1, DataType::float64, ReduceOp::max);
        double split[5];
        std::copy(std::begin(sums), std::end(sums), split);
        comm.allreduce(in_place, split, 5, DataType::float64, ReduceOp::avg);
        report.samples = samples;
        report.train_seconds = slowest;
        report.comm_seconds = split[1];
        report.compute_seconds = split[0] - split[1];
        report.forward_seconds = split[2];
        report.backward_seconds = split[3];
        report.update_seconds = split[4];
        report.samples_per_s = slowest > 0 ? static_cast<double>(samples) / slowest : 0;
        report.comm_exposed_fraction = split[0] > 0 ? split[1] / split[0] : 0;
        report.wall_seconds = seconds_since(program_start);
        observer.on_epoch(report);
        trainer->next_epoch();
      }
      if (config.checkpoint_every > 0 && trainer->step() % config.checkpoint_every == 0) save();
      if (config.stop_after > 0 && trainer->step() >= config.stop_after) {
        final_report.stopped_early = trainer->epoch() < config.epochs;
        break;
      }
      if (epoch_done) break;
    }
  }
  if (!config.checkpoint_path.empty() && last_saved != trainer->step()) save();
  if (!have_test) final_report.test = trainer->evaluate(data.test);
  final_report.checksum = trainer->agreed_checksum();
  final_report.steps = trainer->step();
  final_report.wall_seconds = seconds_since(program_start);
  observer.on_final(final_report);
  return final_report;
}

}  // namespace collx::train
