// collx-info: what this build of collx contains and what it runs on.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "collx/collx.hpp"

int main(int argc, char** argv) {
  CLI::App app{"collx-info: version, MPI library, built-in features and the algorithm table"};
  CLI11_PARSE(app, argc, argv);
  MPI_Init(&argc, &argv);
  int rank = 0;
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int status = 0;
  // Collective: whether the ranks of this run can share a segment.
  bool shared_memory = false;
  collx::NodeLayoutInfo layout;
  try {
    const collx::Communicator world(MPI_COMM_WORLD);
    shared_memory = world.shared_memory();
    layout = world.node_layout();
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
    } catch (const collx::Error& e) {
      std::fprintf(stderr, "collx-info: %s\n", e.what());
      status = 1;
    }
  }
  MPI_Finalize();
  return status;
}
