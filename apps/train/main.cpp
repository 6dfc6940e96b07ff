// collx-train: an MLP trainer on collx's collectives (--parallel dp, fsdp, pipeline, tensor).
// Launch it with mpirun or srun; rank 0 prints, the other ranks print only errors.
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "dataset.hpp"
#include "report.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;

// An error that every rank knows about: each prints it, all exit with status 1, no MPI_Abort.
struct AgreedError {
  std::string message;
};

// Collective: when some rank has an error, every rank gets the message of the lowest such rank.
void agree(collx::Communicator& comm, const std::string& local_error) {
  const int nranks = comm.size();
  int first = local_error.empty() ? nranks : comm.rank();
  comm.allreduce(collx::in_place, &first, 1, collx::DataType::int32, collx::ReduceOp::min);
  if (first == nranks) return;
  std::uint64_t length = local_error.size();
  comm.broadcast(&length, 1, collx::DataType::uint64, first);
  std::string message = local_error;
  message.resize(length);
  comm.broadcast(message.data(), length, collx::DataType::uint8, first);
  throw AgreedError{first == comm.rank() || nranks == 1
                        ? message
                        : message + " (reported by rank " + std::to_string(first) + ")"};
}

// The widest hidden layer --hidden accepts: far beyond what trains on a CPU, far below a width
// whose allocation would fail (or silently swap) before the first step.
constexpr unsigned long long kMaxHiddenWidth = 1ull << 16;

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
      value = kMaxHiddenWidth + 1;
    }
    if (!digits || value == 0) {
      fail("is not a comma-separated list of positive layer widths, e.g. 512,256");
    }
    if (value > kMaxHiddenWidth) {
      fail("has a layer wider than " + std::to_string(kMaxHiddenWidth) + " units");
    }
    sizes.push_back(value);
  }
  if (text.back() == ',') fail("ends with a comma");
  return sizes;
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

struct Cli {
  TrainConfig config;
  DataOptions data;
  std::string log_json;
  bool no_progress = false;
};

// Parses argv into `cli`; returns an exit status when the program should stop (help, error).
std::optional<int> parse(int argc, char** argv, int rank, Cli& cli) {
  CLI::App app{
      "collx-train: MLP training on collx collectives, data, fully sharded, pipeline or tensor "
      "parallel (Fashion-MNIST by default; launch with mpirun or srun)"};
  auto& c = cli.config;
  std::string hidden = "512,256", dtype = "float32", device = "cpu", optimizer = "adamw";
  std::string schedule = "cosine", algo = "auto", parallel = "dp", pipeline_schedule = "1f1b";
  std::string compress = "none";
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
  app.add_option("--synthetic-train", cli.data.synthetic_train, "synthetic training samples")
      ->capture_default_str();
  app.add_option("--synthetic-test", cli.data.synthetic_test, "synthetic test samples")
      ->capture_default_str();
  app.add_option("--train-limit", cli.data.train_limit,
                 "train on the first N samples only (0: all)")
      ->capture_default_str();
  app.add_option("--parallel", parallel,
                 "strategy: dp (data parallel), fsdp (fully sharded, ZeRO-3), pipeline (stages "
                 "on consecutive ranks, micro-batches), tensor (Megatron column/row split)")
      ->capture_default_str()
      ->check(CLI::IsMember({"dp", "fsdp", "pipeline", "tensor"}));
  app.add_option("--replicas", c.replicas,
                 "pipeline and tensor: data-parallel replicas of the model, each on ranks / "
                 "replicas consecutive ranks (4 ranks, --replicas 2: 2 replicas x 2 stages)")
      ->capture_default_str();
  app.add_option("--pipeline-schedule", pipeline_schedule, "gpipe or 1f1b")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpipe", "1f1b"}));
  app.add_option("--micro-batches", c.micro_batches,
                 "pipeline: micro-batches per step in each replica")
      ->capture_default_str();
  app.add_option("--compress", compress,
                 "dp gradient compression hook: none, bf16, fp16 (16-bit allreduce) or powersgd")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "bf16", "fp16", "powersgd"}));
  app.add_option("--powersgd-rank", c.powersgd_rank, "rank of PowerSGD's factors")
      ->capture_default_str();
  app.add_option("--powersgd-warmup", c.powersgd_warmup,
                 "steps of plain allreduce before PowerSGD starts")
      ->capture_default_str();
  app.add_option("--hidden", hidden, "hidden layer widths")->capture_default_str();
  app.add_option("--epochs", c.epochs, "passes over the training set")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--batch", c.batch, "global batch: samples per optimizer step over all ranks")
      ->capture_default_str();
  app.add_option("--accum", c.accum, "micro-batches per step (gradient accumulation)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--optimizer", optimizer, "adamw or sgd (with momentum)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--lr", c.lr,
                 "learning rate at --lr-batch samples per step (default for --optimizer sgd: " +
                     format_number(kSgdLr) + ")")
      ->capture_default_str();
  app.add_option("--lr-batch", c.lr_reference_batch,
                 "reference batch of --lr: the rate used is lr * batch / lr-batch")
      ->capture_default_str();
  app.add_option("--momentum", c.optimizer.momentum, "sgd momentum")->capture_default_str();
  app.add_option("--beta1", c.optimizer.beta1, "adamw beta1")->capture_default_str();
  app.add_option("--beta2", c.optimizer.beta2, "adamw beta2")->capture_default_str();
  app.add_option("--eps", c.optimizer.eps, "adamw epsilon")->capture_default_str();
  app.add_option("--weight-decay", c.optimizer.weight_decay,
                 "weight decay of the weights: decoupled for adamw, L2 for sgd (default for "
                 "--optimizer sgd: " +
                     format_number(kSgdWeightDecay) + ")")
      ->capture_default_str();
  app.add_option("--warmup-epochs", c.warmup_epochs, "linear warmup length (fractions allowed)")
      ->capture_default_str();
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
  app.add_option("--seed", c.seed, "initialisation and data order")->capture_default_str();
  app.add_option("--bucket-mb", c.bucket_mb, "gradient bucket size in MiB")->capture_default_str();
  app.add_option("--first-bucket-mb", c.first_bucket_mb,
                 "size of the first bucket in MiB (small, so communication starts early)")
      ->capture_default_str();
  bool no_overlap = false;
  app.add_flag("--no-overlap", no_overlap,
               "reduce the gradients after the backward pass instead of during it");
  app.add_option("--algo", algo,
                 "gradient allreduce algorithm: auto, ring, recursive_doubling, rabenseifner, "
                 "binomial_tree, double_binary_tree (--shard: reduce_scatter's, ring or "
                 "recursive_halving)")
      ->capture_default_str();
  app.add_flag("--shard", c.shard,
               "ZeRO-1: reduce_scatter the gradients, update this rank's shard, allgather");
  app.add_option("--checkpoint", c.checkpoint_path,
                 "write a checkpoint here (at the end, every --checkpoint-every steps)");
  app.add_option("--checkpoint-every", c.checkpoint_every,
                 "steps between checkpoints (0: at the end)")
      ->capture_default_str();
  app.add_option("--resume", c.resume_path, "continue from this checkpoint");
  app.add_option("--stop-after", c.stop_after,
                 "stop after this many steps in all (the schedule still spans --epochs)")
      ->capture_default_str();
  app.add_option("--log-json", cli.log_json, "write one JSON object per epoch and a final one");
  app.add_flag("--verify-replicas", c.verify_replicas,
               "after every step, allgather a weights checksum and fail if any rank differs");
  app.add_option("--eval-batch", c.eval_rows, "samples per evaluation pass")->capture_default_str();
  app.add_flag("--no-progress", cli.no_progress, "no live progress bar, even on a terminal");
  try {
    app.parse(argc, argv);
    c.hidden = parse_hidden(hidden);
    const auto algorithm = collx::parse_algorithm(algo);
    if (!algorithm) throw CLI::ValidationError("--algo", "unknown algorithm \"" + algo + "\"");
    c.algorithm = *algorithm;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help
      if (rank == 0) app.exit(e);
      return 0;
    }
    // Every rank says it: a user reading any rank's output sees why.
    std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, e.what());
    if (rank == 0) std::fprintf(stderr, "Run with --help for the options.\n");
    return 2;
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
  c.compression = compress == "bf16"       ? Compression::bf16
                  : compress == "fp16"     ? Compression::fp16
                  : compress == "powersgd" ? Compression::powersgd
                                           : Compression::none;
  return std::nullopt;
}

