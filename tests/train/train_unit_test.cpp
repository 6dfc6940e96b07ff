// collx-train's pieces without MPI: the gradients against finite differences, the sampler, the
// buckets, the schedule, the optimizers, checkpoints and the data set reader.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "dataset.hpp"
#include "grad_sync.hpp"
#include "mlp_math.hpp"
#include "model.hpp"
#include "optimizer.hpp"
#include "pipeline_partition.hpp"
#include "pipeline_schedule.hpp"
#include "random.hpp"
#include "sampler.hpp"

namespace {

using namespace collx::train;
namespace fs = std::filesystem;
using collx::mlp::Backend;
using collx::mlp::Device;

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("collx_train_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

// ---- gradients ----

// Loss (mean over the rows) of a model at `params`, in float64.
double mean_loss(Mlp<double>& mlp, const std::vector<double>& params,
                 const std::vector<double>& inputs, const std::vector<std::int32_t>& labels) {
  mlp.forward(params.data(), inputs.data(), labels.size());
  return mlp.loss(labels.data(), false, 0).loss_sum / static_cast<double>(labels.size());
}

TEST(GradientCheck, Float64MatchesCentralDifferences) {
  auto backend = collx::mlp::make_backend<double>(Device::cpu);
  const ModelShape shape{{7, 6, 5, 4}};
  const std::size_t rows = 9;
  Mlp<double> mlp(*backend, shape, rows);
  std::vector<double> params(mlp.layout().count());
  initialize_parameters(shape, 3, params.data(), params.size());
  Random random(11);
  for (double& p : params)
    p += 0.1 * (random.uniform() - 0.5);  // non-zero biases too
  std::vector<double> inputs(rows * shape.sizes[0]);
  for (double& x : inputs)
    x = 2 * random.uniform() - 1;
  std::vector<std::int32_t> labels(rows);
  for (auto& l : labels)
    l = static_cast<std::int32_t>(random.below(4));

  std::vector<double> grads(params.size());
  mlp.forward(params.data(), inputs.data(), rows);
  mlp.loss(labels.data(), true, 1.0 / rows);
  mlp.backward(params.data(), inputs.data(), grads.data(), false, nullptr);

  const double h = 1e-6;
  double worst = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<double> plus = params, minus = params;
    plus[i] += h;
    minus[i] -= h;
    const double numeric =
        (mean_loss(mlp, plus, inputs, labels) - mean_loss(mlp, minus, inputs, labels)) / (2 * h);
    const double error =
        std::abs(numeric - grads[i]) / std::max(1e-6, std::abs(numeric) + std::abs(grads[i]));
    worst = std::max(worst, error);
    EXPECT_LT(error, 1e-6) << "parameter " << i << ": analytic " << grads[i] << ", numeric "
                           << numeric;
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(GradientCheck, AccumulateAddsToTheBuffer) {
  auto backend = collx::mlp::make_backend<double>(Device::cpu);
  const ModelShape shape{{5, 4, 3}};
  Mlp<double> mlp(*backend, shape, 4);
  std::vector<double> params(mlp.layout().count());
  initialize_parameters(shape, 5, params.data(), params.size());
  std::vector<double> inputs(4 * 5, 0.5);
  inputs[3] = -1;
  std::vector<std::int32_t> labels = {0, 1, 2, 1};
  std::vector<double> once(params.size()), twice(params.size(), 123.0);
  mlp.forward(params.data(), inputs.data(), 4);
  mlp.loss(labels.data(), true, 0.25);
  mlp.backward(params.data(), inputs.data(), once.data(), false, nullptr);
  mlp.backward(params.data(), inputs.data(), twice.data(), false, nullptr);  // overwrites 123
  mlp.backward(params.data(), inputs.data(), twice.data(), true, nullptr);
  for (std::size_t i = 0; i < once.size(); ++i)
    EXPECT_DOUBLE_EQ(twice[i], 2 * once[i]) << i;
}

// The hooks hear a growing prefix that ends at the whole buffer.
TEST(GradientCheck, HooksSeeAGrowingCompletePrefix) {
  struct Recorder : GradientHooks {
    std::vector<std::size_t> ends;
    int polls = 0;
    void gradients_ready(std::size_t end) override { ends.push_back(end); }
    void poll() override { ++polls; }
  } recorder;
  auto backend = collx::mlp::make_backend<float>(Device::cpu);
  const ModelShape shape{{784, 300, 10}};
  Mlp<float> mlp(*backend, shape, 8);
  std::vector<float> params(mlp.layout().count()), grads(params.size());
  std::vector<float> inputs(8 * 784, 0.1f);
  std::vector<std::int32_t> labels(8, 3);
  mlp.forward(params.data(), inputs.data(), 8);
  mlp.loss(labels.data(), true, 0.125f);
  mlp.backward(params.data(), inputs.data(), grads.data(), false, &recorder);
  ASSERT_FALSE(recorder.ends.empty());
  EXPECT_TRUE(std::is_sorted(recorder.ends.begin(), recorder.ends.end()));
  EXPECT_EQ(recorder.ends.back(), mlp.layout().count());
  EXPECT_GT(recorder.ends.size(), 4u);  // the 300x784 weight gradient comes in pieces
  EXPECT_GT(recorder.polls, 0);
}

// ---- sampler ----

TEST(Sampler, EpochPermutationIsAPermutationFixedBySeedAndEpoch) {
  const auto a = epoch_permutation(1000, 7, 0);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (std::uint32_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(a, epoch_permutation(1000, 7, 0));
  EXPECT_NE(a, epoch_permutation(1000, 7, 1));
  EXPECT_NE(a, epoch_permutation(1000, 8, 0));
}

TEST(Sampler, RankSlicesAreDisjointAndCoverTheEpoch) {
  for (std::size_t rows : {1000u, 997u, 64u}) {
    for (std::size_t batch : {64u, 100u, 7u}) {
      for (int nranks = 1; nranks <= 7; ++nranks) {
        if (batch < static_cast<std::size_t>(nranks)) continue;
        const auto order = epoch_permutation(rows, 3, 2);
        std::vector<int> seen(rows, 0);
        for (std::size_t step = 0; step < steps_per_epoch(rows, batch); ++step) {
          const Range global = batch_positions(rows, batch, step);
          std::size_t covered = global.begin;
          for (int r = 0; r < nranks; ++r) {
            const Range mine = rank_slice(global, r, nranks);
            ASSERT_EQ(mine.begin, covered) << "shares are contiguous, in rank order";
            covered = mine.end;
            for (std::size_t p = mine.begin; p < mine.end; ++p)
              ++seen[order[p]];
          }
          ASSERT_EQ(covered, global.end) << "the shares make up the single-process batch";
        }
        for (std::size_t i = 0; i < rows; ++i)
          ASSERT_EQ(seen[i], 1) << "sample " << i << " rows " << rows << " batch " << batch
                                << " ranks " << nranks;
      }
    }
  }
}

TEST(Sampler, SplitEvenly) {
  EXPECT_EQ(split_evenly(10, 3, 0), (Range{0, 3}));
  EXPECT_EQ(split_evenly(10, 3, 1), (Range{3, 6}));
  EXPECT_EQ(split_evenly(10, 3, 2), (Range{6, 10}));
  EXPECT_EQ(split_evenly(2, 4, 0).size(), 0u);
  std::size_t total = 0;
  for (std::size_t i = 0; i < 4; ++i)
    total += split_evenly(2, 4, i).size();
  EXPECT_EQ(total, 2u);
}

// ---- buckets ----

TEST(Buckets, SmallFirstBucketThenCapacity) {
  const auto b = make_buckets(1000, 4, 400, 1600, 1);  // 100 elements, then 400
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].begin, 0u);
  EXPECT_EQ(b[0].end, 100u);
  EXPECT_EQ(b[1].end, 500u);
  EXPECT_EQ(b[2].end, 900u);
  EXPECT_EQ(b[3].end, 1000u);
}

TEST(Buckets, AlignedForShardingAndPadded) {
  for (std::size_t align : {1u, 2u, 3u, 4u, 7u}) {
    const auto b = make_buckets(1001, 8, 80, 800, align);
    std::size_t expected_begin = 0;
    for (const Bucket& x : b) {
      EXPECT_EQ(x.begin, expected_begin);
      EXPECT_EQ(x.begin % align, 0u);
      EXPECT_EQ(x.size() % align, 0u);
      EXPECT_GE(x.size(), align);
      expected_begin = x.end;
    }
    EXPECT_EQ(b.back().end, (1001 + align - 1) / align * align);
  }
  // One bucket when the capacity exceeds the model.
  EXPECT_EQ(make_buckets(100, 4, 1 << 20, 25 << 20, 1).size(), 1u);
}

// ---- schedule and optimizers ----

TEST(Schedule, LinearScalingWarmupAndDecay) {
  LrSchedule s;
  s.base_lr = 0.1;
  s.reference_batch = 256;
  s.batch = 512;
  s.warmup_steps = 10;
  s.total_steps = 110;
  s.schedule = Schedule::cosine;
  EXPECT_DOUBLE_EQ(s.peak(), 0.2);
  EXPECT_DOUBLE_EQ(s.at(0), 0.02);
  EXPECT_DOUBLE_EQ(s.at(9), 0.2);
  EXPECT_DOUBLE_EQ(s.at(10), 0.2);
  EXPECT_NEAR(s.at(60), 0.1, 1e-12);
  EXPECT_LT(s.at(109), 0.001);
  s.schedule = Schedule::linear;
  EXPECT_NEAR(s.at(60), 0.1, 1e-12);
  s.schedule = Schedule::constant;
  EXPECT_DOUBLE_EQ(s.at(100), 0.2);
}

TEST(Optimizer, AdamWFirstStepAndNoDecayOnBiases) {
  auto backend = collx::mlp::make_backend<double>(Device::cpu);
  const ModelShape shape{{2, 1}};  // layout: bias (1), weight (2)
  const ParameterLayout layout(shape);
  OptimizerSettings settings;
  settings.kind = OptimizerKind::adamw;
  settings.weight_decay = 0.5;
  Optimizer<double> optimizer(*backend, settings, layout, layout.count());
  std::vector<double> params = {1.0, 1.0, -2.0};
  const std::vector<double> grads = {0.5, -0.25, 2.0};
  optimizer.update(params.data(), 0, 3, grads.data(), 0, 0.1, 1);
  // First step: m_hat = g, v_hat = g^2, update = lr * sign(g) (eps aside), decay on weights.
  EXPECT_NEAR(params[0], 1.0 - 0.1, 1e-6);               // bias: no decay
  EXPECT_NEAR(params[1], 1.0 * (1 - 0.05) + 0.1, 1e-6);  // weight
  EXPECT_NEAR(params[2], -2.0 * (1 - 0.05) - 0.1, 1e-6);
}

TEST(Optimizer, SgdMomentumMatchesHandComputed) {
  auto backend = collx::mlp::make_backend<double>(Device::cpu);
  const ModelShape shape{{1, 1}};  // bias, weight
  const ParameterLayout layout(shape);
  OptimizerSettings settings;
  settings.kind = OptimizerKind::sgd;
  settings.momentum = 0.9;
  settings.weight_decay = 0.1;
  Optimizer<double> optimizer(*backend, settings, layout, layout.count());
  std::vector<double> params = {1.0, 1.0};
  const std::vector<double> grads = {1.0, 1.0};
  optimizer.update(params.data(), 0, 2, grads.data(), 0, 0.5, 1);
  EXPECT_DOUBLE_EQ(params[0], 0.5);         // v = 1
  EXPECT_DOUBLE_EQ(params[1], 1.0 - 0.55);  // v = 1 + 0.1 * 1
  optimizer.update(params.data(), 0, 2, grads.data(), 0, 0.5, 2);
  EXPECT_DOUBLE_EQ(params[0], 0.5 - 0.5 * 1.9);
  EXPECT_DOUBLE_EQ(params[1], 0.45 - 0.5 * (0.9 * 1.1 + 1 + 0.1 * 0.45));
}

// Without CUDA in the build or without a visible GPU (train_cuda_test covers the backend where
// there is one).
TEST(Backend, CudaIsRefusedWithAReason) {
  const std::string reason = collx::mlp::unavailable_reason(Device::cuda);
  if (reason.empty()) GTEST_SKIP() << "a CUDA device is available here";
  EXPECT_TRUE(collx::mlp::unavailable_reason(Device::cpu).empty());
  try {
    collx::mlp::make_backend<float>(Device::cuda);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--device cuda is not available: " + reason),
              std::string::npos)
        << e.what();
  }
}

// ---- checkpoints ----

CheckpointHeader sample_header() {
  CheckpointHeader h;
  h.dtype = "float32";
  h.shape.sizes = {4, 3, 2};
  h.optimizer = OptimizerKind::adamw;
  h.parameters = ParameterLayout(h.shape).count();
  h.step = 17;
  h.epoch = 2;
  h.step_in_epoch = 5;
  h.seed = 99;
  h.batch = 32;
  h.epoch_loss_sum = 12.5;
  h.epoch_samples = 160;
  h.ranks = 3;
  return h;
}

TEST(Checkpoint, RoundTripsBitwise) {
  TempDir dir;
  const CheckpointHeader h = sample_header();
  std::vector<float> params(h.parameters), m(h.parameters), v(h.parameters);
  for (std::size_t i = 0; i < h.parameters; ++i) {
    params[i] = 0.1f * static_cast<float>(i) - 1.0f;
    m[i] = static_cast<float>(i);
    v[i] = 1.0f / static_cast<float>(i + 1);
  }
  const std::string path = dir.file("ck.bin");
  write_checkpoint(path, h, params.data(), {m.data(), v.data()});
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const CheckpointData d = read_checkpoint(path);
  EXPECT_EQ(header_to_json(d.header), header_to_json(h));
  ASSERT_EQ(d.parameters.size(), params.size() * 4);
  EXPECT_EQ(std::memcmp(d.parameters.data(), params.data(), d.parameters.size()), 0);
  ASSERT_EQ(d.states.size(), 2u);
  EXPECT_EQ(std::memcmp(d.states[0].data(), m.data(), m.size() * 4), 0);
  EXPECT_EQ(std::memcmp(d.states[1].data(), v.data(), v.size() * 4), 0);
}

TEST(Checkpoint, CorruptAndTruncatedFilesAreRejected) {
  TempDir dir;
  const CheckpointHeader h = sample_header();
  std::vector<float> params(h.parameters, 1.0f), m(h.parameters), v(h.parameters);
  const std::string path = dir.file("ck.bin");
  write_checkpoint(path, h, params.data(), {m.data(), v.data()});
  const auto size = fs::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 20));
    f.put('\x7f');
  }
  EXPECT_THROW(read_checkpoint(path), CheckpointError);
  fs::resize_file(path, size / 2);
  EXPECT_THROW(read_checkpoint(path), CheckpointError);
  EXPECT_THROW(read_checkpoint(dir.file("absent.bin")), CheckpointError);
}

