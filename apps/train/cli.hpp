// collx-train's command line: every flag, its default and its check, into a TrainConfig and the
// data options. No MPI and no printing here: main() decides who prints what, and the tests
// parse (and fuzz) command lines in-process.
#pragma once

#include <optional>
#include <string>

#include "dataset.hpp"
#include "trainer.hpp"

namespace collx::train {

struct Cli {
  TrainConfig config;
  DataOptions data;
  std::string log_json;
  bool no_progress = false;
};

struct ParseOutcome {
  // Set when the program should stop: 0 after --help (message: the help text), 2 on a bad
  // command line (message: what is wrong, naming the flag).
  std::optional<int> exit_status;
  std::string message;
};

ParseOutcome parse_command_line(int argc, const char* const* argv, Cli& cli);

}  // namespace collx::train
