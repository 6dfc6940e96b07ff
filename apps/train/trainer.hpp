// collx-train's training loop and what a parallelism strategy offers it: the configuration,
// TrainerBase (one step, evaluation, checkpoints, whatever the strategy), and run_training.
//
// The strategies live in strategies/, one file each: data_parallel.cpp (every rank holds the
// whole model, gradients allreduced while the backward pass goes on, --shard: ZeRO-1, the
// --compress hooks), fsdp.cpp (ZeRO-3), pipeline.cpp (GPipe, 1F1B), tensor_parallel.cpp
// (Megatron). Each computes what one process computes on the whole global batch, with the loss
// divided by the global batch; only the order of some sums differs.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "collx/collx.hpp"
#include "dataset.hpp"
#include "grad_sync.hpp"
#include "mlp_math.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "sampler.hpp"

namespace collx::train {

enum class Parallel { dp, fsdp, pipeline, tensor };
std::string_view to_string(Parallel parallel);
enum class PipelineSchedule { gpipe, one_f_one_b };
std::string_view to_string(PipelineSchedule schedule);
// Gradient compression on the data-parallel allreduce (comm hooks).
enum class Compression { none, bf16, fp16, powersgd };
std::string_view to_string(Compression compression);

struct TrainConfig {
  Parallel parallel = Parallel::dp;
  // Pipeline and tensor parallel: data-parallel replicas of the model, each on
  // ranks / replicas consecutive ranks (the hybrid layout: 4 ranks, 2 replicas = 2 replicas of a
  // 2-stage pipeline). 1: one replica over all ranks.
  int replicas = 1;
  PipelineSchedule pipeline_schedule = PipelineSchedule::one_f_one_b;
  std::size_t micro_batches = 4;  // pipeline: micro-batches per step in each replica
  // Pipeline: a stage computes its input gradient first and sends it before its weight
  // gradients (false: the backward pass as one piece, the gradient sent at its end). The same
  // arithmetic either way; only when the previous stage can start differs.
  bool pipeline_input_gradient_first = true;
  // Pipeline: how many consecutive layers each stage holds (--pipeline-split 4,3); empty: auto,
  // the cut whose replayed step is the shortest for the stages' GEMM work, this schedule, these
  // micro-batches and this backward mode (strategies/pipeline_partition.hpp).
  std::vector<std::size_t> pipeline_split;
  Compression compression = Compression::none;
  std::size_t powersgd_rank = 8;  // rank 4 lost more accuracy than 0.5 points (docs/TRAINING.md)
  std::int64_t powersgd_warmup = 10;  // steps of plain allreduce before PowerSGD starts
  std::vector<std::size_t> hidden = {512, 256};
  DataType dtype = DataType::float32;
  mlp::Device device = mlp::Device::cpu;
  // The defaults reach about 0.90 test accuracy on Fashion-MNIST in 12 epochs (docs/TRAINING.md).
  int epochs = 12;
  std::size_t batch = 1024;  // global, per optimizer step
  std::size_t accum = 1;     // micro-batches per step on each rank
  OptimizerSettings optimizer{.weight_decay = 0.1};
  double lr = 1.5e-3;                    // at lr_reference_batch (AdamW; collx-train's sgd: 0.05)
  std::size_t lr_reference_batch = 256;  // linear scaling rule: lr * batch / reference
  double warmup_epochs = 1;
  Schedule schedule = Schedule::cosine;
  std::uint64_t seed = 1;
  double bucket_mb = 25;
  double first_bucket_mb = 1;
  bool overlap = true;
  Algorithm algorithm = Algorithm::automatic;
  bool shard = false;
  std::string checkpoint_path;
  std::int64_t checkpoint_every = 0;  // steps; 0: only at the end (and at --stop-after)
  std::string resume_path;
  std::int64_t stop_after = 0;   // stop once this many steps are done (0: never)
  bool verify_replicas = false;  // allgather a weights checksum after every step
  std::size_t eval_rows = 1000;  // samples per evaluation pass
};

// Throws std::invalid_argument with a message for the user when the configuration cannot run.
void validate(const TrainConfig& config, int nranks);

struct StepResult {
  double loss = 0;          // mean over the global batch (the single-process loss)
  double loss_sum = 0;      // summed over the global batch
  std::size_t samples = 0;  // global batch of this step
  double lr = 0;
  double seconds = 0;       // this rank's step time
  double comm_seconds = 0;  // of which inside collx calls (not hidden by compute)
  // The rest, by phase: inputs + forward + loss, backward, optimizer update.
  double forward_seconds = 0;
  double backward_seconds = 0;
  double update_seconds = 0;
  // Bytes this rank moved through collectives and sends in the step, counted as nccl-tests'
  // bus bytes (allreduce 2(p-1)/p x size, allgather and reduce_scatter (p-1)/p x the whole,
  // send 1 x size): what any algorithm must move, whichever collx picks.
  double comm_bytes = 0;
  // Pipeline only. bubble_seconds: the time this stage waited for its input activations, its
  // output gradients and, at the step's end, for the other stages (the loss's allreduce), out
  // of pipeline_seconds: the step without the optimizer update and the replicas' allreduce.
  double bubble_seconds = 0;
  // Of bubble_seconds, the CPU time of the polls in those waits that copied messages
  // (Pipeline::wait_for_message); the rest is waiting for a neighbour's pass.
  double transfer_seconds = 0;
  double pipeline_seconds = 0;
  // The same schedule replayed over the compute times (thread CPU time) that every stage
  // measured for its passes in this step, messages taking no time: the replayed step and this
  // stage's idle time in it (pipeline_schedule.hpp).
  double replayed_seconds = 0;
  double replayed_idle_seconds = 0;
  // Of seconds, the time the rank did not run (wall minus thread CPU time; waits spin): the
  // load of other processes, which a measured bubble includes.
  double not_running_seconds = 0;
  // Pipeline only: where this rank's step went (PipelineParts), for the per-stage breakdown.
  std::array<double, 9> pipeline_parts{};
};

// The indices of StepResult::pipeline_parts: the compute of the stage's passes in thread CPU
// time (the backward's part before its input gradient was sent), then its waits (wall time):
// for input activations, for output gradients, for its earlier sends to be taken, for the other
// stages at the step's end (the loss's allreduce); of the first three waits, the polls that
// copied messages (transfer, in CPU time); and its forward passes (micro-batches).
enum PipelinePart : std::size_t {
  kForwardCpu,
  kBackwardCpu,
  kBackwardInputCpu,
  kWaitInput,
  kWaitGradient,
  kWaitSend,
  kWaitEnd,
  kWaitTransfer,
  kPasses,
};

// Bytes one rank holds for training, by kind.
struct MemoryUse {
  std::size_t parameters = 0;   // persistent parameters (a shard for FSDP)
  std::size_t gradients = 0;    // persistent gradient buffers
  std::size_t optimizer = 0;    // optimizer state
  std::size_t activations = 0;  // activations and their gradients, inputs
  std::size_t working = 0;      // FSDP: gathered layers and their gradients, live one step
  std::size_t model_state() const { return parameters + gradients + optimizer; }
  std::size_t total() const { return model_state() + activations + working; }
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  std::size_t samples = 0;
  std::size_t correct = 0;
};

// Type-independent view of a trainer (float or double), for the loop and the tests.
class TrainerBase {
 public:
  virtual ~TrainerBase() = default;
  // Rank 0 initialises the parameters (or reads config.resume_path) and broadcasts them; every
  // rank checks a checksum of what it holds.
  virtual void initialize() = 0;
  virtual StepResult train_step() = 0;
  virtual EvalResult evaluate(const Dataset& data) = 0;
  // Collective: rank 0 writes the checkpoint (the whole model and optimizer state, unsharded,
  // so that any strategy at any rank count can resume from it).
  virtual void save_checkpoint(const std::string& path) = 0;
  // Collective: the checksum of the whole model, after checking that every rank holds the same
  // (data parallel: every replica; the other strategies: the gathered model).
  virtual std::uint64_t agreed_checksum() = 0;
  // Collective: the whole model's parameters (host copy, as doubles), on every rank.
  virtual std::vector<double> parameters() = 0;

