// Every parallelism strategy on real MPI ranks against one process: after K steps the weights
// (float64) equal the single-process data-parallel run's within 1e-12, each step's loss too;
// pipeline schedules and micro-batch counts; memory per rank; checkpoints that re-shard from
// one strategy and rank count to another. TrainStrategy at np = 1, 2, 3, 4.
//
// Why 1e-12 holds: every strategy computes the same sums as the single process, only grouped
// differently (the batch split over ranks or micro-batches, a row-parallel layer's dot products
// split over ranks, then added by an allreduce). Each regrouping changes a sum by a few units in
// the last place of float64 (2^-52 = 2.2e-16 relative per addition; a dot product of up to 784
// terms drifts by well under 1e-13 relative), and AdamW's update m / (sqrt(v) + eps) depends on
// the gradient's scale, not its last bits, so after K = 6 steps at lr 0.01 the weights differ by
// about 1e-15 relative: 1e-12 leaves three orders of magnitude of margin, and a real error
// (a wrong block, a missing sum, a stale layer) is larger than 1e-6.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "compression.hpp"
#include "mpi_test_util.hpp"
#include "train_test_support.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;
using namespace collx::train::testing;
using collx::testing::all_ranks;

// Four layers (784-24-16-12-10): a pipeline of up to 4 stages, two tensor-parallel pairs.
TrainConfig strategy_config(Parallel parallel) {
  TrainConfig c = small_config(collx::DataType::float64);
  c.hidden = {24, 16, 12};
  c.parallel = parallel;
  return c;
}

constexpr int kSteps = 6;

// The largest |a - b| over the largest |b|.
double max_relative_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

TrainRun single_process(const TrainConfig& config, int steps) {
  TrainConfig reference = config;
  reference.parallel = Parallel::dp;
  reference.replicas = 1;
  collx::Communicator self(MPI_COMM_SELF);
  return train_steps(reference, self, steps);
}

void expect_equal_runs(const TrainRun& got, const TrainRun& want, const std::string& what) {
  ASSERT_EQ(got.params.size(), want.params.size()) << what;
  EXPECT_LE(max_relative_difference(got.params, want.params), 1e-12) << what;
  ASSERT_EQ(got.losses.size(), want.losses.size()) << what;
  for (std::size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-12 * want.losses[s]) << what << " step " << s;
  EXPECT_EQ(got.test.samples, 101u) << what << ": every test sample once";
  EXPECT_EQ(got.test.correct, want.test.correct) << what;
  EXPECT_NEAR(got.test.loss, want.test.loss, 1e-12 * want.test.loss) << what;
}

// The strategies (and layouts) this rank count can run.
std::vector<std::pair<std::string, TrainConfig>> strategies() {
  std::vector<std::pair<std::string, TrainConfig>> all;
  all.emplace_back("dp", strategy_config(Parallel::dp));
  TrainConfig zero1 = strategy_config(Parallel::dp);
  zero1.shard = true;
  all.emplace_back("dp --shard", zero1);
  all.emplace_back("fsdp", strategy_config(Parallel::fsdp));
  for (auto schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    TrainConfig pipe = strategy_config(Parallel::pipeline);
    pipe.pipeline_schedule = schedule;
    pipe.micro_batches = 3;
    all.emplace_back("pipeline " + std::string(to_string(schedule)), pipe);
    pipe.pipeline_input_gradient_first = false;
    all.emplace_back("pipeline " + std::string(to_string(schedule)) + " --pipeline-backward whole",
                     pipe);
  }
  all.emplace_back("tensor", strategy_config(Parallel::tensor));
  if (world_size() % 2 == 0 && world_size() > 2) {
    for (Parallel parallel : {Parallel::pipeline, Parallel::tensor}) {
      TrainConfig hybrid = strategy_config(parallel);
      hybrid.replicas = 2;
      all.emplace_back("2 replicas x " + std::string(to_string(parallel)), hybrid);
    }
  }
  return all;
}

class TrainStrategy : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
};