TEST(Checkpoint, MismatchesAreNamed) {
  const CheckpointHeader saved = sample_header();
  EXPECT_EQ(checkpoint_mismatch(saved, saved), "");
  CheckpointHeader other = saved;
  other.shape.sizes = {4, 5, 2};
  EXPECT_NE(checkpoint_mismatch(saved, other).find("shape 4-3-2"), std::string::npos);
  other = saved;
  other.dtype = "float64";
  EXPECT_NE(checkpoint_mismatch(saved, other).find("float32"), std::string::npos);
  other = saved;
  other.optimizer = OptimizerKind::sgd;
  EXPECT_NE(checkpoint_mismatch(saved, other).find("adamw"), std::string::npos);
  other = saved;
  other.batch = 64;
  EXPECT_NE(checkpoint_mismatch(saved, other).find("--batch 64"), std::string::npos);
}

// ---- data sets ----

void write_gz(const std::string& path, const std::vector<unsigned char>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

std::vector<unsigned char> idx(std::vector<std::uint32_t> dims, std::size_t data_bytes,
                               unsigned char fill = 7, int magic_dims = -1) {
  std::vector<unsigned char> out = {
      0, 0, 8, static_cast<unsigned char>(magic_dims < 0 ? dims.size() : magic_dims)};
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<unsigned char>(d >> shift));
  }
  for (std::size_t i = 0; i < data_bytes; ++i)
    out.push_back(static_cast<unsigned char>((fill + i) % 3));
  return out;
}

