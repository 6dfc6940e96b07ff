#include "trainer.hpp"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "cli_numbers.hpp"
#include "strategies/pipeline_partition.hpp"
#include "strategies/trainer_core.hpp"

namespace collx::train {

std::string_view to_string(Parallel parallel) {
  switch (parallel) {
    case Parallel::dp:
      return "dp";
    case Parallel::fsdp:
      return "fsdp";
    case Parallel::pipeline:
      return "pipeline";
    case Parallel::tensor:
      return "tensor";
  }
  return "?";
}

std::string_view to_string(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

std::string_view to_string(Compression compression) {
  switch (compression) {
    case Compression::none:
      return "none";
    case Compression::bf16:
      return "bf16";
    case Compression::fp16:
      return "fp16";
    case Compression::powersgd:
      return "powersgd";
  }
  return "?";
}

namespace {

// Limits far beyond what trains on one node, far below sizes whose allocation would fail (or
// silently swap) before the first step: a mistyped flag gets an error, not a hang.
constexpr std::size_t kMaxWidth = std::size_t{1} << 16;
constexpr std::size_t kMaxRows = std::size_t{1} << 24;
constexpr double kMaxBucketMb = 1 << 16;
constexpr std::size_t kMaxMicroBatches = 4096;  // two point-to-point tags per micro-batch

std::string join_algorithms(Collective collective) {
  std::string offered;
  for (Algorithm a : algorithms_of(collective)) {
    offered += offered.empty() ? "" : ", ";
    offered += to_string(a);
  }
  return offered;
}

void validate_numbers(const TrainConfig& c) {
  auto fail = [](const std::string& message) { throw std::invalid_argument(message); };
  if (c.accum < 1) fail("--accum must be at least 1");
  if (c.epochs < 1) fail("--epochs must be at least 1");
  if (c.hidden.empty()) fail("--hidden: the model needs at least one hidden layer");
  for (std::size_t h : c.hidden) {
    if (h == 0) fail("--hidden: a layer needs at least one unit");
    if (h > kMaxWidth) {
      fail("--hidden: a layer of " + std::to_string(h) + " units is wider than the limit of " +
           std::to_string(kMaxWidth));
    }
  }
  if (c.batch > kMaxRows) fail("--batch must be at most " + std::to_string(kMaxRows));
  if (c.eval_rows < 1 || c.eval_rows > kMaxRows) {
    fail("--eval-batch must be between 1 and " + std::to_string(kMaxRows));
  }
  if (!(c.lr > 0) || !std::isfinite(c.lr)) fail("--lr must be a positive number");
  if (c.lr_reference_batch < 1) fail("--lr-batch must be at least 1");
  if (!(c.bucket_mb > 0) || !(c.first_bucket_mb > 0) || !(c.bucket_mb <= kMaxBucketMb) ||
      !(c.first_bucket_mb <= kMaxBucketMb)) {
    fail("bucket sizes (--bucket-mb, --first-bucket-mb) must be positive and at most " +
         std::to_string(static_cast<int>(kMaxBucketMb)) + " MiB");
  }
  if (!(c.warmup_epochs >= 0) || !(c.warmup_epochs <= c.epochs)) {
    fail("--warmup-epochs must be between 0 and --epochs");
  }
  const OptimizerSettings& o = c.optimizer;
  if (!(o.momentum >= 0 && o.momentum < 1)) fail("--momentum must be in [0, 1)");
  if (!(o.beta1 >= 0 && o.beta1 < 1) || !(o.beta2 >= 0 && o.beta2 < 1)) {
    fail("--beta1 and --beta2 must be in [0, 1)");
  }
  if (!(o.eps > 0) || !std::isfinite(o.eps)) fail("--eps must be a positive number");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    fail("--weight-decay must be a number, not negative");
  }
  if (c.checkpoint_every < 0) fail("--checkpoint-every must not be negative");
  if (c.stop_after < 0) fail("--stop-after must not be negative");
  if (c.checkpoint_every > 0 && c.checkpoint_path.empty()) {
    fail("--checkpoint-every needs --checkpoint PATH");
  }
  if (c.micro_batches < 1 || c.micro_batches > kMaxMicroBatches) {
    fail("--micro-batches must be between 1 and " + std::to_string(kMaxMicroBatches));
  }
  if (c.powersgd_rank < 1 || c.powersgd_rank > kMaxWidth) {
    fail("--powersgd-rank must be between 1 and " + std::to_string(kMaxWidth));
  }
  if (c.powersgd_warmup < 0) fail("--powersgd-warmup must not be negative");
}

// What a strategy other than dp cannot take, and what its layout needs.
void validate_strategy(const TrainConfig& c, int nranks) {
  auto fail = [](const std::string& message) { throw std::invalid_argument(message); };
  const std::string name = "--parallel " + std::string(to_string(c.parallel));
  if (c.replicas < 1 || nranks % c.replicas != 0) {
    fail("--replicas " + std::to_string(c.replicas) + " does not divide the " +
         std::to_string(nranks) + " ranks");
  }
  if (!c.pipeline_split.empty() && c.parallel != Parallel::pipeline) {
    fail("--pipeline-split is for --parallel pipeline");
  }
  if (c.parallel == Parallel::dp) {
    if (c.replicas > 1) fail("--replicas is for pipeline and tensor: dp already is data parallel");
    if (c.compression != Compression::none && c.shard) {
      fail("--compress reduces the whole gradients: it does not combine with --shard");
    }
    if (c.compression != Compression::none && c.device != mlp::Device::cpu) {
      fail("--compress runs on host memory: use --device cpu");
    }
    return;
  }
  if (c.device != mlp::Device::cpu) fail(name + " runs on --device cpu only");
  if (c.accum != 1) fail(name + " does not take --accum (pipeline: --micro-batches)");
  if (c.shard) fail("--shard is ZeRO-1 for --parallel dp; " + name + " shards in its own way");
  if (c.compression != Compression::none) fail("--compress is for --parallel dp");
  if (c.algorithm != Algorithm::automatic) fail("--algo chooses dp's gradient algorithm");
  if (c.parallel == Parallel::fsdp && c.replicas > 1) {
    fail("--replicas is for pipeline and tensor: fsdp already is data parallel");
  }
  const std::size_t group = static_cast<std::size_t>(nranks / c.replicas);
  const std::size_t layers = c.hidden.size() + 1;
  if (c.parallel == Parallel::pipeline && group > layers) {
    fail(name + ": " + std::to_string(group) + " stages but the model has only " +
         std::to_string(layers) + " layers (add --hidden layers, or use --replicas)");
  }
  if (c.parallel == Parallel::pipeline && !c.pipeline_split.empty()) {
    stages_from_counts(c.pipeline_split, layers, group);  // throws what is wrong
  }
  if (c.parallel == Parallel::tensor) {
    for (std::size_t l = 0; l + 1 < layers; l += 2) {
      if (c.hidden[l] < group) {
        fail(name + ": hidden layer " + std::to_string(l + 1) + " has " +
             std::to_string(c.hidden[l]) + " units, fewer than the " + std::to_string(group) +
             " ranks that split it");
      }
    }
  }
}

}  // namespace

void validate(const TrainConfig& c, int nranks) {
  auto fail = [](const std::string& message) { throw std::invalid_argument(message); };
  validate_numbers(c);
  // dp and fsdp split each batch over every rank, pipeline and tensor over the replicas.
  const bool per_rank = c.parallel == Parallel::dp || c.parallel == Parallel::fsdp;
  const int parts = per_rank ? nranks : std::max(c.replicas, 1);
  if (c.batch < static_cast<std::size_t>(parts)) {
    fail("--batch " + std::to_string(c.batch) + " is smaller than the number of " +
         (per_rank ? "ranks (" : "replicas (") + std::to_string(parts) + "): the global batch " +
         "must give every " + (per_rank ? "rank" : "replica") + " at least one sample");
  }
  if (const std::string reason = mlp::unavailable_reason(c.device); !reason.empty()) {
    fail("--device " + std::string(mlp::to_string(c.device)) + " is not available: " + reason +
         "; use --device cpu");
  }
  if (c.dtype != DataType::float32 && c.dtype != DataType::float64) {
    fail("--dtype must be float32 or float64");
  }
  validate_strategy(c, nranks);
  // The gradients go through allreduce, or reduce_scatter with --shard.
  const Collective reduction = c.shard ? Collective::reduce_scatter : Collective::allreduce;
  if (c.algorithm != Algorithm::automatic && !implements(reduction, c.algorithm)) {
    fail("--algo " + std::string(to_string(c.algorithm)) + " is not a " +
         std::string(to_string(reduction)) + " algorithm" +
         (c.shard ? " (--shard reduces the gradients with reduce_scatter)" : "") + "; use auto, " +
         join_algorithms(reduction));
  }
}

namespace {

template <class T>
std::unique_ptr<TrainerBase> make_strategy(const TrainConfig& config, Communicator& comm,
                                           const DataSplit& data) {
  switch (config.parallel) {
    case Parallel::dp:
      return make_data_parallel<T>(config, comm, data);
    case Parallel::fsdp:
      return make_fsdp<T>(config, comm, data);
    case Parallel::pipeline:
      return make_pipeline<T>(config, comm, data);
    case Parallel::tensor:
      return make_tensor_parallel<T>(config, comm, data);
  }
  return nullptr;
}

// Seconds of an epoch's steps summed, by part (StepResult's fields).
struct StepTimes {
  double step = 0;
  double comm = 0;
  double forward = 0;
  double backward = 0;
  double update = 0;
  double bytes = 0;
  double bubble = 0;
  double pipeline = 0;
  double replayed = 0;
  double replayed_idle = 0;
  double not_running = 0;
  double transfer = 0;
  static constexpr std::size_t kFields = 12;