TEST_F(TrainStrategy, EveryStrategyEqualsOneProcessAfterSixSteps) {
  for (const auto& [name, config] : strategies()) {
    const TrainRun reference = single_process(config, kSteps);
    const TrainRun distributed = train_steps(config, comm, kSteps);
    expect_equal_runs(distributed, reference, name + " at np " + std::to_string(world_size()));
  }
}

TEST_F(TrainStrategy, AdamwAndSgdAcrossAnEpochBoundary) {
  // 12 steps: epoch 1's 10, then 2 of epoch 2 (a new permutation); SGD too.
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    for (Parallel parallel : {Parallel::fsdp, Parallel::pipeline, Parallel::tensor}) {
      TrainConfig config = strategy_config(parallel);
      config.optimizer.kind = kind;
      const TrainRun reference = single_process(config, 12);
      const TrainRun distributed = train_steps(config, comm, 12);
      expect_equal_runs(distributed, reference,
                        std::string(to_string(parallel)) + " " + std::string(to_string(kind)));
    }
  }
}

TEST_F(TrainStrategy, PipelineSchedulesGiveTheSameBitsAndMicroBatchesOnlyRegroupSums) {
  TrainConfig config = strategy_config(Parallel::pipeline);
  config.micro_batches = 4;
  config.pipeline_schedule = PipelineSchedule::gpipe;
  const TrainRun gpipe = train_steps(config, comm, kSteps);
  config.pipeline_schedule = PipelineSchedule::one_f_one_b;
  const TrainRun one_f_one_b = train_steps(config, comm, kSteps);
  // Both run the backward passes in micro-batch order: the same sums in the same order.
  EXPECT_TRUE(bitwise_equal(gpipe.params, one_f_one_b.params));
  EXPECT_EQ(gpipe.losses, one_f_one_b.losses);
  // Sending the input gradient before the weight gradients reorders GEMMs in time only.
  config.pipeline_input_gradient_first = false;
  const TrainRun whole = train_steps(config, comm, kSteps);
  EXPECT_TRUE(bitwise_equal(whole.params, one_f_one_b.params));
  EXPECT_EQ(whole.losses, one_f_one_b.losses);
  config.pipeline_input_gradient_first = true;
  for (std::size_t m : {1u, 2u, 8u}) {
    config.micro_batches = m;
    const TrainRun other = train_steps(config, comm, kSteps);
    EXPECT_LE(max_relative_difference(other.params, gpipe.params), 1e-12) << m;
  }
}

// Every cut of the 4 layers into this rank count's stages (--pipeline-split), both schedules:
// the weights of one process, whichever stage holds which layers.
TEST_F(TrainStrategy, EveryPipelineSplitEqualsOneProcess) {
  const std::size_t stages = static_cast<std::size_t>(world_size());
  TrainConfig config = strategy_config(Parallel::pipeline);
  config.micro_batches = 3;
  const TrainRun reference = single_process(config, kSteps);
  std::vector<std::vector<std::size_t>> splits;
  auto compose = [&](auto&& self, std::vector<std::size_t> counts, std::size_t left) -> void {
    if (counts.size() + 1 == stages) {
      counts.push_back(left);
      splits.push_back(counts);
      return;
    }
    const std::size_t later = stages - counts.size() - 1;  // stages after this one
    for (std::size_t k = 1; k + later <= left; ++k) {
      std::vector<std::size_t> next = counts;
      next.push_back(k);
      self(self, next, left - k);
    }
  };
  compose(compose, {}, 4);
  ASSERT_FALSE(splits.empty());
  for (const auto& split : splits) {
    for (auto schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
      config.pipeline_split = split;
      config.pipeline_schedule = schedule;
      std::string name = "--pipeline-split ";
      for (std::size_t k = 0; k < split.size(); ++k)
        name += std::string(k ? "," : "") + std::to_string(split[k]);
      expect_equal_runs(train_steps(config, comm, kSteps), reference,
                        name + " " + std::string(to_string(schedule)));
      // What the header and --log-json's pipeline_split report.
      EXPECT_EQ("--pipeline-split " + make_trainer(config, comm, small_data())->stage_split(),
                name);
    }
  }
}