// A valid 4-file directory of n training and m test 2x3 images.
void write_valid_set(const TempDir& dir, std::size_t n, std::size_t m) {
  write_gz(dir.file("train-images-idx3-ubyte.gz"),
           idx({static_cast<std::uint32_t>(n), 2, 3}, n * 6));
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx({static_cast<std::uint32_t>(n)}, n));
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"),
           idx({static_cast<std::uint32_t>(m), 2, 3}, m * 6));
  write_gz(dir.file("t10k-labels-idx1-ubyte.gz"), idx({static_cast<std::uint32_t>(m)}, m));
}

TEST(Dataset, ReadsGzippedIdx) {
  TempDir dir;
  write_valid_set(dir, 5, 4);
  const DataSplit d = load_idx_dataset(dir.file(""));
  EXPECT_EQ(d.train.rows, 5u);
  EXPECT_EQ(d.test.rows, 4u);
  EXPECT_EQ(d.train.features, 6u);
  EXPECT_EQ(d.classes, 3u);                   // labels 0..2
  EXPECT_EQ(d.train.labels[1], (7 + 1) % 3);  // idx() fills (fill + i) % 3
}

TEST(Dataset, MissingAndCorruptFilesAreErrorsThatNameTheFile) {
  auto expect_error = [](const std::string& dir, const std::string& fragment) {
    try {
      load_idx_dataset(dir);
      ADD_FAILURE() << "no error, expected one with \"" << fragment << "\"";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  {
    TempDir dir;
    write_valid_set(dir, 5, 4);
    fs::remove(dir.file("t10k-labels-idx1-ubyte.gz"));
    expect_error(dir.file(""), "missing t10k-labels-idx1-ubyte");
  }
  {
    TempDir dir;
    write_valid_set(dir, 5, 4);
    write_gz(dir.file("train-images-idx3-ubyte.gz"), idx({5, 2, 3}, 5 * 6 - 1));
    expect_error(dir.file(""), "truncated");
  }
  {
    TempDir dir;
    write_valid_set(dir, 5, 4);
    write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx({5}, 5, 0, 3));
    expect_error(dir.file(""), "magic");
  }
  {
    TempDir dir;
    write_valid_set(dir, 5, 4);
    write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx({6}, 6));
    expect_error(dir.file(""), "6 labels");
  }
  {
    TempDir dir;
    write_valid_set(dir, 5, 4);
    // Not gzip data under a .gz name, and not a valid IDX either.
    std::ofstream(dir.file("t10k-images-idx3-ubyte.gz")) << "\x1f\x8b garbage";
    expect_error(dir.file(""), "t10k-images-idx3-ubyte.gz");
  }
}

