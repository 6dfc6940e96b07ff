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
  if (rank == 0) {
    try {
      const collx::BuildInfo info = collx::build_info();
      std::printf("collx %s\n", info.version.c_str());
      std::printf("MPI library:   %s\n", collx::mpi_library_version().c_str());
      std::printf("MPI standard:  %s (%d rank%s in this run)\n",
                  collx::mpi_standard_version().c_str(), nranks, nranks == 1 ? "" : "s");
      std::printf("CUDA:          %s\n", info.cuda ? "built in" : "not built in");
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
      std::printf("host kernels:  %s\n", info.host_kernels.c_str());
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
