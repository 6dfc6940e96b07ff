#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "cli_numbers.hpp"

namespace collx::train {

namespace {

constexpr std::size_t kMaxSyntheticRows = std::size_t{1} << 20;

std::vector<std::size_t> parse_hidden(const std::string& text) {
  auto fail = [&](const std::string& why) {
    throw CLI::ValidationError("--hidden", "\"" + text + "\" " + why);
  };
  if (text.empty()) fail("gives no layer: a comma-separated list of widths, e.g. 512,256");
  std::vector<std::size_t> sizes;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    // Digits only: stoull would take "-5" as 2^64 - 5 and " 5" with its space.
    const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
    unsigned long long value = 0;
    try {
      value = digits ? std::stoull(item) : 0;
    } catch (const std::out_of_range&) {
      value = std::numeric_limits<unsigned long long>::max();  // validate() says it is too wide
    }
    if (!digits || value == 0) {
      fail("is not a comma-separated list of positive layer widths, e.g. 512,256");
    }
    sizes.push_back(static_cast<std::size_t>(value));
  }
  if (text.back() == ',') fail("ends with a comma");
  return sizes;
}

// --pipeline-split: auto (empty) or the layers of each stage, e.g. 4,3.
std::vector<std::size_t> parse_pipeline_split(const std::string& text) {
  if (text == "auto") return {};
  auto fail = [&] {
    throw CLI::ValidationError(
        "--pipeline-split", "\"" + text +
                                "\" is neither auto nor a comma-separated list of layers per "
                                "stage, e.g. 4,3 (stage 0 holds layers 0-3, stage 1 layers 4-6)");
  };
  std::vector<std::size_t> counts;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    // 1 to 6 digits: no sign, no space, no count that could overflow the sum.
    const bool digits = !item.empty() && item.size() <= 6 &&
                        item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoull(item) == 0) fail();
    counts.push_back(static_cast<std::size_t>(std::stoull(item)));
  }
  if (counts.empty() || text.back() == ',') fail();
  return counts;
}

// --optimizer sgd's defaults: SGD with momentum wants a far larger rate than AdamW, and its
// weight decay is an L2 term in the gradient, not AdamW's decoupled shrinking.
constexpr double kSgdLr = 0.05;
constexpr double kSgdWeightDecay = 5e-4;

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// The algorithms the registry has for `collective`, comma-separated (the MPI library's own, mpi,
// last where it has one): the --algo help lists what the library implements.
std::string algorithm_names(Collective collective) {
  std::string names;
  for (const Algorithm algorithm : algorithms_of(collective)) {
    names += (names.empty() ? "" : ", ") + std::string(to_string(algorithm));
  }
  if (implements(collective, Algorithm::mpi)) names += ", mpi";
  return names;
}

}  // namespace

