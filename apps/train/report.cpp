#include "report.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <nlohmann/json.hpp>

#include "checksum.hpp"

namespace collx::train {

namespace {

// Where a file descriptor of process `pid` points ("/dev/pts/3", "pipe:[1234]", a path), or "".
std::string fd_target(const std::string& pid, int fd) {
  char target[256] = {};
  const std::string link = "/proc/" + pid + "/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : std::string();
}

bool is_terminal_path(const std::string& path) {
  return path.starts_with("/dev/pts/") || path.starts_with("/dev/tty");
}

// Whether process `pid` holds an open descriptor that `matches`.
bool holds_descriptor(const std::string& pid, auto matches) {
  std::error_code error;
  std::filesystem::directory_iterator it("/proc/" + pid + "/fd", error), end;
  for (; !error && it != end; it.increment(error)) {
    if (matches(fd_target(pid, std::atoi(it->path().filename().c_str())))) return true;
  }
  return false;
}

// Whether rank 0's output reaches a terminal, for any launcher and no launcher-specific variable.
// MPI launchers forward a rank's output: Open MPI gives the rank a pseudo-terminal whose master
// its parent (mpirun or orted) holds, whatever mpirun's own stdout is; MPICH's hydra proxy
// reads a pipe. Either way the parent forwards what the rank writes, so the question goes to
// the parent's stdout. A pipe the parent does not hold (`collx-train | tee log`) or a file is
// not a terminal; a terminal the parent does not forward from is the user's.
bool stdout_is_terminal() {
  const std::string mine = fd_target("self", STDOUT_FILENO);
  const std::string parent = std::to_string(::getppid());
  const bool pipe = mine.starts_with("pipe:");
  if (!pipe && !::isatty(STDOUT_FILENO)) return false;
  const bool forwarded =
      pipe ? holds_descriptor(parent, [&](const std::string& t) { return t == mine; })
           : holds_descriptor(parent, [](const std::string& t) {
               return t == "/dev/ptmx" || t == "/dev/pts/ptmx";
             });
  if (!forwarded) return !pipe;
  return is_terminal_path(fd_target(parent, STDOUT_FILENO));
}

std::string format(const char* pattern, auto... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

}  // namespace

Reporter::Reporter(bool print, bool progress, std::ofstream* json, const TrainConfig& config,
                   const DataSplit& data, int nranks)
    : print_(print), json_(json), config_(config), data_(data), nranks_(nranks) {
  progress_ = print_ && progress && stdout_is_terminal();
}

void Reporter::on_start(const TrainerBase& t) {
  epoch_start_ = std::chrono::steady_clock::now();
  stage_split_ = t.stage_split();
  if (!print_) return;
  const LrSchedule& lr = t.schedule();
  std::printf("collx-train: %d rank%s, %s, collx %s, %s\n", nranks_, nranks_ == 1 ? "" : "s",
              t.backend_description().c_str(), build_info().version.c_str(),
              mpi_library_version().c_str());
  std::printf(
      "data:      %s from %s: %zu training and %zu test samples, %zu features, %zu "
      "classes\n",
      data_.name.c_str(), data_.source.c_str(), data_.train.rows, data_.test.rows,
      data_.train.features, data_.classes);
  ModelShape model{{data_.train.features}};
  model.sizes.insert(model.sizes.end(), config_.hidden.begin(), config_.hidden.end());
  model.sizes.push_back(data_.classes);
  const std::string shape = model.to_string();
  std::printf("model:     MLP %s, ReLU, softmax cross-entropy, %zu parameters, %s\n", shape.c_str(),
              t.parameter_count(), std::string(to_string(config_.dtype)).c_str());
  const auto& o = config_.optimizer;
  std::string optimizer = o.kind == OptimizerKind::adamw
                              ? format("AdamW (betas %g, %g, eps %g)", o.beta1, o.beta2, o.eps)
                              : format("SGD (momentum %g)", o.momentum);
  std::printf(
      "optimizer: %s, lr %g = %g x %zu/%zu (linear scaling), warmup %lld steps, %s decay, "
      "weight decay %g\n",
      optimizer.c_str(), lr.peak(), config_.lr, config_.batch, config_.lr_reference_batch,
      static_cast<long long>(lr.warmup_steps), std::string(to_string(lr.schedule)).c_str(),
      o.weight_decay);
  // dp and fsdp cut each batch over the ranks; pipeline and tensor over the replicas.
  const bool per_rank = config_.parallel == Parallel::dp || config_.parallel == Parallel::fsdp;
  const int parts = per_rank ? nranks_ : config_.replicas;
  const std::size_t micro =
      config_.parallel == Parallel::pipeline ? config_.micro_batches : config_.accum;
  std::printf(
      "steps:     global batch %zu = %d %s%s x %zu%s (%zu micro-batch%s each), %zu steps "
      "per epoch, %d epochs%s\n",
      config_.batch, parts, per_rank ? "rank" : "replica", parts == 1 ? "" : "s",
      config_.batch / static_cast<std::size_t>(parts),
      config_.batch % static_cast<std::size_t>(parts) ? "+" : "", micro, micro == 1 ? "" : "es",
      t.steps_per_epoch(), config_.epochs,
      t.step() > 0 ? format(", resumed at step %lld", static_cast<long long>(t.step())).c_str()
                   : "");
  std::printf("%s\n", t.layout_description().c_str());
  const MemoryUse m = t.memory();
  const double mib = 1024.0 * 1024.0;
  std::printf(
      "memory:    rank 0 holds %.2f MiB: parameters %.2f, gradients %.2f, optimizer %.2f "
      "(model state %.2f), activations %.2f, gathered layers %.2f\n",
      static_cast<double>(m.total()) / mib, static_cast<double>(m.parameters) / mib,
      static_cast<double>(m.gradients) / mib, static_cast<double>(m.optimizer) / mib,
      static_cast<double>(m.model_state()) / mib, static_cast<double>(m.activations) / mib,
      static_cast<double>(m.working) / mib);
  std::fflush(stdout);
}

void Reporter::clear_progress() {
  if (progress_shown_) {
    std::printf("\r\033[K");
    progress_shown_ = false;
  }
}

void Reporter::on_step(const TrainerBase& t, const StepResult& step) {
  running_loss_sum_ += step.loss_sum;
  running_samples_ += step.samples;
  if (!progress_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool epoch_end = t.step_in_epoch() == t.steps_per_epoch();
  if (!epoch_end && now - last_progress_ < std::chrono::milliseconds(100)) return;
  last_progress_ = now;
  constexpr int kWidth = 30;
  const double done =
      static_cast<double>(t.step_in_epoch()) / static_cast<double>(t.steps_per_epoch());
  const int filled = static_cast<int>(done * kWidth);
  const double elapsed = std::chrono::duration<double>(now - epoch_start_).count();
  std::printf("\repoch %lld/%d [%s%s] %zu/%zu  loss %.4f  %.0f samples/s\033[K",
              static_cast<long long>(t.epoch() + 1), config_.epochs,
              std::string(static_cast<std::size_t>(filled), '#').c_str(),
              std::string(static_cast<std::size_t>(kWidth - filled), '.').c_str(),
              t.step_in_epoch(), t.steps_per_epoch(),
              running_loss_sum_ / static_cast<double>(running_samples_),
              elapsed > 0 ? static_cast<double>(running_samples_) / elapsed : 0.0);
  std::fflush(stdout);
  progress_shown_ = true;
}

void Reporter::on_epoch(const EpochReport& r) {
  running_loss_sum_ = 0;
  running_samples_ = 0;
  epoch_start_ = std::chrono::steady_clock::now();
  if (print_) {
    clear_progress();
    std::printf(
        "epoch %3lld/%d  train_loss %.4f  test_loss %.4f  test_acc %.4f  samples/s %7.0f  "
        "comm_exposed %4.1f%%  compute %.2f s  comm %.3f s  %.2f MB/step%s  wall %.1f s\n",
        static_cast<long long>(r.epoch), r.epochs, r.train_loss, r.test.loss, r.test.accuracy,
        r.samples_per_s, 100.0 * r.comm_exposed_fraction, r.compute_seconds, r.comm_seconds,
        r.comm_bytes_per_step / 1e6,
        config_.parallel == Parallel::pipeline
            ? format("  bubble %.1f%% (of it transfer %.1f%%; replayed %.1f%%, formula %.1f%%, "
                     "not running %.1f%%)",
                     100.0 * r.bubble_fraction, 100.0 * r.bubble_transfer_fraction,
                     100.0 * r.bubble_replayed_fraction, 100.0 * r.bubble_formula_fraction,
                     100.0 * r.not_running_fraction)
                  .c_str()
            : "",
        r.wall_seconds);
    std::fflush(stdout);
  }
  if (json_) {
    const nlohmann::json line = {{"epoch", r.epoch},
                                 {"train_loss", r.train_loss},
                                 {"test_loss", r.test.loss},
                                 {"test_accuracy", r.test.accuracy},
                                 {"samples_per_s", r.samples_per_s},
                                 {"comm_exposed_fraction", r.comm_exposed_fraction},
                                 {"compute_s", r.compute_seconds},
                                 {"forward_s", r.forward_seconds},
                                 {"backward_s", r.backward_seconds},
                                 {"update_s", r.update_seconds},
                                 {"comm_s", r.comm_seconds},
                                 {"comm_bytes_per_step", r.comm_bytes_per_step},
                                 {"bubble_fraction", r.bubble_fraction},
                                 {"bubble_transfer_fraction", r.bubble_transfer_fraction},
                                 {"bubble_replayed_fraction", r.bubble_replayed_fraction},
                                 {"bubble_formula_fraction", r.bubble_formula_fraction},
                                 {"not_running_fraction", r.not_running_fraction},
                                 {"memory_model_state_max", r.memory_max.model_state()},
                                 {"memory_total_max", r.memory_max.total()},
                                 {"train_s", r.train_seconds},
                                 {"eval_s", r.eval_seconds},
                                 {"wall_s", r.wall_seconds}};
    nlohmann::json out = line;
    if (!r.pipeline_ranks.empty()) {
      // Per rank (stage), summed over the epoch's steps: compute in thread CPU time, waits in
      // wall time (StepResult::pipeline_parts).
      constexpr std::size_t kParts = kPasses + 1;
      nlohmann::json ranks = nlohmann::json::array();
      for (std::size_t i = 0; i + kParts <= r.pipeline_ranks.size(); i += kParts) {
        const double* p = &r.pipeline_ranks[i];
        ranks.push_back({{"rank", i / kParts},
                         {"forward_cpu_s", p[kForwardCpu]},
                         {"backward_cpu_s", p[kBackwardCpu]},
                         {"backward_input_cpu_s", p[kBackwardInputCpu]},
                         {"wait_input_s", p[kWaitInput]},
                         {"wait_gradient_s", p[kWaitGradient]},
                         {"wait_send_s", p[kWaitSend]},
                         {"wait_end_s", p[kWaitEnd]},
                         {"wait_transfer_s", p[kWaitTransfer]},
                         {"passes", p[kPasses]}});
      }
      out["pipeline_ranks"] = ranks;
    }
    if (!stage_split_.empty()) out["pipeline_split"] = stage_split_;
    *json_ << out.dump() << '\n' << std::flush;
  }
}

void Reporter::on_checkpoint(const std::string& path, std::int64_t step) {
  if (!print_) return;
  clear_progress();
  std::printf("checkpoint: step %lld written to %s\n", static_cast<long long>(step), path.c_str());
  std::fflush(stdout);
}

void Reporter::on_final(const FinalReport& r) {
  if (print_) {
    clear_progress();
    std::printf(
        "final: test_acc %.4f  test_loss %.4f  (%zu/%zu correct)  steps %lld%s  "
        "weights_checksum %s (same on all %d ranks)  wall %.1f s\n",
        r.test.accuracy, r.test.loss, r.test.correct, r.test.samples,
        static_cast<long long>(r.steps), r.stopped_early ? " (stopped early)" : "",
        checksum_hex(r.checksum).c_str(), nranks_, r.wall_seconds);
    std::fflush(stdout);
  }
  if (json_) {
    const nlohmann::json line = {{"final", true},
                                 {"test_accuracy", r.test.accuracy},
                                 {"test_loss", r.test.loss},
                                 {"steps", r.steps},
                                 {"stopped_early", r.stopped_early},
                                 {"weights_checksum", checksum_hex(r.checksum)},
                                 {"wall_s", r.wall_seconds}};
    *json_ << line.dump() << '\n' << std::flush;
  }
}

}  // namespace collx::train