TEST(Dataset, FallsBackToSyntheticOnlyForTheDefaultDirectory) {
  TempDir dir;
  DataOptions options;
  options.dir = dir.file("nothing-here");
  options.synthetic_train = 100;
  options.synthetic_test = 30;
  std::string notice;
  const DataSplit d = load_data(options, &notice);
  EXPECT_TRUE(d.synthetic);
  EXPECT_EQ(d.train.rows, 100u);
  EXPECT_NE(notice.find("dataset-fashion-mnist"), std::string::npos);
  options.dir_given = true;  // --data DIR: the user asked for those files
  EXPECT_THROW(load_data(options, &notice), DataError);
}

TEST(Dataset, SyntheticIsDeterministic) {
  const DataSplit a = make_synthetic_dataset(50, 10);
  const DataSplit b = make_synthetic_dataset(50, 10);
  EXPECT_EQ(a.train.images, b.train.images);
  EXPECT_EQ(a.test.labels, b.test.labels);
}

TEST(Dataset, FashionMnistWhenInstalled) {
  if (!missing_idx_files(kDefaultDataDir).empty()) GTEST_SKIP() << "dataset-fashion-mnist absent";
  const DataSplit d = load_idx_dataset(kDefaultDataDir);
  EXPECT_EQ(d.name, "Fashion-MNIST");
  EXPECT_EQ(d.train.rows, 60000u);
  EXPECT_EQ(d.test.rows, 10000u);
  EXPECT_EQ(d.train.features, 784u);
  EXPECT_EQ(d.classes, 10u);
}

