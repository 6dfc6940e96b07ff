// Data parallel: every rank holds the whole model and trains on its share of the global batch.
//
// A step: each rank runs forward and backward on its share (in --accum micro-batches), with the
// loss divided by the global batch; the gradient buckets are summed across ranks while the
// backward pass goes on; then every rank applies the same update (or, --shard, ZeRO-1: updates
// its block of every bucket and the blocks are allgathered), so the weights stay bitwise
// identical on every rank. With --compress, a comm hook reduces the complete gradients instead
// (compression.hpp).
#include <algorithm>
#include <stdexcept>

#include "checksum.hpp"
#include "compression.hpp"
#include "grad_sync.hpp"
#include "trainer_core.hpp"

namespace collx::train {

namespace {

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

// Orders the gradient buckets' collectives (on the backend's side stream) after the backend's
// computation (its stream) through events: event b marks bucket b's inputs complete.
template <class T>
class BackendStreamOrder final : public StreamOrder {
 public:
  explicit BackendStreamOrder(mlp::Backend<T>& backend) : backend_(backend) {}
  void before_launch(std::size_t bucket) override {
    backend_.record_event(bucket, backend_.stream());
    backend_.wait_event(backend_.side_stream(), bucket);
  }

 private:
  mlp::Backend<T>& backend_;
};

// The most samples one micro-batch of one rank can hold.
std::size_t micro_rows(const TrainConfig& config, int nranks) {
  const std::size_t per_rank =
      (config.batch + static_cast<std::size_t>(nranks) - 1) / static_cast<std::size_t>(nranks);
  return std::max<std::size_t>(1, (per_rank + config.accum - 1) / config.accum);
}

Options gradient_options(const TrainConfig& config) {
  Options options;
  options.algorithm = config.algorithm;
  return options;
}

// --shard: the parameters' allgather runs the --algo algorithm where allgather has it (ring).
Options allgather_options(const TrainConfig& config) {
  Options options;
  if (implements(Collective::allgather, config.algorithm)) options.algorithm = config.algorithm;
  return options;
}

template <class T>
class DataParallel final : public TrainerCore<T> {
  using Core = TrainerCore<T>;
  using Core::backend_, Core::comm_, Core::config_, Core::data_, Core::layout_, Core::nranks_,
      Core::rank_, Core::type_;

 public:
  DataParallel(const TrainConfig& config, Communicator& comm, const DataSplit& data)
      : Core(config, comm, data),
        buckets_(make_buckets(layout_.count(), sizeof(T),
                              static_cast<std::size_t>(config.first_bucket_mb * kMiB),
                              static_cast<std::size_t>(config.bucket_mb * kMiB),
                              config.shard ? static_cast<std::size_t>(nranks_) : 1)),
        padded_(buckets_.back().end),
        max_rows_(std::max(micro_rows(config, nranks_), config.eval_rows)),
        mlp_(*backend_, this->shape_, max_rows_),
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
        compression_(make_compression_hook<T>(config, comm, *backend_, this->shape_)),
        allgather_options_(memory_options(allgather_options(config), backend_->stream())),
        device_options_(memory_options(Options{}, backend_->stream())) {}

