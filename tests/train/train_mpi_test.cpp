// collx-train on real MPI ranks: N ranks at global batch B against one process at batch B,
// replicas bitwise identical after every step, buckets / overlap / accumulation / sharding /
// checkpoint-resume equivalences, exact distributed evaluation. TrainRun at np = 1, 2, 3, 4.
//
// The single-process reference runs on every rank over MPI_COMM_SELF, so each rank compares
// the distributed result with its own copy of the reference.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "mpi_test_util.hpp"
#include "train_test_support.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;
using namespace collx::train::testing;
using collx::testing::all_ranks;
using collx::testing::identical_on_all_ranks;


TrainRun train_single_process(const TrainConfig& config, int steps) {
  collx::Communicator self(MPI_COMM_SELF);
  return train_steps(config, self, steps);
}

// ||a - b|| / ||b||
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

class TrainMpi : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
};

TEST_F(TrainMpi, OneStepMatchesSingleProcess) {
  struct Case {
    collx::DataType dtype;
    OptimizerKind optimizer;
    double tolerance;
  };
  for (const Case& k : {Case{collx::DataType::float64, OptimizerKind::sgd, 1e-12},
                        Case{collx::DataType::float64, OptimizerKind::adamw, 1e-12},
                        Case{collx::DataType::float32, OptimizerKind::sgd, 1e-5},
                        Case{collx::DataType::float32, OptimizerKind::adamw, 1e-5}}) {
    TrainConfig config = small_config(k.dtype);
    config.optimizer.kind = k.optimizer;
    const TrainRun reference = train_single_process(config, 1);
    const TrainRun distributed = train_steps(config, comm, 1);
    const double error = relative_error(distributed.params, reference.params);
    EXPECT_LE(error, k.tolerance) << collx::to_string(k.dtype) << " " << to_string(k.optimizer);
    EXPECT_NEAR(distributed.losses[0], reference.losses[0], k.tolerance * reference.losses[0]);
  }
}

TEST_F(TrainMpi, LossCurveOverFiftyStepsMatchesSingleProcess) {
  TrainConfig config = small_config();
  config.epochs = 6;
  const TrainRun reference = train_single_process(config, 50);
  const TrainRun distributed = train_steps(config, comm, 50);
  ASSERT_EQ(distributed.losses.size(), 50u);
  for (int s = 0; s < 50; ++s) {
    EXPECT_NEAR(distributed.losses[s], reference.losses[s], 1e-10 * reference.losses[s])
        << "step " << s;
  }
  EXPECT_LE(relative_error(distributed.params, reference.params), 1e-10);
  EXPECT_LT(distributed.losses.back(), 0.8 * distributed.losses.front()) << "it learns";
}

TEST_F(TrainMpi, WeightsBitwiseIdenticalOnEveryRankAfterEveryStep) {
  for (bool shard : {false, true}) {
    TrainConfig config = small_config(collx::DataType::float32);
    config.verify_replicas = true;  // the trainer's own check: allgather of a checksum per step
    config.shard = shard;
    auto trainer = make_trainer(config, comm, small_data());
    trainer->initialize();
    for (int s = 0; s < 12; ++s) {
      EXPECT_NO_THROW(trainer->train_step());
      if (trainer->step_in_epoch() == trainer->steps_per_epoch()) trainer->next_epoch();
      const auto params = trainer->parameters();
      ASSERT_TRUE(identical_on_all_ranks(params.data(), params.size() * sizeof(double)))
          << "step " << s << (shard ? " sharded" : "");
    }
  }
}

// With overlap each bucket is updated (and, sharded, allgathered) as soon as its reduction
// completes; without, after all of them: the same arithmetic, so the same bits.
TEST_F(TrainMpi, OverlapOnOffIsBitwiseIdentical) {
  for (bool shard : {false, true}) {
    for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
      TrainConfig config = small_config();
      config.shard = shard;
      config.optimizer.kind = kind;
      config.bucket_mb = 0.01;
      config.first_bucket_mb = 0.002;
      const TrainRun overlapped = train_steps(config, comm, 12);
      config.overlap = false;
      const TrainRun after = train_steps(config, comm, 12);
      EXPECT_TRUE(bitwise_equal(overlapped.params, after.params))
          << to_string(kind) << (shard ? " sharded" : "");
      EXPECT_EQ(overlapped.losses, after.losses);
    }
  }
}

TEST_F(TrainMpi, BucketSizesGiveBitwiseIdenticalWeights) {
  TrainConfig config = small_config();
  // Summing two values is commutative, so at two ranks any algorithm gives the same bits
  // wherever an element lies. Beyond two, ring and Rabenseifner sum an element in an order
  // that depends on the block it falls in; recursive doubling's order does not.
  if (world_size() > 2) config.algorithm = collx::Algorithm::recursive_doubling;
  const TrainRun one_bucket = train_steps(config, comm, 12);
  config.bucket_mb = 0.01;  // 1310 doubles: several buckets over the 19k parameters
  config.first_bucket_mb = 0.001;
  const TrainRun many = train_steps(config, comm, 12);
  config.bucket_mb = 0.05;
  config.first_bucket_mb = 0.05;
  const TrainRun some = train_steps(config, comm, 12);
  EXPECT_TRUE(bitwise_equal(one_bucket.params, many.params));
  EXPECT_TRUE(bitwise_equal(one_bucket.params, some.params));
}

