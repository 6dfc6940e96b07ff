// The report: what collx-bench prints (rank 0; the header, a line per row and size in nccl-tests'
// columns) and --json's document.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "bench_collective.hpp"
#include "cli.hpp"
#include "run.hpp"
#include "timing.hpp"

namespace collx::bench {

// One row's figures at one size, for the table and the JSON.
struct Measured {
  std::size_t bytes = 0;  // nccl-tests' size column
  std::size_t count = 0;
  std::string label;     // "auto(ring)@ucx"
  std::string selected;  // auto's choice, "" for the other rows
  double seconds = 0;
  double algbw = 0;
  double busbw = 0;
  long long wrong = -1;
  bool checked = false;
  bool memcpy = false;  // the memcpy row
  double vs_mpi = 0;
  bool has_vs_mpi = false;
  double x_memcpy = 0;
  bool has_x_memcpy = false;
  bool overlap = false;  // --overlap figures
  double total = 0;
  double hidden = 0;
  double compute_seconds = 0;
  FirstCalls first;  // the warm-up's calls (auto: and its trials)
};

// A row's line in the table (rank 0 prints it), and for auto what its first calls cost.
void print_row(const Measured& m, const Settings& s, const collx::bench::CollectiveBench& bench,
               int algo_width);

// A row's object in --json's rows.
nlohmann::json to_json(const Measured& m, const std::string& key, const Settings& s,
                       const collx::bench::CollectiveBench& bench);

// The header (rank 0 prints it): the run, the MPI library, the memory and transports, --cold's
// cache, and the table's column names.
void print_header(const Run& run);

// --json's document; false where it cannot be written.
bool write_json(const Run& run, const nlohmann::json& rows);

}  // namespace collx::bench