TEST_F(TrainStrategy, FsdpHoldsAboutOneOverPOfDataParallelsModelState) {
  const int p = world_size();
  auto dp = make_trainer(strategy_config(Parallel::dp), comm, small_data());
  auto fsdp = make_trainer(strategy_config(Parallel::fsdp), comm, small_data());
  const MemoryUse full = dp->memory();
  const MemoryUse sharded = fsdp->memory();
  // Each layer's blocks are padded to a multiple of p: at most p - 1 elements per layer and
  // array (parameters, gradients, two AdamW moments).
  const std::size_t padding = 4 * 4 * static_cast<std::size_t>(p - 1) * sizeof(double);
  EXPECT_GE(sharded.model_state() * static_cast<std::size_t>(p), full.model_state());
  EXPECT_LE(sharded.model_state() * static_cast<std::size_t>(p),
            full.model_state() + padding * static_cast<std::size_t>(p));
  // ... and while it computes, at most two layers whole (parameters and gradients).
  EXPECT_GT(sharded.working, 0u);
  EXPECT_EQ(full.working, 0u);
}

std::string scratch_path(const std::string& name) {
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() /
          ("collx_strategy_" + std::to_string(pid) + "_" + name))
      .string();
}

class Quiet final : public TrainObserver {};

// Keeps every epoch's report.
class Epochs final : public TrainObserver {
 public:
  void on_epoch(const EpochReport& report) override { reports.push_back(report); }
  std::vector<EpochReport> reports;
};

// The pipeline's per-rank breakdown (--log-json's pipeline_ranks): every rank's parts, its
// passes, its waits; the part of a backward pass before its input gradient is sent is the whole
// pass on the first stage (it sends none) and no more than the pass on the others.
TEST_F(TrainStrategy, PipelineReportsEachRanksComputeAndWaits) {
  TrainConfig config = strategy_config(Parallel::pipeline);
  config.epochs = 1;
  config.micro_batches = 3;
  Epochs epochs;
  const auto start = std::chrono::steady_clock::now();
  const FinalReport final_report = run_training(config, comm, small_data(), epochs, start);
  ASSERT_EQ(epochs.reports.size(), 1u);
  const std::vector<double>& ranks = epochs.reports[0].pipeline_ranks;
  constexpr std::size_t kParts = kPasses + 1;
  ASSERT_EQ(ranks.size(), kParts * static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) {
    const double* p = &ranks[kParts * static_cast<std::size_t>(r)];
    EXPECT_EQ(p[kPasses], 3.0 * static_cast<double>(final_report.steps)) << r;
    EXPECT_GT(p[kForwardCpu], 0) << r;
    EXPECT_GT(p[kBackwardCpu], 0) << r;
    if (r == 0) {
      EXPECT_EQ(p[kBackwardInputCpu], p[kBackwardCpu]);
      EXPECT_EQ(p[kWaitInput], 0);
    } else {
      EXPECT_LE(p[kBackwardInputCpu], p[kBackwardCpu]) << r;
    }
    if (r + 1 == world_size()) {
      EXPECT_EQ(p[kWaitGradient], 0) << r;
    }
    for (std::size_t k = kWaitInput; k <= kWaitEnd; ++k)
      EXPECT_GE(p[k], 0) << r << " " << k;
    // The messages' copies are part of the waits.
    EXPECT_LE(p[kWaitTransfer], p[kWaitInput] + p[kWaitGradient] + p[kWaitSend]) << r;
  }
  EXPECT_LE(epochs.reports[0].bubble_transfer_fraction, epochs.reports[0].bubble_fraction);
}

