#include "timing.hpp"

#include <numeric>
#include <random>

namespace collx::bench {

namespace {

// One call of a row. Every call first moves to the next set of buffers (--cold; a no-op with
// one set).
void call_once(const Row& row) {
  auto& b = *row.runner->bench;
  b.next_buffers();
  if (row.column.memcpy) {
    b.run_memcpy();
  } else if (row.column.mpi) {
    b.run_mpi();
  } else {
    b.run(row.column.algorithm);
  }
}

// The most calls a row's warm-up adds for the autotuner's wait and trials (policy/autotune.hpp:
// up to 5 candidates of 32 calls each, a wait of twice that, a confirmation round of two): the
// timed calls come after them, and what they cost is reported apart (first_calls).
constexpr int kMaxTrialCalls = 1024;

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

RowTimes time_rows(const std::vector<Row>& table, int warmup, int rounds, int per_round,
                   const std::function<bool(const Row&)>& trying) {
  RowTimes times;
  for (const auto& row : table) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    FirstCalls& first = times.first[row.key];
    for (int i = 0; i < warmup; ++i, ++first.calls)
      call_once(row);
    // auto's rows: the autotuner's trials (COLLX_AUTOTUNE) belong to the warm-up, not to the
    // timed calls. Every rank leaves this loop at the same call (the trials end together).
    for (int i = 0; i < kMaxTrialCalls && trying(row); ++i, ++first.calls)
      call_once(row);
    first.seconds = MPI_Wtime() - t0;
    MPI_Allreduce(MPI_IN_PLACE, &first.seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  std::map<std::string, std::vector<double>>& samples = times.samples;
  for (int round = 0; round < rounds; ++round) {
    // Each round runs the rows in another order (the same on every rank: a fixed seed per
    // round), so no row always follows the same one: a slow row leaves the caches cold for
    // whichever row comes next.
    std::vector<std::size_t> order(table.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    if (round > 0) std::shuffle(order.begin(), order.end(), std::mt19937(round));
    for (std::size_t k : order) {
      const auto& row = table[k];
      // One untimed call first: the previous row left the caches and MPI's queues in its own
      // state, and that switch is not part of this row's time.
      call_once(row);
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < per_round; ++i)
        call_once(row);
      double seconds = (MPI_Wtime() - t0) / per_round;
      // The slowest rank's time is the collective's time.
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      samples[row.key].push_back(seconds);
    }
  }
  return times;
}

Overlap time_overlap(const std::vector<Row>& table, int rounds, Computation& compute) {
  Overlap result;
  std::vector<double> alone;
  for (int round = 0; round < rounds; ++round) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    compute();
    alone.push_back(MPI_Wtime() - t0);
    for (const auto& row : table) {
      if (row.column.memcpy) continue;  // no nonblocking form
      row.runner->bench->next_buffers();
      MPI_Barrier(MPI_COMM_WORLD);
      const double t1 = MPI_Wtime();
      if (row.column.mpi) {
        MPI_Request request;
        row.runner->bench->start_mpi(&request);
        compute();
        MPI_Wait(&request, MPI_STATUS_IGNORE);
      } else {
        collx::Request request = row.runner->bench->start(row.column.algorithm);
        compute();
        request.wait();
      }
      double seconds = MPI_Wtime() - t1;
      MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      result.samples[row.key].push_back(seconds);
    }
  }
  result.compute_seconds = median(alone);
  MPI_Allreduce(MPI_IN_PLACE, &result.compute_seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return result;
}

}  // namespace collx::bench
