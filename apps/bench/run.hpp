// The run being measured, shared by the measuring and the reporting.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "bench_collective.hpp"
#include "cli.hpp"
#include "collx/collx.hpp"
#include "plan.hpp"
#include "rows.hpp"
#include "timing.hpp"

namespace collx::bench {

// One run, for the functions that measure and report it (measure.hpp, report.hpp): what it
// measures, on which communicators, and the rows.
struct Run {
  const Settings& s;
  const Plan& plan;
  int rank;
  int nranks;
  collx::Communicator& comm;
  std::vector<Runner>& runners;
  std::vector<Row> table;
  collx::bench::Params params;
  Computation compute;
  std::string command;
  std::string mpi_library;
  std::string transport_line;  // the transports of the rows ("mpi", "mpi,ucx")
  int algo_width;
  int per_round;  // timed calls per round, and rounds
  int rounds;
  std::size_t current_bytes = 0;  // the size being measured (the size column's bytes)
  // The cache line round trip between two ranks' cores on rank 0's node (core_probe.hpp), before
  // the first size and after the last.
  std::optional<double> round_trip_start_ns = std::nullopt;
  std::optional<double> round_trip_end_ns = std::nullopt;

  const collx::bench::CollectiveBench& bench() const { return *runners.front().bench; }
};

}  // namespace collx::bench
