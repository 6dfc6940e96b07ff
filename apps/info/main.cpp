// collx-info: what this build of collx contains and what it runs on.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli_numbers.hpp"
#include "collx/collx.hpp"

namespace {

// One blocking call of `collective` moving `bytes` in all (the size collx-bench counts), int32
// elements (exact sums: tried under COLLX_AUTOTUNE=1); false where the size has no whole element
// per rank.
bool call_once(collx::Communicator& comm, collx::Collective collective, std::size_t bytes,
               std::vector<std::int32_t>& a, std::vector<std::int32_t>& b) {
  using collx::Collective;
  using collx::DataType;
  const auto p = static_cast<std::size_t>(comm.size());
  const bool per_rank = collective != Collective::allreduce && collective != Collective::reduce &&
                        collective != Collective::broadcast;
  const std::size_t count = bytes / sizeof(std::int32_t) / (per_rank ? p : 1);
  if (count == 0) return false;
  a.assign(count * p, comm.rank());
  b.assign(count * p, 0);
  switch (collective) {
    case Collective::allreduce:
      comm.allreduce(a.data(), b.data(), count, DataType::int32, collx::ReduceOp::sum);
      break;
    case Collective::broadcast:
      comm.broadcast(a.data(), count, DataType::int32, 0);
      break;
    case Collective::reduce:
      comm.reduce(a.data(), b.data(), count, DataType::int32, collx::ReduceOp::sum, 0);
      break;
    case Collective::allgather:
      comm.allgather(a.data(), b.data(), count, DataType::int32);
      break;
    case Collective::reduce_scatter:
      comm.reduce_scatter(a.data(), b.data(), count, DataType::int32, collx::ReduceOp::sum);
      break;
    case Collective::gather:
      comm.gather(a.data(), b.data(), count, DataType::int32, 0);
      break;
    case Collective::scatter:
      comm.scatter(a.data(), b.data(), count, DataType::int32, 0);
      break;
    case Collective::alltoall:
      comm.alltoall(a.data(), b.data(), count, DataType::int32);
      break;
    default:
      return false;
  }
  return true;
}

// Runs every collective at every power of two from 8 B to `max_bytes` until auto's trials of
// its size class end (COLLX_AUTOTUNE), on `comm`.
void run_trials(collx::Communicator& comm, std::size_t max_bytes) {
  using collx::Collective;
  std::vector<std::int32_t> a, b;
  for (Collective c : {Collective::allreduce, Collective::broadcast, Collective::reduce,
                       Collective::allgather, Collective::reduce_scatter, Collective::gather,
                       Collective::scatter, Collective::alltoall}) {
    for (std::size_t bytes = 8; bytes <= max_bytes; bytes *= 2) {
      bool trying = true;
      for (int call = 0; call < 4096; ++call) {
        (void)comm.auto_choice(c, bytes, collx::DataType::int32, collx::ReduceOp::sum, &trying);
        if (!trying || !call_once(comm, c, bytes, a, b)) break;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collx-info: version, MPI library, built-in features and the algorithm table"};
  bool autotune = false;
  std::string save_tuning;
  std::string max_bytes_text = "4M";
  app.add_flag("--autotune", autotune,
               "run auto's trials (COLLX_AUTOTUNE) for every collective from 8 B to --max-bytes "
               "on the ranks of this run and print what they chose");
  app.add_option("--max-bytes", max_bytes_text, "largest size --autotune tries (K/M/G suffixes)");
  app.add_option("--save-tuning", save_tuning,
                 "with --autotune: write what was learned as a tuning file (COLLX_TUNING_FILE)");
  CLI11_PARSE(app, argc, argv);
  const std::optional<std::size_t> max_bytes = collx::apps::parse_size(max_bytes_text);
  if (!max_bytes) {
    std::fprintf(stderr, "collx-info: %s\n",
                 collx::apps::size_error("--max-bytes", max_bytes_text).c_str());
    return 2;
  }
  if (!save_tuning.empty() && !autotune) {
    std::fprintf(stderr, "collx-info: --save-tuning needs --autotune\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int status = 0;
  // Collective: whether the ranks of this run can share a segment.
  bool shared_memory = false;
  // Nodes with a segment of their own (counted by their leaders).
  int node_segments = 0;
  collx::NodeLayoutInfo layout;
  std::vector<std::string> learned;
  std::vector<collx::TuningRule> learned_rules;
  try {
    collx::Communicator world(MPI_COMM_WORLD);
    shared_memory = world.shared_memory();
    layout = world.node_layout();
    const int leads_with_segment = layout.local_rank == 0 && world.node_shared_memory() ? 1 : 0;
    MPI_Reduce(&leads_with_segment, &node_segments, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (autotune) {
      run_trials(world, *max_bytes);
      learned = world.learned_choices();
      learned_rules = world.learned_rules();
    }
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "collx-info: %s\n", e.what());
    status = 1;
  }
  if (rank == 0) {
    try {
      const collx::BuildInfo info = collx::build_info();
      std::printf("collx %s\n", info.version.c_str());
      std::printf("MPI library:   %s\n", collx::mpi_library_version().c_str());
      std::printf("MPI standard:  %s (%d rank%s in this run)\n",
                  collx::mpi_standard_version().c_str(), nranks, nranks == 1 ? "" : "s");
      const collx::DeviceMemoryInfo memory = collx::device_memory_info();
      if (info.cuda) {
        std::printf("CUDA:          built in, %zu device%s visible\n", memory.devices.size(),
                    memory.devices.size() == 1 ? "" : "s");
        for (const auto& d : memory.devices) {
          std::printf("  device %d:    %s, %.1f GiB, sm_%d%d\n", d.index, d.name.c_str(),
                      static_cast<double>(d.memory_bytes) / (1 << 30), d.major, d.minor);
        }
      } else {
        std::printf("CUDA:          not built in\n");
      }
      std::printf("CUDA-aware MPI: %s\n", memory.mpi_cuda_aware.c_str());
      if (info.ucx) {
        std::printf("UCX:           %s\n", info.ucx_version.c_str());
      } else {
        std::printf("UCX:           not built in\n");
      }
      std::string transports;
      for (const std::string& t : info.transports)
        transports += t + " ";
      std::printf("transports:    %s(COLLX_TRANSPORT=%s)\n", transports.c_str(),
                  info.transport.c_str());
      std::printf("shared memory: %s\n",
                  shared_memory ? "yes, the ranks of this run share a segment (shared_memory "
                                  "algorithms; COLLX_SHM=0 turns it off)"
                  : nranks == 1 ? "no (one rank)"
                                : "no (ranks on several nodes, or COLLX_SHM=0)");
      if (!layout.ranks_per_node.empty()) {
        std::string sizes;
        for (int n : layout.ranks_per_node)
          sizes.append(sizes.empty() ? "" : ",").append(std::to_string(n));
        std::printf("nodes:         %d, ranks per node %s (%s)%s\n", layout.nodes, sizes.c_str(),
                    layout.uniform ? "uniform" : "not uniform",
                    layout.emulated ? ", emulated by COLLX_NODE_LAYOUT" : "");
        if (layout.nodes > 1) {
          std::printf(
              "node segments: %d of %d nodes (the node-aware algorithms' phases inside "
              "a node run through them; a node of one rank needs none)\n",
              node_segments, layout.nodes);
        }
      }
      std::printf("host kernels:  %s\n", info.host_kernels.c_str());
      std::string types;
      for (const auto& t : memory.memory_types)
        types += (types.empty() ? "" : ", ") + t;
      std::printf("memory types:  %s\n", types.c_str());
      if (info.ucx) {
        std::string ucx_types;
        for (const auto& t : memory.ucx_memory_types)
          ucx_types += (ucx_types.empty() ? "" : ", ") + t;
        std::printf("UCX memory:    %s\n", ucx_types.c_str());
      }
      if (info.cuda) {
        std::printf("device buffers:");
        for (const auto& [transport, path] : memory.device_paths) {
          std::printf(" %s %s;", transport.c_str(),
                      path == "direct" ? "direct (the transport takes device memory)"
                                       : "staged (pinned host segments)");
        }
        std::printf(" (COLLX_CUDA_AWARE=0|1 overrides)\n");
      }
      std::printf("\nalgorithms:\n");
      for (int c = 0; c < collx::kCollectiveCount; ++c) {
        const auto collective = static_cast<collx::Collective>(c);
        const auto algos = collx::algorithms_of(collective);
        if (algos.empty()) continue;
        std::printf("  %-16s", std::string(collx::to_string(collective)).c_str());
        for (auto a : algos)
          std::printf(" %s", std::string(collx::to_string(a)).c_str());
        std::printf("\n");
      }
      std::printf("\nauto selection table (first matching row wins):\n%s",
                  collx::selection_table().c_str());
      if (autotune) {
        std::printf(
            "\nauto's trials on these %d ranks (COLLX_AUTOTUNE; each candidate's time is "
            "the slowest rank's median over its trials):\n",
            nranks);
        if (learned.empty()) {
          std::printf("  none: one rank, COLLX_AUTOTUNE=0, or every size had one candidate\n");
        }
        for (const auto& line : learned)
          std::printf("  %s\n", line.c_str());
        if (!save_tuning.empty()) {
          collx::TuningFile file;
          file.rules = learned_rules;
          file.machine = "collx-info --autotune, " + std::to_string(nranks) + " ranks, " +
                         collx::mpi_library_version();
          collx::save_tuning_file(save_tuning, file);
          std::printf("learned table written to %s (%zu rows; load it with COLLX_TUNING_FILE)\n",
                      save_tuning.c_str(), file.rules.size());
        }
      }
    } catch (const collx::Error& e) {
      std::fprintf(stderr, "collx-info: %s\n", e.what());
      status = 1;
    }
  }
  MPI_Finalize();
  return status;
}
