// What collx-train prints (rank 0 only): a header, a live progress bar when stdout is a
// terminal, one line per epoch, the final summary; and the --log-json file (one JSON object per
// line: one per epoch, then the final one).
#pragma once

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "trainer.hpp"

namespace collx::train {

class Reporter final : public TrainObserver {
 public:
  // print: this rank prints (rank 0); progress: a live bar when stdout is a terminal; json: the
  // --log-json stream (rank 0), or null.
  Reporter(bool print, bool progress, std::ofstream* json, const TrainConfig& config,
           const DataSplit& data, int nranks);

  void on_start(const TrainerBase& trainer) override;
  void on_step(const TrainerBase& trainer, const StepResult& step) override;
  void on_epoch(const EpochReport& report) override;
  void on_checkpoint(const std::string& path, std::int64_t step) override;
  void on_final(const FinalReport& report) override;

 private:
  void clear_progress();

  bool print_;
  std::ofstream* json_;
  const TrainConfig& config_;
  const DataSplit& data_;
  int nranks_;
  bool progress_ = false;  // stdout is a terminal
  bool progress_shown_ = false;
  std::chrono::steady_clock::time_point last_progress_{};
  std::chrono::steady_clock::time_point epoch_start_{};
  double running_loss_sum_ = 0;
  std::size_t running_samples_ = 0;
  std::string stage_split_;  // TrainerBase::stage_split(), into --log-json
};

}  // namespace collx::train