int run(int argc, char** argv, std::chrono::steady_clock::time_point start) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Cli cli;
  if (auto status = parse(argc, argv, rank, cli)) return *status;

  collx::Communicator comm(MPI_COMM_WORLD);
  try {
    std::string error;
    try {
      validate(cli.config, comm.size());
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    agree(comm, error);
    DataSplit data;
    std::string notice;
    try {
      data = load_data(cli.data, &notice);
    } catch (const std::exception& e) {
      error = std::string("cannot load the data set: ") + e.what();
    }
    agree(comm, error);
    if (rank == 0 && !notice.empty()) std::fprintf(stderr, "collx-train: %s\n", notice.c_str());

    std::ofstream json;
    if (rank == 0 && !cli.log_json.empty()) {
      json.open(cli.log_json, std::ios::trunc);
      if (!json) error = "cannot write --log-json " + cli.log_json;
    }
    // Rank 0 writes the checkpoints: find out now, not after the training, that it cannot.
    if (rank == 0 && error.empty() && !cli.config.checkpoint_path.empty()) {
      const std::filesystem::path dir =
          std::filesystem::absolute(cli.config.checkpoint_path).parent_path();
      if (::access(dir.c_str(), W_OK) != 0) {
        error = "--checkpoint " + cli.config.checkpoint_path + ": cannot write in " + dir.string() +
                ": " + std::strerror(errno);
      }
    }
    agree(comm, error);

    Reporter reporter(rank == 0, !cli.no_progress, json.is_open() ? &json : nullptr, cli.config,
                      data, comm.size());
    // Errors every rank meets together (a bad checkpoint, an unavailable device) come back as
    // exceptions on every rank; others (a broken rank) take MPI_Abort in main().
    try {
      run_training(cli.config, comm, data, reporter, start);
    } catch (const CheckpointError& e) {
      throw AgreedError{e.what()};
    } catch (const std::invalid_argument& e) {
      throw AgreedError{e.what()};
    }
    return 0;
  } catch (const AgreedError& e) {
    std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, e.message.c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int status = 0;
  try {
    status = run(argc, argv, start);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, e.what());
    // The other ranks may be waiting in a collective for this one: take them down too.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