// Each stage runs every forward and every backward once, in micro-batch order of backwards, and
// 1F1B keeps at most S - s micro-batches alive.
TEST(PipelineSchedule, PassesOfEachStage) {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (std::size_t stages = 1; stages <= 5; ++stages) {
      for (std::size_t m = 1; m <= 9; ++m) {
        for (std::size_t s = 0; s < stages; ++s) {
          const auto ops = pipeline_ops(schedule, stages, s, m);
          ASSERT_EQ(ops.size(), 2 * m);
          std::size_t forwards = 0, backwards = 0, alive = 0, most_alive = 0;
          for (const PipelineOp& op : ops) {
            if (op.backward) {
              EXPECT_EQ(op.micro_batch, backwards++);
              ASSERT_LT(op.micro_batch, forwards);  // its forward ran before
              --alive;
            } else {
              EXPECT_EQ(op.micro_batch, forwards++);
              most_alive = std::max(most_alive, ++alive);
            }
          }
          if (schedule == PipelineSchedule::one_f_one_b) {
            EXPECT_LE(most_alive, std::min(m, stages - s));
          } else {
            EXPECT_EQ(most_alive, m);
          }
        }
      }
    }
  }
}

// With the same forward time f and backward time b on every stage, both schedules leave each
// stage idle (S - 1)(f + b) of (m + S - 1)(f + b): the formula the measured bubble is held to.
TEST(PipelineSchedule, ReplayOfEqualStagesGivesTheFormula) {
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (std::size_t stages = 1; stages <= 5; ++stages) {
      for (std::size_t m = 1; m <= 9; ++m) {
        PassTimes times;
        times.forward.assign(stages, std::vector<double>(m, 1.0));
        times.backward.assign(stages, std::vector<double>(m, 2.0));
        const ReplayedStep step = replay_pipeline(schedule, times);
        const double s = static_cast<double>(stages);
        EXPECT_DOUBLE_EQ(step.seconds, (static_cast<double>(m) + s - 1) * 3.0)
            << "S " << stages << " m " << m;
        for (double idle : step.idle)
          EXPECT_NEAR(idle / step.seconds, (s - 1) / (static_cast<double>(m) + s - 1), 1e-12);
      }
    }
  }
}

// An unbalanced pipeline: the slow stage sets the pace and the fast one waits. Two stages,
// stage 1 twice as slow, GPipe, m = 2: stage 0 forwards at [0,1], [1,2]; stage 1 forwards at
// [1,3], [3,5], backwards at [5,9], [9,13]; stage 0 backwards at [9,11], [13,15].
TEST(PipelineSchedule, ReplayOfUnequalStages) {
  PassTimes times;
  times.forward = {{1, 1}, {2, 2}};
  times.backward = {{2, 2}, {4, 4}};
  const ReplayedStep step = replay_pipeline(PipelineSchedule::gpipe, times);
  EXPECT_DOUBLE_EQ(step.seconds, 15);
  EXPECT_DOUBLE_EQ(step.idle[0], 15 - 6);
  EXPECT_DOUBLE_EQ(step.idle[1], 15 - 12);
}

