// collx-train: an MLP trainer on collx's collectives (--parallel dp, fsdp, pipeline, tensor).
// Launch it with mpirun or srun; rank 0 prints, the other ranks print only errors.
#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "collx/collx.hpp"
#include "dataset.hpp"
#include "report.hpp"
#include "trainer.hpp"

namespace {

using namespace collx::train;

// An error that every rank knows about: each prints it, all exit with status 1, no MPI_Abort.
struct AgreedError {
  std::string message;
};

// Collective: when some rank has an error, every rank gets the message of the lowest such rank.
void agree(collx::Communicator& comm, const std::string& local_error) {
  const int nranks = comm.size();
  int first = local_error.empty() ? nranks : comm.rank();
  comm.allreduce(collx::in_place, &first, 1, collx::DataType::int32, collx::ReduceOp::min);
  if (first == nranks) return;
  std::uint64_t length = local_error.size();
  comm.broadcast(&length, 1, collx::DataType::uint64, first);
  std::string message = local_error;
  message.resize(length);
  comm.broadcast(message.data(), length, collx::DataType::uint8, first);
  throw AgreedError{first == comm.rank() || nranks == 1
                        ? message
                        : message + " (reported by rank " + std::to_string(first) + ")"};
}

int run(int argc, char** argv, std::chrono::steady_clock::time_point start) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Cli cli;
  const ParseOutcome parsed = parse_command_line(argc, argv, cli);
  if (parsed.exit_status) {
    if (*parsed.exit_status == 0) {  // --help
      if (rank == 0) std::fputs(parsed.message.c_str(), stdout);
    } else {
      // Every rank says it: a user reading any rank's output sees why.
      std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, parsed.message.c_str());
      if (rank == 0) std::fprintf(stderr, "Run with --help for the options.\n");
    }
    return *parsed.exit_status;
  }

  collx::Communicator comm(MPI_COMM_WORLD);
  try {
    std::string error;
    try {
      validate(cli.config, comm.size());
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
    agree(comm, error);
    DataSplit data;
    std::string notice;
    try {
      data = load_data(cli.data, &notice);
    } catch (const std::exception& e) {
      error = std::string("cannot load the data set: ") + e.what();
    }
    agree(comm, error);
    if (rank == 0 && !notice.empty()) std::fprintf(stderr, "collx-train: %s\n", notice.c_str());

    std::ofstream json;
    if (rank == 0 && !cli.log_json.empty()) {
      json.open(cli.log_json, std::ios::trunc);
      if (!json) error = "cannot write --log-json " + cli.log_json;
    }
    // Rank 0 writes the checkpoints: find out now, not after the training, that it cannot.
    if (rank == 0 && error.empty() && !cli.config.checkpoint_path.empty()) {
      const std::filesystem::path dir =
          std::filesystem::absolute(cli.config.checkpoint_path).parent_path();
      if (::access(dir.c_str(), W_OK) != 0) {
        error = "--checkpoint " + cli.config.checkpoint_path + ": cannot write in " + dir.string() +
                ": " + std::strerror(errno);
      }
    }
    agree(comm, error);

    Reporter reporter(rank == 0, !cli.no_progress, json.is_open() ? &json : nullptr, cli.config,
                      data, comm.size());
    // Errors every rank meets together (a bad checkpoint, an unavailable device) come back as
    // exceptions on every rank; others (a broken rank) take MPI_Abort in main().
    try {
      run_training(cli.config, comm, data, reporter, start);
    } catch (const CheckpointError& e) {
      throw AgreedError{e.what()};
    } catch (const std::invalid_argument& e) {
      throw AgreedError{e.what()};
    }
    return 0;
  } catch (const AgreedError& e) {
    std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, e.message.c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto start = std::chrono::steady_clock::now();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int status = 0;
  try {
    status = run(argc, argv, start);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "collx-train (rank %d): error: %s\n", rank, e.what());
    // The other ranks may be waiting in a collective for this one: take them down too.
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
