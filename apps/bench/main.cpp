// collx-bench: collx's algorithms against each other and against the MPI library's own
// collective, in one run, with nccl-tests' conventions (sizes, algbw, busbw, #wrong).
//
// main() follows one run: the command line (cli.hpp) checked into a plan (plan.hpp; --cold's
// cache size from cache_probe.hpp), the rows on their communicators (rows.hpp), every size timed
// (timing.hpp), checked and reported (measure.hpp, report.hpp: the table and --json), then
// --save-tuning's file (tuning_writer.hpp).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_buffers.hpp"
#include "cli.hpp"
#include "collx/collx.hpp"
#include "core_probe.hpp"
#include "measure.hpp"
#include "mpi_reference.hpp"
#include "plan.hpp"
#include "report.hpp"
#include "rows.hpp"
#include "run.hpp"
#include "timing.hpp"
#include "tuning_writer.hpp"

namespace collx::bench {

namespace {

int run(int argc, char** argv, int rank, int nranks) {
  CLI::App app{"collx-bench: collx collectives against each other and the MPI library's own"};
  Settings s;
  add_options(app, s);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank != 0) return e.get_exit_code();
    return app.exit(e);
  }
  auto fail = [&](const std::string& message) {
    if (rank == 0) std::fprintf(stderr, "collx-bench: %s\n", message.c_str());
    return 2;
  };
  Plan plan;
  if (const std::string why = make_plan(s, plan); !why.empty()) return fail(why);
  // -m device: a device on every rank, or a clear error on all of them.
  if (plan.device) {
    if (!device_on_every_rank(rank, nranks)) return 2;
    collx::bench::Buffer::use_device_memory(true);
  }

  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<Runner> runners = make_runners(comm, plan);
  const auto* bench = runners.front().bench.get();
  if (!bench) return fail("collx-bench has no benchmark for " + s.collective_name + " yet");
  if (bench->rooted() && (s.root < 0 || s.root >= nranks)) {
    return fail("-r " + std::to_string(s.root) + ": the root must be a rank, 0 to " +
                std::to_string(nranks - 1));
  }
  if (bench->reduces() && !collx::is_supported(plan.type, plan.op)) {
    return fail(s.op + " is not defined for " + s.type);
  }
  if (const std::string why = memory_error(s, plan); !why.empty()) return fail(why);

  Run r{.s = s,
        .plan = plan,
        .rank = rank,
        .nranks = nranks,
        .comm = comm,
        .runners = runners,
        .table = make_table(plan.columns, runners),
        .params = {plan.type, plan.op, s.root, s.in_place, plan.segment_bytes, s.depth,
                   plan.memcpy_row(), 2 * plan.llc.bytes},
        .compute = Computation(s.overlap_ms),
        .command = command_line(argc, argv),
        .mpi_library = collx::mpi_library_version(),
        .transport_line = describe_transports(comm, runners),
        // Wide enough for "auto(recursive_doubling)@ucx".
        .algo_width = plan.transports.empty() ? 24 : 28,
        .per_round = std::max(1, s.iters / s.rounds),
        .rounds = std::min(s.rounds, s.iters)};
  r.round_trip_start_ns = cache_line_round_trip(MPI_COMM_WORLD);
  if (rank == 0) print_header(r);

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::pair<std::size_t, Algorithm>> fastest;  // for --save-tuning
  unsigned long long total_wrong = 0;
  for (std::size_t size = plan.min_bytes;; size *= s.factor) {
    total_wrong += measure_size(r, size, rows, fastest);
    if (size == 0 || plan.collective == Collective::barrier) break;  // barrier: one row
    if (size > plan.max_bytes / s.factor) break;  // the next size would pass -e (or 2^64)
  }
  if (!s.tune_path.empty() && fastest.empty()) {
    return fail("--save-tuning needs at least one collx algorithm in -a");
  }
  if (rank == 0 && !s.tune_path.empty()) {
    write_tuning(s.tune_path, plan.collective, nranks, fastest, plan.segment_bytes, s.depth,
                 r.mpi_library);
    std::printf("# tuning: %zu sizes written to %s for %s on %d ranks\n", fastest.size(),
                s.tune_path.c_str(), s.collective_name.c_str(), nranks);
  }
  r.round_trip_end_ns = cache_line_round_trip(MPI_COMM_WORLD);
  if (rank == 0) {
    if (r.round_trip_end_ns) {
      std::printf("# cache line round trip between ranks 0 and 1 at the end: %.0f ns\n",
                  *r.round_trip_end_ns);
    }
    std::printf("# Out of bounds values : %llu %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    if (!s.json_path.empty() && !write_json(r, rows)) return 1;
  }
  return total_wrong ? 1 : 0;
}

}  // namespace

}  // namespace collx::bench

int main(int argc, char** argv) {
  // MPI at the thread level collx needs (MPI_THREAD_MULTIPLE with COLLX_PROGRESS_THREAD=1).
  std::optional<collx::Environment> environment;
  try {
    environment.emplace(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-bench: %s\n", e.what());
    return 1;
  }
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int status = 0;
  try {
    status = collx::bench::run(argc, argv, rank, nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-bench (rank %d): %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  collx::bench::free_mpi_reference();
  environment.reset();
  return status;
}