// The formula for unequal stages: equal stages give (S - 1) / (m + S - 1) under both schedules;
// GPipe's step is sum(F) + sum(B) + (m - 1)(max F + max B) whatever the stages, so with the
// forward/backward split of an MLP (the first stage's backward costs its forward, the others'
// twice) its bubble stays above the formula while 1F1B's stays at it when F + B is equal.
TEST(PipelineSchedule, BubbleFormulaOfUnequalStages) {
  for (std::size_t stages = 1; stages <= 4; ++stages) {
    for (std::size_t m = 1; m <= 9; ++m) {
      const double s = static_cast<double>(stages), micro = static_cast<double>(m);
      const std::vector<double> ones(stages, 1.0), twos(stages, 2.0);
      for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
        EXPECT_NEAR(pipeline_bubble_formula(schedule, ones, twos, m), (s - 1) / (micro + s - 1),
                    1e-12);
      }
      // Stage k: forward 3 + k, backward 7 - k (k even) or 2 k + 1 (k odd).
      std::vector<double> forward, backward;
      double sum = 0, max_forward = 0, max_backward = 0, work = 0;
      for (std::size_t k = 0; k < stages; ++k) {
        forward.push_back(3.0 + static_cast<double>(k));
        backward.push_back(k % 2 ? 2.0 * static_cast<double>(k) + 1 : 7.0 - static_cast<double>(k));
        sum += forward.back() + backward.back();
        max_forward = std::max(max_forward, forward.back());
        max_backward = std::max(max_backward, backward.back());
        work += micro * (forward.back() + backward.back());
      }
      const double step = sum + (micro - 1) * (max_forward + max_backward);
      EXPECT_NEAR(pipeline_bubble_formula(PipelineSchedule::gpipe, forward, backward, m),
                  1 - work / s / step, 1e-12)
          << "S " << stages << " m " << m;
    }
  }
  // Two stages of equal F + B = 3, split 1.5 + 1.5 and 1 + 2 (an MLP's), m = 8: 1F1B at the
  // formula 1/9, GPipe at 1 - 8 * 3 / (3 + 3 + 7 * 3.5) = 0.2131.
  const std::vector<double> forward = {1.5, 1.0}, backward = {1.5, 2.0};
  EXPECT_NEAR(pipeline_bubble_formula(PipelineSchedule::one_f_one_b, forward, backward, 8), 1.0 / 9,
              1e-12);
  EXPECT_NEAR(pipeline_bubble_formula(PipelineSchedule::gpipe, forward, backward, 8), 1 - 24 / 30.5,
              1e-12);
}

// A stage that sends its input gradient before computing its weight gradients (the trainer's
// stages after the first): backward_input equal to the whole backward is the indivisible pass;
// less lets the previous stage start earlier, and the bubble falls below (S - 1) / (m + S - 1).
TEST(PipelineSchedule, BubbleFormulaWithInputGradientSentFirst) {
  const std::vector<double> ones(2, 1.0), twos(2, 2.0);
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (std::size_t m = 1; m <= 9; ++m) {
      EXPECT_NEAR(pipeline_bubble_formula(schedule, ones, twos, m, twos),
                  pipeline_bubble_formula(schedule, ones, twos, m), 1e-12);
    }
    // m = 1: forwards 0-1, 1-2; stage 1's backward 2-4 sends at 3; stage 0's 3-5. Idle 2 of 5.
    EXPECT_NEAR(pipeline_bubble_formula(schedule, ones, twos, 1, ones), 0.4, 1e-12);
  }
  // The MLP's split of F + B = 3 (first stage 1.5 + 1.5, second 1 + 2 of which 1 is its input
  // gradient), GPipe, m = 8: stage 0's forwards end at 12, stage 1's at 13; stage 1's backward
  // i runs from 13 + 2 i and sends at 14 + 2 i, where stage 0's (1.5 < 2) starts; the step ends
  // at 14 + 14 + 1.5 = 29.5 (against 30.5 for the indivisible pass): 1 - 24 / 29.5.
  const std::vector<double> forward = {1.5, 1.0}, backward = {1.5, 2.0}, input = {1.5, 1.0};
  EXPECT_NEAR(pipeline_bubble_formula(PipelineSchedule::gpipe, forward, backward, 8, input),
              1 - 24 / 29.5, 1e-12);
  // The replay of measured times reads backward_input the same way.
  PassTimes times;
  times.forward = {{1.0}, {1.0}};
  times.backward = {{2.0}, {2.0}};
  times.backward_input = {{2.0}, {1.0}};
  const ReplayedStep step = replay_pipeline(PipelineSchedule::gpipe, times);
  EXPECT_DOUBLE_EQ(step.seconds, 5);
  EXPECT_DOUBLE_EQ(step.idle[0], 2);
  EXPECT_DOUBLE_EQ(step.idle[1], 2);
}

// ---- the pipeline's stage partition (pipeline_partition.hpp) ----