// Of a stage's calls into the MPI library, the waits' polls and the posts of its sends and
// receives, those that copied a message count as transfer: the two stages on either side of a
// 16 -> 8192 layer's output send each other 2 MiB messages (32 rows of float64 per
// micro-batch), 15 each way. The MPI library copies each in one of those calls (a step's
// requests all complete in its waits), and a copy of 2 MiB is well over kCopyPoll's 16 us of
// CPU time even at 50 GB/s (42 us); CPU time, so a loaded machine does not shorten it. Open
// MPI 4.1's shared memory reads a message in one call (CMA): 130-540 us each on the 2-core VM,
// up to half of them in a post. So both stages count some on every run, with no retry.
// No call counts where there is one stage (no messages), and the transfer is part of the waits
// and of the bubble.
TEST_F(TrainStrategy, PipelineCountsTheMessagesCopiesAsTransfer) {
  TrainConfig config = strategy_config(Parallel::pipeline);
  config.hidden = {16, 8192, 16};
  config.epochs = 1;
  config.batch = 96;  // 5 steps over 480 samples
  config.micro_batches = 3;
  // The stage that ends with the 8192-wide layer (layer 1): `wide`.
  const std::vector<std::vector<std::size_t>> splits = {{4}, {2, 2}, {2, 1, 1}, {1, 1, 1, 1}};
  const auto p = static_cast<std::size_t>(world_size());
  ASSERT_LE(p, splits.size());
  config.pipeline_split = splits[p - 1];
  const int wide = p == 4 ? 1 : 0;
  Epochs epochs;
  run_training(config, comm, small_data(), epochs, std::chrono::steady_clock::now());
  // Every rank has the same reports (every rank's parts gathered): all return here, or none.
  ASSERT_EQ(epochs.reports.size(), 1u);
  const EpochReport& report = epochs.reports[0];
  constexpr std::size_t kParts = kPasses + 1;
  ASSERT_EQ(report.pipeline_ranks.size(), kParts * p);
  for (int r = 0; r < world_size(); ++r) {
    const double* part = &report.pipeline_ranks[kParts * static_cast<std::size_t>(r)];
    EXPECT_EQ(part[kPasses], 15.0) << r;
    EXPECT_LE(part[kWaitTransfer], part[kWaitInput] + part[kWaitGradient] + part[kWaitSend]) << r;
    if (p > 1 && (r == wide || r == wide + 1)) {
      EXPECT_GT(part[kWaitTransfer], 0) << r;
    } else if (p == 1) {
      EXPECT_EQ(part[kWaitTransfer], 0);
    }
  }
  EXPECT_LE(report.bubble_transfer_fraction, report.bubble_fraction);
  if (p > 1) {
    EXPECT_GT(report.bubble_transfer_fraction, 0);
  }
}

// Each strategy writes a checkpoint after 4 steps; it resumes in the same strategy at this
// rank count (bitwise the uninterrupted run), in one process (data parallel: the sharded
// parts re-sharded into one model), and a single process's checkpoint resumes in the strategy.
TEST_F(TrainStrategy, CheckpointsResumeInEveryStrategyAndRankCount) {
  const auto start = std::chrono::steady_clock::now();
  Quiet quiet;
  collx::Communicator self(MPI_COMM_SELF);
  for (const auto& [name, base] : strategies()) {
    TrainConfig config = base;
    config.epochs = 1;
    const FinalReport uninterrupted = run_training(config, comm, small_data(), quiet, start);

    const std::string path = scratch_path("resume.ckpt");
    TrainConfig first = config;
    first.checkpoint_path = path;
    first.stop_after = 4;
    run_training(first, comm, small_data(), quiet, start);

    TrainConfig same = config;
    same.resume_path = path;
    const FinalReport resumed = run_training(same, comm, small_data(), quiet, start);
    EXPECT_EQ(resumed.steps, uninterrupted.steps) << name;
    EXPECT_EQ(resumed.checksum, uninterrupted.checksum) << name << ": resumed in place";

    // One process continues the distributed run's checkpoint.
    TrainConfig single = config;
    single.parallel = Parallel::dp;
    single.replicas = 1;
    single.shard = false;
    single.resume_path = path;
    const FinalReport single_resumed = run_training(single, self, small_data(), quiet, start);
    EXPECT_EQ(single_resumed.steps, uninterrupted.steps) << name;
    EXPECT_NEAR(single_resumed.test.loss, uninterrupted.test.loss, 1e-12) << name;

    // The strategy continues one process's checkpoint.
    MPI_Barrier(MPI_COMM_WORLD);
    TrainConfig single_first = single;
    single_first.resume_path.clear();
    single_first.checkpoint_path = path + ".single";
    single_first.stop_after = 4;
    if (world_rank() == 0) run_training(single_first, self, small_data(), quiet, start);
    MPI_Barrier(MPI_COMM_WORLD);
    TrainConfig from_single = config;
    from_single.resume_path = path + ".single";
    const FinalReport continued = run_training(from_single, comm, small_data(), quiet, start);
    EXPECT_EQ(continued.steps, uninterrupted.steps) << name;
    EXPECT_NEAR(continued.test.loss, uninterrupted.test.loss, 1e-12) << name;
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) {
      std::filesystem::remove(path);
      std::filesystem::remove(path + ".single");
    }
  }
}

