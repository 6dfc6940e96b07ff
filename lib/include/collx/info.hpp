// What this build and this process offer: versions, capabilities, the selection table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx {

struct BuildInfo {
  std::string version;                  // collx version
  bool cuda = false;                    // built with CUDA support
  std::string host_kernels;             // instruction set of the host reduction kernels chosen here
  bool ucx = false;                     // built with the UCX transport
  std::string ucx_version;              // the UCX library loaded in this process ("1.13.1")
  std::vector<std::string> transports;  // what COLLX_TRANSPORT accepts here: "mpi", "ucx"
  std::string transport;                // what COLLX_TRANSPORT selects for new communicators
};
BuildInfo build_info();

// MPI_Get_library_version's text, first line (for example "Open MPI v4.1.4, ...").
std::string mpi_library_version();
// MPI standard version the library implements, "3.1".
std::string mpi_standard_version();

// What Algorithm::automatic runs for this call shape (COLLX_ALGO included).
Algorithm auto_algorithm(Collective collective, std::size_t bytes, int nranks);

// The table `auto` uses (one line per rule) and any COLLX_ALGO overrides in force.
std::string selection_table();

}  // namespace collx