// The GEMM work of 784-256-512-10: the first layer has no input gradient.
TEST(PipelinePartition, MlpLayerCosts) {
  const std::vector<LayerCost> layers = mlp_layer_costs({784, 256, 512, 10});
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_DOUBLE_EQ(layers[0].forward, 784.0 * 256);
  EXPECT_DOUBLE_EQ(layers[0].backward, 784.0 * 256);
  EXPECT_DOUBLE_EQ(layers[0].input_gradient, 0);
  EXPECT_DOUBLE_EQ(layers[1].forward, 256.0 * 512);
  EXPECT_DOUBLE_EQ(layers[1].backward, 2 * 256.0 * 512);
  EXPECT_DOUBLE_EQ(layers[1].input_gradient, 256.0 * 512);
  // Stage 1 = layers 1-2 sends its input gradient after its input gradients' GEMMs only.
  const StageCosts costs = stage_costs(layers, {0, 1, 3}, true);
  EXPECT_DOUBLE_EQ(costs.forward[1], 256.0 * 512 + 512.0 * 10);
  EXPECT_DOUBLE_EQ(costs.backward[1], 2 * (256.0 * 512 + 512.0 * 10));
  EXPECT_DOUBLE_EQ(costs.backward_input[1], 256.0 * 512 + 512.0 * 10);
  EXPECT_DOUBLE_EQ(costs.backward_input[0], costs.backward[0]);
  EXPECT_EQ(stage_costs(layers, {0, 1, 3}, false).backward_input[1], costs.backward[1]);
}

// Equal layers: equal stages, under both schedules and both backward modes.
TEST(PipelinePartition, EqualLayersGiveEqualStages) {
  const std::vector<LayerCost> layers(8, LayerCost{1, 2, 1});
  for (PipelineSchedule schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (bool input_first : {false, true}) {
      for (std::size_t m : {1u, 2u, 4u, 8u}) {
        EXPECT_EQ(balanced_stages(layers, 1, schedule, m, input_first),
                  (std::vector<std::size_t>{0, 8}));
        // With few micro-batches the fill and drain dominate, and equal stages are not always
        // the shortest step (below); GPipe with whole backward passes is sum(F) + sum(B) +
        // (m - 1)(max F + max B) at every m.
        if (m < 4 && (input_first || schedule != PipelineSchedule::gpipe)) continue;
        EXPECT_EQ(balanced_stages(layers, 2, schedule, m, input_first),
                  (std::vector<std::size_t>{0, 4, 8}))
            << to_string(schedule) << " m " << m << " input-first " << input_first;
        EXPECT_EQ(balanced_stages(layers, 4, schedule, m, input_first),
                  (std::vector<std::size_t>{0, 2, 4, 6, 8}))
            << to_string(schedule) << " m " << m << " input-first " << input_first;
        EXPECT_EQ(balanced_stages(layers, 8, schedule, m, input_first).size(), 9u);
      }
    }
  }
  // One micro-batch runs the stages one after the other, and with input-first a stage's
  // backward overlaps the next stage's weight gradients: a later stage with more layers is
  // shorter. 1F1B, m = 2, stages of 5 and 3 layers (F, B = 5, 10 and 3, 6): stage 1 runs F0 at
  // 5-8, B0 8-14, F1 14-17, B1 17-23, stage 0 B0 14-24, B1 24-34: 34 against 36 for 4 and 4.
  const auto one = balanced_stages(layers, 2, PipelineSchedule::gpipe, 1, true);
  EXPECT_LT(predicted_step(PipelineSchedule::gpipe, stage_costs(layers, one, true), 1),
            predicted_step(PipelineSchedule::gpipe, stage_costs(layers, {0, 4, 8}, true), 1));
  const auto two = balanced_stages(layers, 2, PipelineSchedule::one_f_one_b, 2, false);
  EXPECT_EQ(two, (std::vector<std::size_t>{0, 5, 8}));
  EXPECT_DOUBLE_EQ(
      predicted_step(PipelineSchedule::one_f_one_b, stage_costs(layers, two, false), 2), 34);
  EXPECT_DOUBLE_EQ(
      predicted_step(PipelineSchedule::one_f_one_b, stage_costs(layers, {0, 4, 8}, false), 2), 36);
  EXPECT_THROW(balanced_stages(layers, 9, PipelineSchedule::gpipe, 4, true), std::invalid_argument);
}

