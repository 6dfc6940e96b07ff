// collx-bench's command line: its flags, their defaults and the checks CLI11 makes on each as it
// parses (what needs more than one flag, or more than the text, is the plan's: plan.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>

namespace collx::bench {

// The command line's values as given.
struct Settings {
  std::string collective_name;
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  std::size_t factor = 2;
  std::string type = "float32";
  std::string op = "sum";
  std::string algos = "auto,mpi";
  int iters = 20;
  int warmup = 5;
  int rounds = 5;
  int check = 1;
  int root = 0;
  bool in_place = false;
  std::string json_path;
  double overlap_ms = 0;
  std::string segment;
  int depth = 0;
  std::string tune_path;
  std::string memory = "host";
  std::string transports;
  bool cold = false;
  int offset = 0;
  std::string llc;
  std::string smpi_shared;
  int smpi_reduce_gbps = 0;
};

// collx-bench's command line.
void add_options(CLI::App& app, Settings& s);

// The command line as given, for the header and the JSON.
std::string command_line(int argc, char** argv);

}  // namespace collx::bench