TEST_F(TrainStrategy, LayoutsThatCannotRunAreRefusedOnEveryRank) {
  TrainConfig too_many_stages = strategy_config(Parallel::pipeline);
  too_many_stages.hidden = {8};  // 2 layers
  if (world_size() > 2) {
    EXPECT_THROW(make_trainer(too_many_stages, comm, small_data()), std::invalid_argument);
  }
  TrainConfig bad_split = strategy_config(Parallel::pipeline);
  bad_split.pipeline_split = std::vector<std::size_t>(static_cast<std::size_t>(world_size()), 1);
  bad_split.pipeline_split.push_back(1);  // one stage too many
  EXPECT_THROW(make_trainer(bad_split, comm, small_data()), std::invalid_argument);
  TrainConfig split_without_pipeline = strategy_config(Parallel::tensor);
  split_without_pipeline.pipeline_split = {4};
  EXPECT_THROW(make_trainer(split_without_pipeline, comm, small_data()), std::invalid_argument);
  TrainConfig bad_replicas = strategy_config(Parallel::tensor);
  bad_replicas.replicas = world_size() + 1;
  EXPECT_THROW(make_trainer(bad_replicas, comm, small_data()), std::invalid_argument);
  TrainConfig compressed_fsdp = strategy_config(Parallel::fsdp);
  compressed_fsdp.compression = Compression::bf16;
  EXPECT_THROW(make_trainer(compressed_fsdp, comm, small_data()), std::invalid_argument);
  EXPECT_TRUE(all_ranks(true));
}

// ---- the compression hooks' own contracts ----

namespace hooks {

using collx::bfloat16_bits_to_float;
using collx::float_to_bfloat16_bits;
using collx::float_to_half_bits;
using collx::half_bits_to_float;

// Gradients that differ per rank, with magnitudes over many binades.
std::vector<double> rank_gradients(std::size_t count, int rank, std::uint64_t salt) {
  std::vector<double> g(count);
  std::uint64_t x = 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(rank) + 1) + salt;
  for (std::size_t i = 0; i < count; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const double unit = static_cast<double>(x >> 11) * 0x1p-53 - 0.5;
    g[i] = unit * std::ldexp(1.0, static_cast<int>(i % 17) - 12);
  }
  return g;
}

TEST_F(TrainStrategy, SixteenBitHooksAllreduceTheRoundedGradients) {
  const int p = world_size();
  const std::size_t count = 1000;
  for (collx::DataType half : {collx::DataType::bfloat16, collx::DataType::float16}) {
    const bool bf16 = half == collx::DataType::bfloat16;
    auto round = [&](double v) {
      const auto f = static_cast<float>(v);
      return bf16 ? bfloat16_bits_to_float(float_to_bfloat16_bits(f))
                  : half_bits_to_float(float_to_half_bits(f));
    };
    std::vector<double> grads = rank_gradients(count, world_rank(), 1);
    // Every rank's rounded gradients, to sum here exactly.
    std::vector<double> rounded(count), all(count * static_cast<std::size_t>(p));
    for (std::size_t i = 0; i < count; ++i)
      rounded[i] = round(grads[i]);
    MPI_Allgather(rounded.data(), static_cast<int>(count), MPI_DOUBLE, all.data(),
                  static_cast<int>(count), MPI_DOUBLE, MPI_COMM_WORLD);
    HalfPrecisionHook<double> hook(comm, half, count);
    hook.allreduce(grads.data(), 0);
    // collx sums 16-bit values in float32 and rounds each partial sum once: exact for one
    // rank, one rounding of the exact sum for two, at most p - 1 roundings beyond.
    const double unit = bf16 ? 0x1p-8 : 0x1p-11;
    for (std::size_t i = 0; i < count; ++i) {
      double exact = 0, magnitude = 0;
      for (int r = 0; r < p; ++r) {
        exact += all[static_cast<std::size_t>(r) * count + i];
        magnitude += std::abs(all[static_cast<std::size_t>(r) * count + i]);
      }
      if (p <= 2) {
        ASSERT_EQ(grads[i], round(exact)) << i;
      } else {
        ASSERT_LE(std::abs(grads[i] - exact), (p - 1) * unit * magnitude) << i;
      }
    }
    EXPECT_TRUE(collx::testing::identical_on_all_ranks(grads.data(), count * sizeof(double)));
    EXPECT_DOUBLE_EQ(hook.last_bytes(), p > 1 ? 2.0 * (p - 1) / p * 2.0 * count : 0.0);
  }
}