// auto is the shortest replayed step of every cut, which is not always the cut of the smallest
// largest forward + backward: 784-64-1024-32-1024-64-10 on 3 stages, 1F1B, m = 8. The min-max
// cut (layer 0 | 1-2 | 3-5) leaves stage 0 a pass without input gradient and the other two
// their full backward; layers 0-1 | 2-3 | 4-5 run a 1F1B step about 8 % shorter.
TEST(PipelinePartition, AutoTakesTheShortestReplayedStep) {
  const std::vector<LayerCost> layers = mlp_layer_costs({784, 64, 1024, 32, 1024, 64, 10});
  const auto schedule = PipelineSchedule::one_f_one_b;
  const std::vector<std::size_t> chosen = balanced_stages(layers, 3, schedule, 8, true);
  std::vector<double> totals;
  for (const LayerCost& layer : layers)
    totals.push_back(layer.forward + layer.backward);
  const std::vector<std::size_t> min_max = min_max_stages(totals, 3);
  EXPECT_EQ(chosen, (std::vector<std::size_t>{0, 2, 4, 6}));
  EXPECT_EQ(min_max, (std::vector<std::size_t>{0, 1, 3, 6}));
  const double step = predicted_step(schedule, stage_costs(layers, chosen, true), 8);
  EXPECT_LT(step, 0.95 * predicted_step(schedule, stage_costs(layers, min_max, true), 8));
  // And no cut is shorter, for either schedule, backward mode and several m.
  for (PipelineSchedule sched : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    for (bool input_first : {false, true}) {
      for (std::size_t m : {1u, 2u, 4u, 8u}) {
        const double best = predicted_step(
            sched,
            stage_costs(layers, balanced_stages(layers, 3, sched, m, input_first), input_first), m);
        for (std::size_t a = 1; a < layers.size(); ++a) {
          for (std::size_t b = a + 1; b < layers.size(); ++b) {
            EXPECT_LE(best,
                      predicted_step(sched, stage_costs(layers, {0, a, b, 6}, input_first), m) *
                          (1 + 1e-9))
                << "cut " << a << "," << b << " m " << m;
          }
        }
      }
    }
  }
}

// Two cuts of about the same largest forward + backward (784-256-256-256-256-10 on 2 stages:
// layer 0 alone, 0.5975M, or layers 0-1, 0.5980M): 1F1B's step tells them apart (4 % shorter
// with layers 0-1), GPipe's the other way.
TEST(PipelinePartition, CutsOfAboutEqualWorkAreToldApartByTheSchedule) {
  const std::vector<LayerCost> layers = mlp_layer_costs({784, 256, 256, 256, 256, 10});
  const auto schedule = PipelineSchedule::one_f_one_b;
  const std::vector<std::size_t> chosen = balanced_stages(layers, 2, schedule, 8, true);
  EXPECT_EQ(chosen, (std::vector<std::size_t>{0, 2, 5}));
  EXPECT_LT(predicted_step(schedule, stage_costs(layers, chosen, true), 8),
            0.97 * predicted_step(schedule, stage_costs(layers, {0, 1, 5}, true), 8));
  EXPECT_EQ(balanced_stages(layers, 2, PipelineSchedule::gpipe, 8, true),
            (std::vector<std::size_t>{0, 1, 5}));
}

// Beyond kMaxReplayedPartitions cuts: the min-max cut of forward + backward.
TEST(PipelinePartition, TooManyCutsFallBackToMinMax) {
  std::vector<LayerCost> layers;
  std::vector<double> totals;
  for (std::size_t l = 0; l < 40; ++l) {
    const double gemm = 1.0 + static_cast<double>((l * 7) % 5);
    layers.push_back({gemm, 2 * gemm, gemm});
    totals.push_back(3 * gemm);
  }
  EXPECT_GT(partition_count(40, 8), kMaxReplayedPartitions);
  EXPECT_DOUBLE_EQ(partition_count(7, 3), 15);  // C(6, 2)
  EXPECT_EQ(balanced_stages(layers, 8, PipelineSchedule::gpipe, 4, true),
            min_max_stages(totals, 8));
  // Fewer cuts but many micro-batches: 40 layers on 4 stages (9,139 cuts), m = 4096.
  EXPECT_TRUE(replays_every_cut(40, 4, 64));
  EXPECT_FALSE(replays_every_cut(40, 4, 4096));
  EXPECT_EQ(balanced_stages(layers, 4, PipelineSchedule::gpipe, 4096, true),
            min_max_stages(totals, 4));
}

// --pipeline-split's counts: each stage's first layer, or what is wrong with them.
TEST(PipelinePartition, SplitFromLayerCounts) {
  EXPECT_EQ(stages_from_counts({1, 2}, 3, 2), (std::vector<std::size_t>{0, 1, 3}));
  EXPECT_EQ(stages_from_counts({4, 3}, 7, 2), (std::vector<std::size_t>{0, 4, 7}));
  EXPECT_EQ(stages_from_counts({5}, 5, 1), (std::vector<std::size_t>{0, 5}));
  auto message = [](const std::vector<std::size_t>& counts, std::size_t layers,
                    std::size_t stages) -> std::string {
    try {
      stages_from_counts(counts, layers, stages);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message({1, 1, 1}, 3, 2),
            "--pipeline-split 1,1,1 gives 3 stages, the pipeline has 2 (ranks / --replicas)");
  EXPECT_EQ(message({2, 2}, 3, 2),
            "--pipeline-split 2,2 places 4 layers, the model has 3 (--hidden widths + 1)");
  EXPECT_EQ(message({3, 0}, 3, 2),
            "--pipeline-split 3,0: stage 1 holds no layer (each stage needs at least one)");
}

}  // namespace
