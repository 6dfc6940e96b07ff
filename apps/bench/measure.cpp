#include "measure.hpp"

#include <mpi.h>

#include <algorithm>
#include <map>
#include <string>

#include "bench_buffers.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace collx::bench {

namespace {

// One size's medians: every row's, the mpi and memcpy rows' (0 without them), the fastest collx
// algorithm's (automatic when no algorithm row ran), and --overlap's.
struct SizeTimes {
  std::map<std::string, double> seconds;    // by row key
  std::map<std::string, FirstCalls> first;  // by row key
  double mpi = 0;
  double memcpy = 0;
  Algorithm fastest = Algorithm::automatic;
  bool overlap = false;
  Overlap overlapped;
};

SizeTimes time_size(Run& run) {
  SizeTimes t;
  const std::size_t bytes = run.current_bytes;
  const RowTimes times =
      time_rows(run.table, run.s.warmup, run.rounds, run.per_round, [&](const Row& row) {
        if (!row.column.collx() || row.column.algorithm != Algorithm::automatic) {
          return false;
        }
        collx::Communicator& comm = row.runner->comm ? *row.runner->comm : run.comm;
        bool trying = false;
        (void)comm.auto_choice(run.plan.collective, bytes, run.plan.type, run.plan.op, &trying);
        return trying;
      });
  t.first = times.first;
  double fastest_seconds = 0;
  for (const auto& row : run.table) {
    const double seconds = median(times.samples.at(row.key));
    t.seconds[row.key] = seconds;
    if (row.column.mpi && row.column.name == "mpi") t.mpi = seconds;
    if (row.column.memcpy) t.memcpy = seconds;
    if (row.column.collx() && row.column.algorithm != Algorithm::automatic &&
        (fastest_seconds == 0 || seconds < fastest_seconds)) {
      fastest_seconds = seconds;
      t.fastest = row.column.algorithm;
    }
  }
  // --overlap: start, compute, wait; the share of the call's own time that the computation hid
  // = (call + compute - total) / call.
  t.overlap = run.s.overlap_ms > 0 && run.bench().supports_overlap();
  if (t.overlap) t.overlapped = time_overlap(run.table, run.rounds, run.compute);
  return t;
}

// Whether this size is checked: -c 1, and its buffers are the rank's own (--smpi-shared).
bool checked(const Run& run) {
  return run.s.check != 0 && !collx::bench::Buffer::shared_at(run.current_bytes);
}

// A row's wrong elements over all ranks (its check's call, like the timed ones, on the next set
// of buffers), -1 without -c.
long long check_row(const Run& run, const Row& row) {
  if (!checked(run)) return -1;
  auto& bench = *row.runner->bench;
  bench.next_buffers();
  unsigned long long mine =
      row.column.memcpy ? bench.check_memcpy() : bench.check(row.column.mpi, row.column.algorithm);
  unsigned long long all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  return static_cast<long long>(all);
}

Measured measure_row(const Run& run, const Row& row, const SizeTimes& t, std::size_t bytes,
                     std::size_t count) {
  const Column& c = row.column;
  const auto& bench = run.bench();
  Measured m;
  m.bytes = bytes;
  m.count = count;
  m.seconds = t.seconds.at(row.key);
  m.first = t.first.at(row.key);
  m.wrong = check_row(run, row);
  m.checked = checked(run);
  m.memcpy = c.memcpy;
  // The memcpy row's bandwidth is its copy's: the bytes it copies per second (both columns).
  const double moved = static_cast<double>(c.memcpy ? bench.memcpy_bytes() : bytes);
  m.algbw = m.seconds > 0 ? moved / m.seconds / 1e9 : 0;
  m.busbw = m.algbw * (c.memcpy ? 1.0 : bench.bus_factor(run.nranks));
  m.has_vs_mpi = t.mpi > 0;
  m.vs_mpi = t.mpi > 0 && m.seconds > 0 ? t.mpi / m.seconds : 0;
  // Time over the memcpy row's: how far from touching the result once (none without bytes).
  m.has_x_memcpy = t.memcpy > 0 && bench.memcpy_bytes() > 0;
  m.x_memcpy = m.has_x_memcpy ? m.seconds / t.memcpy : 0;
  m.label = c.name;
  if (c.collx() && c.algorithm == Algorithm::automatic) {
    // The shared-memory rows count for host buffers on a communicator with a segment.
    // What the timed calls ran: the autotuner's choice where it tried candidates (the warm-up
    // ran its trials), else the table's.
    collx::Communicator& comm = row.runner->comm ? *row.runner->comm : run.comm;
    const bool shared = !run.plan.device && comm.shared_memory();
    m.selected = std::string(collx::to_string(
        run.plan.device
            ? collx::auto_algorithm(run.plan.collective, bytes, run.nranks, shared,
                                    comm.node_layout())
            : comm.auto_choice(run.plan.collective, bytes, run.plan.type, run.plan.op)));
    m.label += "(" + m.selected + ")";
  }
  if (c.collx() && !row.runner->transport.empty()) m.label += "@" + row.runner->transport;
  if (t.overlap && !c.memcpy) {
    m.overlap = true;
    m.compute_seconds = t.overlapped.compute_seconds;
    m.total = median(t.overlapped.samples.at(row.key));
    m.hidden = std::clamp((m.seconds + m.compute_seconds - m.total) / m.seconds, 0.0, 1.0);
  }
  return m;
}

}  // namespace

unsigned long long measure_size(Run& run, std::size_t size, nlohmann::json& json_rows,
                                std::vector<std::pair<std::size_t, Algorithm>>& fastest) {
  const auto& bench = run.bench();
  const std::size_t count = bench.count_for(size, collx::size_of(run.plan.type), run.nranks);
  for (auto& r : run.runners)
    r.bench->prepare(run.params, count);
  const std::size_t bytes = bench.bytes_for(count, run.nranks);  // nccl-tests' size column
  run.current_bytes = bytes;
  const SizeTimes t = time_size(run);
  if (t.fastest != Algorithm::automatic) fastest.emplace_back(bytes, t.fastest);
  unsigned long long wrong = 0;
  for (const auto& row : run.table) {
    const Measured m = measure_row(run, row, t, bytes, count);
    if (m.wrong > 0) wrong += static_cast<unsigned long long>(m.wrong);
    if (run.rank == 0) print_row(m, run.s, bench, run.algo_width);
    nlohmann::json json_row = to_json(m, row.key, run.s, bench);
    if (run.s.cold) json_row["buffer_sets"] = row.runner->bench->buffer_sets();
    if (row.column.collx() && !row.runner->transport.empty()) {
      json_row["transport"] = row.runner->transport;
    }
    json_rows.push_back(json_row);
  }
  return wrong;
}

}  // namespace collx::bench