  virtual std::int64_t step() const = 0;
  virtual std::int64_t epoch() const = 0;
  virtual std::size_t step_in_epoch() const = 0;
  virtual std::size_t steps_per_epoch() const = 0;
  virtual std::int64_t total_steps() const = 0;
  // Loss summed over the current epoch's steps so far, and their samples (restored on resume).
  virtual double epoch_loss_sum() const = 0;
  virtual std::size_t epoch_samples() const = 0;
  // Advances to the next epoch (after its last step): new permutation, sums reset.
  virtual void next_epoch() = 0;

  virtual std::size_t parameter_count() const = 0;
  virtual const LrSchedule& schedule() const = 0;
  virtual std::string backend_description() const = 0;
  // For the header: which rank holds what, and the collectives of one step (lines, no newline
  // at the end).
  virtual std::string layout_description() const = 0;
  virtual MemoryUse memory() const = 0;
  // Pipeline: the bubble its schedule leaves for its stages' GEMM work, messages free
  // (pipeline_bubble_formula); 0 for the other strategies.
  virtual double bubble_formula() const { return 0; }
  // Pipeline: the layers of each stage, as --pipeline-split takes them ("4,3"); empty for the
  // other strategies.
  virtual std::string stage_split() const { return {}; }
};

std::unique_ptr<TrainerBase> make_trainer(const TrainConfig& config, Communicator& comm,
                                          const DataSplit& data);

// What the loop reports, for printing (rank 0) and logs.
struct EpochReport {
  std::int64_t epoch = 0;  // 1-based
  int epochs = 0;
  double train_loss = 0;
  EvalResult test;
  std::size_t samples = 0;     // trained on in this run's part of the epoch
  double train_seconds = 0;    // slowest rank's time in steps
  double comm_seconds = 0;     // mean over ranks of the exposed communication
  double compute_seconds = 0;  // mean over ranks of the rest of the step time
  double forward_seconds = 0;  // compute_seconds by phase (means over ranks)
  double backward_seconds = 0;
  double update_seconds = 0;
  double comm_bytes_per_step = 0;  // mean over ranks and steps
  // Pipeline: the ranks' mean waiting time over their mean pipeline time (StepResult), and the
  // same from the replay of the schedule over the measured compute times.
  double bubble_fraction = 0;
  double bubble_transfer_fraction = 0;  // of bubble_fraction, the messages' copies
  double bubble_replayed_fraction = 0;
  double bubble_formula_fraction = 0;  // TrainerBase::bubble_formula()
  double not_running_fraction = 0;     // pipeline: the ranks' mean time not running / step time
  // Pipeline: every rank's StepResult::pipeline_parts summed over the epoch, rank after rank.
  std::vector<double> pipeline_ranks;
  MemoryUse memory_max;             // each kind's largest over the ranks
  double samples_per_s = 0;
  double comm_exposed_fraction = 0;
  double eval_seconds = 0;
  double wall_seconds = 0;  // since the start of the program
};

struct FinalReport {
  EvalResult test;
  std::uint64_t checksum = 0;
  std::int64_t steps = 0;
  bool stopped_early = false;
  double wall_seconds = 0;
};

class TrainObserver {
 public:
  virtual ~TrainObserver() = default;
  virtual void on_start(const TrainerBase&) {}
  virtual void on_step(const TrainerBase&, const StepResult&) {}
  virtual void on_epoch(const EpochReport&) {}
  virtual void on_checkpoint(const std::string&, std::int64_t) {}
  virtual void on_final(const FinalReport&) {}
};

// The whole run: epochs of steps, an evaluation after each epoch, checkpoints; returns the
// final report (the same on every rank).
FinalReport run_training(const TrainConfig& config, Communicator& comm, const DataSplit& data,
                         TrainObserver& observer,
                         std::chrono::steady_clock::time_point program_start);

}  // namespace collx::train
