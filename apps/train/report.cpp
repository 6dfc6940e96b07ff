#include "report.hpp"

#include <unistd.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "checksum.hpp"

namespace collx::train {

namespace {

// Open MPI hands every rank a pseudo-terminal as stdout, whatever mpirun's own stdout is (to
// get line-buffered output), so isatty() alone says "terminal" even for `mpirun ... > log`.
// Under Open MPI, the launcher that forwards rank 0's output (its parent, mpirun or orted)
// is asked instead: is its stdout a terminal?
bool stdout_is_terminal() {
  if (!::isatty(STDOUT_FILENO)) return false;
  if (!std::getenv("OMPI_COMM_WORLD_SIZE")) return true;
  char target[256] = {};
  const std::string link = "/proc/" + std::to_string(::getppid()) + "/fd/1";
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  const std::string path(target, static_cast<std::size_t>(n));
  return path.starts_with("/dev/pts/") || path.starts_with("/dev/tty");
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
  if (!print_) return;
  const LrSchedule& lr = t.schedule();
  const auto& buckets = t.buckets();
  const std::size_t per_rank = config_.batch / static_cast<std::size_t>(nranks_);
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
  std::printf(
      "steps:     global batch %zu = %d rank%s x %zu%s (%zu micro-batch%s each), %zu steps "
      "per epoch, %d epochs%s\n",
      config_.batch, nranks_, nranks_ == 1 ? "" : "s", per_rank,
      config_.batch % static_cast<std::size_t>(nranks_) ? "+" : "", config_.accum,
      config_.accum == 1 ? "" : "es", t.steps_per_epoch(), config_.epochs,
      t.step() > 0 ? format(", resumed at step %lld", static_cast<long long>(t.step())).c_str()
                   : "");
  const double mib = 1024.0 * 1024.0;
  const double first_mib =
      static_cast<double>(buckets.front().size() * size_of(config_.dtype)) / mib;
  const std::string bucket_text = buckets.size() == 1
                                      ? format("1 bucket of %.2f MiB", first_mib)
                                      : format("%zu buckets (%.2f MiB first, then up to %g MiB)",
                                               buckets.size(), first_mib, config_.bucket_mb);
  std::printf(
      "gradients: %s, %s, %s algorithm, %s\n", bucket_text.c_str(),
      config_.shard ? "reduce_scatter + sharded update + allgather (ZeRO-1)" : "allreduce sum",
      std::string(config_.algorithm == Algorithm::automatic ? "auto" : to_string(config_.algorithm))
          .c_str(),
      config_.overlap ? "overlapped with the backward pass" : "after the backward pass");
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
        "comm_exposed %4.1f%%  compute %.2f s  comm %.3f s  wall %.1f s\n",
        static_cast<long long>(r.epoch), r.epochs, r.train_loss, r.test.loss, r.test.accuracy,
        r.samples_per_s, 100.0 * r.comm_exposed_fraction, r.compute_seconds, r.comm_seconds,
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
                                 {"train_s", r.train_seconds},
                                 {"eval_s", r.eval_seconds},
                                 {"wall_s", r.wall_seconds}};
    *json_ << line.dump() << '\n' << std::flush;
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