  StepResult train_step() override {
    const auto start = Clock::now();
    clock_.reset();
    const Range global = this->global_batch();
    const Range mine = rank_slice(global, rank_, nranks_);
    // Each rank's loss is divided by the global batch and the ranks' gradients are summed:
    // the single-process mean, whatever the number of ranks.
    const T scale = T(1) / static_cast<T>(global.size());
    sync_.begin(grads_.data(), shard_grads_.data());
    double loss_local = 0, loss_global = 0;
    Request loss_request;
    StepResult result;
    PhaseTimer phase(clock_);
    for (std::size_t k = 0; k < config_.accum; ++k) {
      const Range part = split_evenly(mine.size(), config_.accum, k);
      this->load_positions({mine.begin + part.begin, mine.begin + part.end}, inputs_.data());
      mlp_.forward(params_.data(), inputs_.data(), part.size());
      loss_local += mlp_.loss(this->labels_.data(), true, scale).loss_sum;
      const bool last = k + 1 == config_.accum;
      if (last) {
        CommClock::Scope timed(clock_);
        loss_request =
            comm_.iallreduce(&loss_local, &loss_global, 1, DataType::float64, ReduceOp::sum);
      }
      result.forward_seconds += phase.lap();
      // Only the last micro-batch communicates: the others just add to the local gradients.
      // A compression hook takes the complete gradients after the backward pass.
      GradientHooks* hooks = last && !compression_ ? &sync_ : nullptr;
      mlp_.backward(params_.data(), inputs_.data(), grads_.data(), k > 0, hooks);
      // A device backend has only enqueued the backward pass: its time is the device's, and
      // the buckets launched meanwhile keep moving (the CPU backend is always ready).
      if (last && hooks) {
        while (!backend_->ready())
          sync_.drive();
      }
      result.backward_seconds += phase.lap();
    }
    const double lr = this->schedule_.at(this->step_);
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
    this->finish_step(result, global, loss_global, lr, start);
    result.comm_seconds = clock_.seconds();
    result.comm_bytes = step_bytes();
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    // Contiguous, disjoint shares: every sample counted once whatever the rank count.
    const Range mine =
        split_evenly(data.rows, static_cast<std::size_t>(nranks_), static_cast<std::size_t>(rank_));
    const mlp::LossSums sums = this->evaluate_passes(mine, [&](const std::uint32_t* rows,
                                                                std::size_t n) {
      this->load_rows(data, rows, n, inputs_.data());
      mlp_.forward(params_.data(), inputs_.data(), n);
      return mlp_.loss(this->labels_.data(), false, T(0));
    });
    return this->agree_evaluation(sums, static_cast<double>(mine.size()));
  }

  std::string layout_description() const override {
    const double first_mib =
        static_cast<double>(buckets_.front().size() * sizeof(T)) / kMiB;
    char buckets[160];
    if (buckets_.size() == 1) {
      std::snprintf(buckets, sizeof buckets, "1 bucket of %.2f MiB", first_mib);
    } else {
      std::snprintf(buckets, sizeof buckets, "%zu buckets (%.2f MiB first, then up to %g MiB)",
                    buckets_.size(), first_mib, config_.bucket_mb);
    }
    const std::string algo(config_.algorithm == Algorithm::automatic
                               ? "auto"
                               : to_string(config_.algorithm));
    std::string text = "layout:    data parallel: every rank holds the whole model (" +
                       std::to_string(layout_.count()) + " parameters) and 1/" +
                       std::to_string(nranks_) + " of each global batch" +
                       (config_.shard ? "; optimizer state sharded 1/" + std::to_string(nranks_) +
                                            " (ZeRO-1)"
                                      : std::string()) +
                       "\n";
    if (compression_) {
      text += "per step:  " + compression_->description() + ", after the backward pass";
    } else {
      text += std::string("per step:  ") + buckets + ", " +
              (config_.shard ? "reduce_scatter + sharded update + allgather"
                             : "allreduce sum") +
              ", " + algo + " algorithm, " +
              (config_.overlap ? "overlapped with the backward pass" : "after the backward pass");
    }
    return text + "; one allreduce of the loss";
  }

  MemoryUse memory() const override {
    MemoryUse m;
    m.parameters = params_.size() * sizeof(T);
    m.gradients = (grads_.size() + shard_grads_.size()) * sizeof(T);
    m.optimizer = optimizer_.arrays() * optimizer_.state_count() * sizeof(T);
    m.activations = (mlp_.activation_elements() + inputs_.size()) * sizeof(T);
    return m;
  }

