// collx-train's numeric flags fed hostile values (negative, zero, huge, NaN, infinite, not a
// number, empty, overflowing): each command line is parsed, validated, and where accepted
// trained for two steps in this process. Every case ends with an error that names the flag, or
// with a run that finishes; none crashes, hangs (the ctest timeout) or allocates without bound.
// Runs under mpirun -np 1 (the training runs over MPI_COMM_SELF).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.hpp"
#include "cli.hpp"
#include "collx/collx.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;

class Quiet final : public TrainObserver {};

struct Outcome {
  bool refused = false;
  std::string message;
};

// What collx-train does with these arguments up to the end of its training, minus MPI_COMM_WORLD.
Outcome run_command_line(const std::vector<std::string>& args) {
  std::vector<const char*> argv{"collx-train"};
  for (const std::string& a : args)
    argv.push_back(a.c_str());
  Cli cli;
  const ParseOutcome parsed = parse_command_line(static_cast<int>(argv.size()), argv.data(), cli);
  if (parsed.exit_status) return {true, parsed.message};
  try {
    validate(cli.config, 1);
    std::string notice;
    const DataSplit data = load_data(cli.data, &notice);
    collx::Communicator self(MPI_COMM_SELF);
    Quiet quiet;
    run_training(cli.config, self, data, quiet, std::chrono::steady_clock::now());
  } catch (const std::invalid_argument& e) {
    return {true, e.what()};
  } catch (const CheckpointError& e) {
    return {true, e.what()};
  }
  return {};
}

// A run of two steps on a small synthetic set; the flag under test replaces its own entry.
const std::vector<std::pair<std::string, std::string>> kBase = {
    {"--synthetic-train", "200"}, {"--synthetic-test", "50"}, {"--epochs", "1"},
    {"--hidden", "8"},            {"--batch", "50"},          {"--stop-after", "2"}};

std::vector<std::string> command_line(const std::string& flag, const std::string& value,
                                      const std::vector<std::string>& context) {
  std::vector<std::string> args = {"--synthetic", "--no-progress"};
  for (const auto& [name, base_value] : kBase) {
    if (name == flag) continue;
    args.push_back(name);
    args.push_back(base_value);
  }
  args.insert(args.end(), context.begin(), context.end());
  args.push_back(flag);
  args.push_back(value);
  return args;
}

const std::vector<std::string> kHostile = {"-5",  "0",    "1",   "1e30", "-1e30", "nan",
                                           "inf", "-inf", "abc", "",     "18446744073709551616",
                                           "4294967297", "1e-300", "0x10", "3.5"};

struct Flag {
  std::string name;
  std::vector<std::string> context;  // what the flag needs to matter
};

TEST(TrainCliFuzz, EveryNumericFlagGivesAClearErrorOrARunThatEnds) {
  const std::vector<Flag> flags = {
      {"--epochs", {}},
      {"--batch", {}},
      {"--accum", {}},
      {"--lr", {}},
      {"--lr-batch", {}},
      {"--momentum", {"--optimizer", "sgd"}},
      {"--beta1", {}},
      {"--beta2", {}},
      {"--eps", {}},
      {"--weight-decay", {}},
      {"--warmup-epochs", {}},
      {"--seed", {}},
      {"--bucket-mb", {}},
      {"--first-bucket-mb", {}},
      {"--checkpoint-every", {}},
      {"--stop-after", {}},
      {"--eval-batch", {}},
      {"--synthetic-train", {}},
      {"--synthetic-test", {}},
      {"--train-limit", {}},
      {"--hidden", {}},
      {"--replicas", {"--parallel", "tensor"}},
      {"--micro-batches", {"--parallel", "pipeline"}},
      {"--pipeline-split", {"--parallel", "pipeline"}},
      {"--powersgd-rank", {"--compress", "powersgd"}},
      {"--powersgd-warmup", {"--compress", "powersgd"}},
  };
  int refused = 0, ran = 0;
  for (const Flag& flag : flags) {
    for (const std::string& value : kHostile) {
      const std::vector<std::string> args = command_line(flag.name, value, flag.context);
      const std::string what = flag.name + " " + (value.empty() ? "''" : value);
      Outcome outcome;
      try {
        outcome = run_command_line(args);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what() << " (not a clear refusal)";
        continue;
      }
      if (outcome.refused) {
        ++refused;
        // The message names the flag (a checkpoint error names the checkpoint instead).
        EXPECT_NE(outcome.message.find(flag.name), std::string::npos)
            << what << ": \"" << outcome.message << "\"";
      } else {
        ++ran;
      }
    }
  }
  std::printf("%zu flags x %zu values: %d refused with a message, %d trained\n", flags.size(),
              kHostile.size(), refused, ran);
  EXPECT_GT(refused, 0);
  EXPECT_GT(ran, 0);
}

// --algo's help lists what the registry has for the gradients' collectives (it went stale when it
// was written by hand), and every name it lists is accepted.
TEST(TrainCli, AlgoHelpListsTheRegistrysAlgorithms) {
  const char* help_argv[] = {"collx-train", "--help"};
  Cli cli;
  const ParseOutcome help = parse_command_line(2, help_argv, cli);
  ASSERT_EQ(help.exit_status, 0);
  for (const collx::Collective c :
       {collx::Collective::allreduce, collx::Collective::reduce_scatter}) {
    for (const collx::Algorithm a : collx::algorithms_of(c)) {
      const std::string name(collx::to_string(a));
      EXPECT_NE(help.message.find(name), std::string::npos) << name;
      const char* argv[] = {"collx-train", "--algo", name.c_str()};
      Cli parsed;
      EXPECT_FALSE(parse_command_line(3, argv, parsed).exit_status) << name << ": refused";
      EXPECT_EQ(parsed.config.algorithm, a);
    }
  }
}

}  // namespace