TEST_F(TrainStrategy, PowerSgdErrorFeedbackCarriesTheResidual) {
  const ModelShape shape{{30, 20, 10}};
  const ParameterLayout layout(shape);
  const std::size_t n = layout.count();
  auto backend = collx::mlp::make_backend<double>(collx::mlp::Device::cpu);
  const std::int64_t warmup = 2;
  PowerSgdHook<double> hook(comm, *backend, shape, 3, warmup, 7);
  for (std::int64_t step = 0; step < 6; ++step) {
    std::vector<double> grads = rank_gradients(n, world_rank(), 100 + step);
    // What the ranks hand in this step, gradients plus the error kept from the last: summed.
    std::vector<double> handed_in(n);
    for (std::size_t i = 0; i < n; ++i)
      handed_in[i] = grads[i] + hook.error_feedback()[i];
    std::vector<double> in_sum(n);
    MPI_Allreduce(handed_in.data(), in_sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    hook.allreduce(grads.data(), step);
    ASSERT_TRUE(collx::testing::identical_on_all_ranks(grads.data(), n * sizeof(double)));
    std::vector<double> error_sum(n);
    MPI_Allreduce(hook.error_feedback().data(), error_sum.data(), static_cast<int>(n), MPI_DOUBLE,
                  MPI_SUM, MPI_COMM_WORLD);
    // applied + what the ranks keep = what they handed in: nothing is lost, only delayed.
    double worst = 0, scale = 0, kept = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::abs(grads[i] + error_sum[i] - in_sum[i]));
      scale = std::max(scale, std::abs(in_sum[i]));
      kept = std::max(kept, std::abs(error_sum[i]));
    }
    EXPECT_LE(worst, 1e-12 * scale) << "step " << step;
    if (step < warmup) {
      EXPECT_EQ(kept, 0.0) << "plain allreduce during the warmup";
    } else {
      EXPECT_GT(kept, 1e-6 * scale) << "a rank-3 approximation of 20x30 and 10x20 drops something";
      // Biases are never compressed: they keep no error.
      for (const Segment& s : layout.segments()) {
        if (s.is_weight) continue;
        for (std::size_t i = s.offset; i < s.offset + s.count; ++i)
          ASSERT_EQ(hook.error_feedback()[i], 0.0);
      }
    }
  }
}

TEST_F(TrainStrategy, CompressedTrainingStillLearns) {
  TrainConfig config = strategy_config(Parallel::dp);
  config.dtype = collx::DataType::float32;
  config.epochs = 3;
  config.powersgd_warmup = 3;
  const TrainRun plain = train_steps(config, comm, 30);
  for (Compression c : {Compression::bf16, Compression::fp16, Compression::powersgd}) {
    config.compression = c;
    const TrainRun compressed = train_steps(config, comm, 30);
    EXPECT_LT(compressed.losses.back(), 0.8 * compressed.losses.front()) << to_string(c);
    EXPECT_NEAR(compressed.test.accuracy, plain.test.accuracy, 0.05) << to_string(c);
  }
}

}  // namespace hooks

}  // namespace