 protected:
  void export_state(std::vector<T>& params, std::vector<std::vector<T>>* states) override {
    const std::size_t count = layout_.count();
    params.resize(count);
    backend_->download(params.data(), params_.data(), count);
    if (!states) return;
    states->assign(optimizer_.arrays(), std::vector<T>(count));
    for (std::size_t a = 0; a < optimizer_.arrays(); ++a) {
      if (config_.shard) {
        // Each rank holds its block of every bucket: gather the whole array.
        mlp::DeviceBuffer<T> full(*backend_, padded_);
        const auto n = static_cast<std::size_t>(nranks_);
        for (const Bucket& b : buckets_) {
          comm_.allgather(optimizer_.state(a) + b.begin / n, full.data() + b.begin, b.size() / n,
                          type_, device_options_);
        }
        backend_->download((*states)[a].data(), full.data(), count);
      } else {
        backend_->download((*states)[a].data(), optimizer_.state(a), count);
      }
    }
  }

  void import_state(const std::vector<T>& params,
                    const std::vector<std::vector<T>>& states) override {
    backend_->upload(params_.data(), params.data(), layout_.count());
    for (std::size_t a = 0; a < states.size(); ++a) {
      if (!config_.shard) {
        backend_->upload(optimizer_.state(a), states[a].data(), layout_.count());
        continue;
      }
      std::vector<T> full(padded_, T(0));
      std::copy(states[a].begin(), states[a].end(), full.begin());
      const auto n = static_cast<std::size_t>(nranks_);
      const auto r = static_cast<std::size_t>(rank_);
      for (const Bucket& b : buckets_) {
        const std::size_t block = b.size() / n;
        backend_->upload(optimizer_.state(a) + b.begin / n, full.data() + b.begin + r * block,
                         block);
      }
    }
  }

 private:
  // The gradients' collectives of one step, and the loss's allreduce.
  double step_bytes() const {
    const double loss = allreduce_bus_bytes(sizeof(double), nranks_);
    if (compression_) return compression_->last_bytes() + loss;
    const double bytes = static_cast<double>(padded_ * sizeof(T));
    return (config_.shard ? 2 * gather_bus_bytes(bytes, nranks_)
                          : allreduce_bus_bytes(bytes, nranks_)) +
           loss;
  }

  // The optimizer step. With overlap, bucket by bucket as their reductions complete (in the
  // order they were launched), polling the others between pieces of the update; with --shard,
  // each bucket's allgather leaves as soon as this rank's block of it is updated. Without
  // overlap: wait for every reduction, update, then gather. The arithmetic is the same either
  // way (the update is elementwise), so the weights are bitwise the same.
  void update(double lr) {
    const auto n = static_cast<std::size_t>(nranks_);
    const auto r = static_cast<std::size_t>(rank_);
    const std::int64_t step = this->step_ + 1;
    if (compression_) {
      {
        CommClock::Scope timed(clock_);
        compression_->allreduce(grads_.data(), this->step_);
      }
      update_range(0, layout_.count(), grads_.data(), 0, lr, step);
      return;
    }
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
      if (config_.overlap && !compression_) progress();
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

  std::uint64_t local_checksum() const {
    std::vector<T> host(layout_.count());
    backend_->download(host.data(), params_.data(), host.size());
    return checksum_bytes(host.data(), host.size() * sizeof(T));
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
      throw std::runtime_error("after step " + std::to_string(this->step_ + 1) +
                               " the weights of rank(s)" + differing + " differ from rank 0's");
    }
  }

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
  std::unique_ptr<CompressionHook<T>> compression_;
  std::vector<Request> gathers_;  // --shard: this step's parameter allgathers, one per bucket
  Options allgather_options_;
  Options device_options_;  // collectives on parameters and optimizer state
};

}  // namespace

template <class T>
std::unique_ptr<TrainerBase> make_data_parallel(const TrainConfig& config, Communicator& comm,
                                                const DataSplit& data) {
  return std::make_unique<DataParallel<T>>(config, comm, data);
}
template std::unique_ptr<TrainerBase> make_data_parallel<float>(const TrainConfig&, Communicator&,
                                                                const DataSplit&);
template std::unique_ptr<TrainerBase> make_data_parallel<double>(const TrainConfig&,
                                                                 Communicator&, const DataSplit&);

}  // namespace collx::train
