// Timing: a row's warm-up (auto's: and the autotuner's trials), then rounds of timed calls
// interleaved across the rows, the slowest rank's time; --overlap's start, compute, wait.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "rows.hpp"

namespace collx::bench {

// The middle value of `v` (the mean of the middle two for an even count).
double median(std::vector<double> v);

// Fixed work (a dot product over a cache-resident array) calibrated to take about `ms`
// milliseconds on an idle core. Fixed work, not fixed time: a progress thread that steals
// the core makes it take longer, and that cost counts.
class Computation {
 public:
  explicit Computation(double ms) : data_(64 * 1024, 1.0f) {
    if (ms <= 0) return;
    const int trial = 200;
    const double t0 = MPI_Wtime();
    run(trial);
    const double per = (MPI_Wtime() - t0) / trial;
    passes_ = std::max(1, static_cast<int>(ms * 1e-3 / per));
  }
  void operator()() { run(passes_); }

 private:
  void run(int passes) {
    float acc = 0;
    for (int p = 0; p < passes; ++p) {
      for (float v : data_)
        acc += v * 0.5f;
    }
    sink_ = acc;
  }
  std::vector<float> data_;
  int passes_ = 0;
  volatile float sink_ = 0;
};

// A row's first calls at a size: the warm-up and, for auto, the autotuner's trials (what a new
// user's first calls cost before the timed ones).
struct FirstCalls {
  int calls = 0;
  double seconds = 0;  // the slowest rank's, all of them together
};

struct RowTimes {
  std::map<std::string, std::vector<double>> samples;  // by row key: per round
  std::map<std::string, FirstCalls> first;             // by row key
};

// Warm-up calls, then `rounds` rounds of `per_round` timed calls of every row: a round's time per
// row (the slowest rank's mean per call), by row key.
RowTimes time_rows(const std::vector<Row>& table, int warmup, int rounds, int per_round,
                   const std::function<bool(const Row&)>& trying);

// --overlap: start, compute, wait, `rounds` times per row; the computation alone too.
struct Overlap {
  std::map<std::string, std::vector<double>> samples;  // start to wait, by row key
  double compute_seconds = 0;
};
Overlap time_overlap(const std::vector<Row>& table, int rounds, Computation& compute);

}  // namespace collx::bench