ParseOutcome parse_command_line(int argc, const char* const* argv, Cli& cli) {
  // Every number strictly (apps/common/cli_numbers.hpp: CLI11 alone takes "-1" for an unsigned
  // option as 2^64 - 1, and "nan").
  using collx::apps::finite_number;
  using collx::apps::integer_in;
  using collx::apps::whole_number;
  CLI::App app{
      "collx-train: MLP training on collx collectives, data, fully sharded, pipeline or tensor "
      "parallel (Fashion-MNIST by default; launch with mpirun or srun)"};
  auto& c = cli.config;
  std::string hidden = "512,256", dtype = "float32", device = "cpu", optimizer = "adamw";
  std::string schedule = "cosine", algo = "auto", parallel = "dp", pipeline_schedule = "1f1b";
  std::string compress = "none", pipeline_backward = "input-first", pipeline_split = "auto";
  // The default directory: $COLLX_TRAIN_DATA (a site's copy), else the Debian package's. Only
  // the default falls back to the synthetic set; a directory given with --data must hold the
  // files.
  if (const char* env = std::getenv("COLLX_TRAIN_DATA"); env && *env) cli.data.dir = env;
  app.add_option("--data", cli.data.dir,
                 "directory of MNIST-format IDX files (.gz or not); default $COLLX_TRAIN_DATA, "
                 "else the Debian package dataset-fashion-mnist's, and without its files the "
                 "built-in synthetic set")
      ->capture_default_str();
  app.add_flag("--synthetic", cli.data.synthetic, "train on the built-in synthetic data set");
  // A million samples (784 MB) is plenty for a synthetic set; more is a typo.
  app.add_option("--synthetic-train", cli.data.synthetic_train, "synthetic training samples")
      ->capture_default_str()
      ->check(integer_in(std::size_t{1}, kMaxSyntheticRows));
  app.add_option("--synthetic-test", cli.data.synthetic_test, "synthetic test samples")
      ->capture_default_str()
      ->check(integer_in(std::size_t{1}, kMaxSyntheticRows));
  app.add_option("--train-limit", cli.data.train_limit,
                 "train on the first N samples only (0: all)")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_option("--parallel", parallel,
                 "strategy: dp (data parallel), fsdp (fully sharded, ZeRO-3), pipeline (stages "
                 "on consecutive ranks, micro-batches), tensor (Megatron column/row split)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dp", "fsdp", "pipeline", "tensor"}));
  app.add_option("--replicas", c.replicas,
                 "pipeline and tensor: data-parallel replicas of the model, each on ranks / "
                 "replicas consecutive ranks (4 ranks, --replicas 2: 2 replicas x 2 stages)")
      ->capture_default_str()
      ->check(integer_in(1, std::numeric_limits<int>::max()));
  app.add_option("--pipeline-schedule", pipeline_schedule, "gpipe or 1f1b")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpipe", "1f1b"}));
  app.add_option("--pipeline-backward", pipeline_backward,
                 "pipeline: input-first (a stage sends its input gradient, then computes its "
                 "weight gradients) or whole (sends it after the whole backward pass); the same "
                 "results")
      ->capture_default_str()
      ->check(CLI::IsMember({"input-first", "whole"}));
  app.add_option("--pipeline-split", pipeline_split,
                 "pipeline: layers per stage, e.g. 4,3 (stage 0 holds layers 0-3, stage 1 "
                 "layers 4-6), or auto: the cut whose stages' forward and backward GEMM work "
                 "gives the shortest step under this schedule (printed in the header)")
      ->capture_default_str();
  app.add_option("--micro-batches", c.micro_batches,
                 "pipeline: micro-batches per step in each replica")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_option("--compress", compress,
                 "dp gradient compression hook: none, bf16, fp16 (16-bit allreduce) or powersgd")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "bf16", "fp16", "powersgd"}));
  app.add_option("--powersgd-rank", c.powersgd_rank, "rank of PowerSGD's factors")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_option("--powersgd-warmup", c.powersgd_warmup,
                 "steps of plain allreduce before PowerSGD starts")
      ->capture_default_str()
      ->check(whole_number<std::int64_t>());
  app.add_option("--hidden", hidden, "hidden layer widths")->capture_default_str();
  app.add_option("--epochs", c.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(integer_in(1, 1000000));
  app.add_option("--batch", c.batch, "global batch: samples per optimizer step over all ranks")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_option("--accum", c.accum, "micro-batches per step (gradient accumulation)")
      ->capture_default_str()
      ->check(integer_in(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--optimizer", optimizer, "adamw or sgd (with momentum)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--lr", c.lr,
                 "learning rate at --lr-batch samples per step (default for --optimizer sgd: " +
                     format_number(kSgdLr) + ")")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--lr-batch", c.lr_reference_batch,
                 "reference batch of --lr: the rate used is lr * batch / lr-batch")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_option("--momentum", c.optimizer.momentum, "sgd momentum")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--beta1", c.optimizer.beta1, "adamw beta1")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--beta2", c.optimizer.beta2, "adamw beta2")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--eps", c.optimizer.eps, "adamw epsilon")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--weight-decay", c.optimizer.weight_decay,
                 "weight decay of the weights: decoupled for adamw, L2 for sgd (default for "
                 "--optimizer sgd: " +
                     format_number(kSgdWeightDecay) + ")")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--warmup-epochs", c.warmup_epochs, "linear warmup length (fractions allowed)")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--schedule", schedule, "decay after warmup: cosine, linear or constant")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "linear", "constant"}));
  app.add_option("--dtype", dtype, "float32 or float64")
      ->capture_default_str()
      ->check(CLI::IsMember({"float32", "float64"}));
  app.add_option("--device", device,
                 "cpu (OpenBLAS), or cuda: cuBLAS and CUDA kernels, parameters, gradients and "
                 "optimizer state in device memory, gradients allreduced by collx from device "
                 "memory; each rank uses GPU (node-local rank mod GPU count); needs a build with "
                 "CUDA and a visible GPU")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--seed", c.seed, "initialisation and data order")
      ->capture_default_str()
      ->check(whole_number<std::uint64_t>());
  app.add_option("--bucket-mb", c.bucket_mb, "gradient bucket size in MiB")
      ->capture_default_str()
      ->check(finite_number());
  app.add_option("--first-bucket-mb", c.first_bucket_mb,
                 "size of the first bucket in MiB (small, so communication starts early)")
      ->capture_default_str()
      ->check(finite_number());
  bool no_overlap = false;
  app.add_flag("--no-overlap", no_overlap,
               "reduce the gradients after the backward pass instead of during it");
  app.add_option("--algo", algo,
                 "gradient allreduce algorithm: auto, " + algorithm_names(Collective::allreduce) +
                     " (--shard: reduce_scatter's, " + algorithm_names(Collective::reduce_scatter) +
                     ")")
      ->capture_default_str();
  app.add_flag("--shard", c.shard,
               "ZeRO-1: reduce_scatter the gradients, update this rank's shard, allgather");
  app.add_option("--checkpoint", c.checkpoint_path,
                 "write a checkpoint here (at the end, every --checkpoint-every steps)");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "steps between checkpoints (0: at the end)")
      ->capture_default_str()
      ->check(whole_number<std::int64_t>());
  app.add_option("--resume", c.resume_path, "continue from this checkpoint");
  app.add_option("--stop-after", c.stop_after,
                 "stop after this many steps in all (the schedule still spans --epochs)")
      ->capture_default_str()
      ->check(whole_number<std::int64_t>());
  app.add_option("--log-json", cli.log_json, "write one JSON object per epoch and a final one");
  app.add_flag("--verify-replicas", c.verify_replicas,
               "after every step, allgather a weights checksum and fail if any rank differs");
  app.add_option("--eval-batch", c.eval_rows, "samples per evaluation pass")
      ->capture_default_str()
      ->check(whole_number<std::size_t>());
  app.add_flag("--no-progress", cli.no_progress, "no live progress bar, even on a terminal");
  try {
    app.parse(argc, argv);
    c.hidden = parse_hidden(hidden);
    c.pipeline_split = parse_pipeline_split(pipeline_split);
    const auto algorithm = collx::parse_algorithm(algo);
    if (!algorithm) throw CLI::ValidationError("--algo", "unknown algorithm \"" + algo + "\"");
    c.algorithm = *algorithm;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return {0, app.help()};  // --help
    return {2, e.what()};
  }
  cli.data.dir_given = app.count("--data") > 0;
  c.dtype = dtype == "float64" ? collx::DataType::float64 : collx::DataType::float32;
  c.device = device == "cuda" ? collx::mlp::Device::cuda : collx::mlp::Device::cpu;
  c.optimizer.kind = optimizer == "sgd" ? OptimizerKind::sgd : OptimizerKind::adamw;
  // SGD's own defaults where the user gave none (the TrainConfig defaults are AdamW's).
  if (c.optimizer.kind == OptimizerKind::sgd) {
    if (app.count("--lr") == 0) c.lr = kSgdLr;
    if (app.count("--weight-decay") == 0) c.optimizer.weight_decay = kSgdWeightDecay;
  }
  c.schedule = schedule == "linear"     ? Schedule::linear
               : schedule == "constant" ? Schedule::constant
                                        : Schedule::cosine;
  c.overlap = !no_overlap;
  c.parallel = parallel == "fsdp"       ? Parallel::fsdp
               : parallel == "pipeline" ? Parallel::pipeline
               : parallel == "tensor"   ? Parallel::tensor
                                        : Parallel::dp;
  c.pipeline_schedule =
      pipeline_schedule == "gpipe" ? PipelineSchedule::gpipe : PipelineSchedule::one_f_one_b;
  c.pipeline_input_gradient_first = pipeline_backward == "input-first";
  c.compression = compress == "bf16"       ? Compression::bf16
                  : compress == "fp16"     ? Compression::fp16
                  : compress == "powersgd" ? Compression::powersgd
                                           : Compression::none;
  return {};
}

}  // namespace collx::train