TEST_F(TrainMpi, AccumulatedMicroBatchesEqualOneBatch) {
  TrainConfig config = small_config();
  const TrainRun whole = train_steps(config, comm, 10);
  config.accum = 3;
  const TrainRun accumulated = train_steps(config, comm, 10);
  EXPECT_LE(relative_error(accumulated.params, whole.params), 1e-12);
  for (int s = 0; s < 10; ++s)
    EXPECT_NEAR(accumulated.losses[s], whole.losses[s], 1e-12 * whole.losses[s]);
}

TEST_F(TrainMpi, ShardedOptimizerEqualsDataParallel) {
  for (OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
    TrainConfig config = small_config();
    config.optimizer.kind = kind;
    config.bucket_mb = 0.02;
    config.first_bucket_mb = 0.005;
    const TrainRun plain = train_steps(config, comm, 12);
    config.shard = true;
    const TrainRun sharded = train_steps(config, comm, 12);
    if (world_size() <= 2) {
      EXPECT_TRUE(bitwise_equal(plain.params, sharded.params)) << to_string(kind);
    }
    EXPECT_LE(relative_error(sharded.params, plain.params), 1e-12) << to_string(kind);
  }
}

std::string scratch_path(const std::string& name) {
  // Rank 0's pid names the file the same on every rank.
  int pid = static_cast<int>(::getpid());
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() /
          ("collx_train_" + std::to_string(pid) + "_" + name))
      .string();
}

TEST_F(TrainMpi, DistributedEvaluationIsExact) {
  TrainConfig config = small_config();
  auto trainer = make_trainer(config, comm, small_data());
  trainer->initialize();
  for (int s = 0; s < 5; ++s)
    trainer->train_step();
  const EvalResult distributed = trainer->evaluate(small_data().test);
  // The same weights in one process: through a checkpoint, bit for bit.
  const std::string path = scratch_path("eval.ckpt");
  trainer->save_checkpoint(path);
  collx::Communicator self(MPI_COMM_SELF);
  TrainConfig single_config = config;
  single_config.resume_path = path;
  auto single = make_trainer(single_config, self, small_data());
  single->initialize();
  EXPECT_EQ(single->agreed_checksum(), trainer->agreed_checksum());
  const EvalResult reference = single->evaluate(small_data().test);
  EXPECT_EQ(distributed.samples, 101u) << "every test sample once";
  EXPECT_EQ(reference.samples, 101u);
  EXPECT_EQ(distributed.correct, reference.correct);
  EXPECT_GT(distributed.correct, 0u);
  EXPECT_NEAR(distributed.loss, reference.loss, 1e-12 * reference.loss);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
}

class Quiet final : public TrainObserver {};

TEST_F(TrainMpi, CheckpointThenResumeIsBitwiseIdentical) {
  const auto start = std::chrono::steady_clock::now();
  for (bool shard : {false, true}) {
    // Stops mid-epoch (7) and at an epoch's end (10: the next step starts epoch 2).
    for (int stop : {7, 10}) {
      TrainConfig config = small_config(collx::DataType::float32);
      config.shard = shard;
      Quiet quiet;
      const FinalReport uninterrupted = run_training(config, comm, small_data(), quiet, start);

      const std::string path = scratch_path("resume.ckpt");
      TrainConfig first = config;
      first.checkpoint_path = path;
      first.stop_after = stop;
      const FinalReport interrupted = run_training(first, comm, small_data(), quiet, start);
      EXPECT_TRUE(interrupted.stopped_early);
      EXPECT_EQ(interrupted.steps, stop);

      TrainConfig second = config;
      second.resume_path = path;
      const FinalReport resumed = run_training(second, comm, small_data(), quiet, start);
      EXPECT_EQ(resumed.steps, uninterrupted.steps);
      EXPECT_EQ(resumed.checksum, uninterrupted.checksum)
          << "stop " << stop << (shard ? " sharded" : "");
      EXPECT_EQ(resumed.test.correct, uninterrupted.test.correct);
      MPI_Barrier(MPI_COMM_WORLD);
      if (world_rank() == 0) std::filesystem::remove(path);
    }
  }
}

TEST_F(TrainMpi, CheckpointOfAnotherShapeFailsOnEveryRank) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = scratch_path("shape.ckpt");
  TrainConfig config = small_config();
  config.checkpoint_path = path;
  config.stop_after = 2;
  Quiet quiet;
  run_training(config, comm, small_data(), quiet, start);
  TrainConfig other = small_config();
  other.hidden = {24, 17};
  other.resume_path = path;
  bool threw = false;
  try {
    run_training(other, comm, small_data(), quiet, start);
  } catch (const CheckpointError& e) {
    threw = std::string(e.what()).find("24-16") != std::string::npos;
  }
  EXPECT_TRUE(all_ranks(threw));
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(path);
}

TEST_F(TrainMpi, GlobalBatchSmallerThanRanksIsRefused) {
  TrainConfig config = small_config();
  config.batch = static_cast<std::size_t>(world_size()) - 1;
  EXPECT_THROW(make_trainer(config, comm, small_data()), std::invalid_argument);
}

}  // namespace