  void add(const StepResult& s) {
    step += s.seconds;
    comm += s.comm_seconds;
    forward += s.forward_seconds;
    backward += s.backward_seconds;
    update += s.update_seconds;
    bytes += s.comm_bytes;
    bubble += s.bubble_seconds;
    pipeline += s.pipeline_seconds;
    replayed += s.replayed_seconds;
    replayed_idle += s.replayed_idle_seconds;
    not_running += s.not_running_seconds;
    transfer += s.transfer_seconds;
  }
  // The mean over the ranks (collective).
  StepTimes averaged(Communicator& comm) const {
    StepTimes mean = *this;
    comm.allreduce(in_place, &mean.step, kFields, DataType::float64, ReduceOp::avg);
    return mean;
  }
};
static_assert(sizeof(StepTimes) == StepTimes::kFields * sizeof(double));

MemoryUse largest_memory(const TrainerBase& trainer, Communicator& comm) {
  const MemoryUse m = trainer.memory();
  std::uint64_t kinds[5] = {m.parameters, m.gradients, m.optimizer, m.activations, m.working};
  comm.allreduce(in_place, kinds, 5, DataType::uint64, ReduceOp::max);
  return {kinds[0], kinds[1], kinds[2], kinds[3], kinds[4]};
}

// Whether a rank's model state and the activations of its largest pass (training or evaluation)
// fit in its node's memory, with the node's other ranks (collective: every rank gets the same
// answer); throws std::invalid_argument naming the flag where they do not. Without it, widths
// within --hidden's limit but many of them (65536,65536,65536: 8.6e9 parameters) end in
// std::bad_alloc, or in the kernel killing a rank, before the first step.
void check_memory(const TrainConfig& c, Communicator& comm, const DataSplit& data) {
  const ModelShape shape = model_shape(c, data);
  double parameters = 0;
  double widths = 0;
  for (std::size_t l = 0; l < shape.sizes.size(); ++l) {
    widths += static_cast<double>(shape.sizes[l]);
    if (l > 0) {
      parameters += (static_cast<double>(shape.sizes[l - 1]) + 1) * static_cast<double>(shape.sizes[l]);
    }
  }
  const double element = c.dtype == DataType::float64 ? 8 : 4;
  const int nranks = comm.size();
  // The ranks one model is split over: every rank holds the whole of it in dp.
  const double split = c.parallel == Parallel::fsdp ? nranks
                       : c.parallel == Parallel::dp ? 1
                                                    : static_cast<double>(nranks / std::max(c.replicas, 1));
  // Parameters, gradients, the optimizer's arrays.
  const double model =
      parameters * element * (2 + static_cast<double>(state_arrays(c.optimizer.kind))) / split;
  // Activations and their gradients for the rows of the larger pass.
  const double parts = c.parallel == Parallel::dp || c.parallel == Parallel::fsdp ? nranks : c.replicas;
  const double rows = std::max(static_cast<double>(c.batch) / std::max(parts, 1.0),
                               static_cast<double>(c.eval_rows));
  const double activations = 2 * rows * widths * element;

  MPI_Comm node;
  MPI_Comm_split_type(comm.mpi_comm(), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local_ranks = 1;
  MPI_Comm_size(node, &local_ranks);
  MPI_Comm_free(&node);
  const double memory = static_cast<double>(collx::apps::node_memory_bytes());
  const double need = (model + activations) * local_ranks;
  double ratio = memory > 0 ? need / memory : 0;
  comm.allreduce(in_place, &ratio, 1, DataType::float64, ReduceOp::max);
  if (ratio <= 1) return;
  using collx::apps::describe_bytes;
  std::string hidden;
  for (std::size_t h : c.hidden)
    hidden += (hidden.empty() ? "" : ",") + std::to_string(h);
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", parameters);
  std::string why =
      model >= activations
          ? "--hidden " + hidden + ": the model " + shape.to_string() + " has " + count +
                " parameters: its parameters, gradients and " +
                std::string(to_string(c.optimizer.kind)) + " state need about " +
                describe_bytes(model) + " per rank"
          : "--batch " + std::to_string(c.batch) + ", --eval-batch " +
                std::to_string(c.eval_rows) + ": the activations of " +
                std::to_string(static_cast<std::size_t>(rows)) + " rows through the model " +
                shape.to_string() + " need about " + describe_bytes(activations) + " per rank";
  why += "; " + describe_bytes(need) + " in all for the " + std::to_string(local_ranks) +
         " rank" + (local_ranks == 1 ? "" : "s") + " on a node: more than its memory";
  if (memory > 0) why += " (" + describe_bytes(memory) + ")";
  throw std::invalid_argument(why);
}

}  // namespace

std::unique_ptr<TrainerBase> make_trainer(const TrainConfig& requested, Communicator& comm,
                                          const DataSplit& data) {
  validate(requested, comm.size());
  if (requested.batch > data.train.rows) {
    throw std::invalid_argument("--batch " + std::to_string(requested.batch) +
                                " is larger than the training set (" +
                                std::to_string(data.train.rows) +
                                " samples): lower --batch, or train on more samples (--train-limit, --synthetic-train)");
  }
  // An evaluation pass needs no more rows than the test set has (its buffers are that large).
  TrainConfig config = requested;
  config.eval_rows = std::min(config.eval_rows, std::max<std::size_t>(data.test.rows, 1));
  check_memory(config, comm, data);
  if (config.dtype == DataType::float64) return make_strategy<double>(config, comm, data);
  return make_strategy<float>(config, comm, data);
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
    StepTimes times;
    std::array<double, std::tuple_size_v<decltype(StepResult::pipeline_parts)>> parts{};
    std::size_t samples = 0;
    std::size_t steps = 0;
    have_test = false;
    while (trainer->step_in_epoch() < trainer->steps_per_epoch()) {
      const StepResult step = trainer->train_step();
      times.add(step);
      for (std::size_t k = 0; k < parts.size(); ++k)
        parts[k] += step.pipeline_parts[k];
      samples += step.samples;
      ++steps;
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
        double slowest = times.step;
        comm.allreduce(in_place, &slowest, 1, DataType::float64, ReduceOp::max);
        const StepTimes mean = times.averaged(comm);
        report.samples = samples;
        report.train_seconds = slowest;
        report.comm_seconds = mean.comm;
        report.compute_seconds = mean.step - mean.comm;
        report.forward_seconds = mean.forward;
        report.backward_seconds = mean.backward;
        report.update_seconds = mean.update;
        report.memory_max = largest_memory(*trainer, comm);
        report.comm_bytes_per_step = steps ? mean.bytes / static_cast<double>(steps) : 0;
        report.bubble_fraction = mean.pipeline > 0 ? mean.bubble / mean.pipeline : 0;
        report.bubble_transfer_fraction = mean.pipeline > 0 ? mean.transfer / mean.pipeline : 0;
        report.bubble_replayed_fraction =
            mean.replayed > 0 ? mean.replayed_idle / mean.replayed : 0;
        report.not_running_fraction = mean.step > 0 ? mean.not_running / mean.step : 0;
        report.bubble_formula_fraction = trainer->bubble_formula();
        if (config.parallel == Parallel::pipeline) {
          report.pipeline_ranks.resize(parts.size() * static_cast<std::size_t>(comm.size()));
          comm.allgather(parts.data(), report.pipeline_ranks.data(), parts.size(),
                         DataType::float64);
        }
        report.samples_per_s = slowest > 0 ? static_cast<double>(samples) / slowest : 0;
        report.comm_exposed_fraction = mean.step > 0 ? mean.comm / mean.step : 0;
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
