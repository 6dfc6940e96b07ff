// What this build and this process offer: versions, capabilities, the selection table.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <utility>
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

// CUDA devices and device memory as this process sees them (MPI must be initialised).
struct CudaDevice {
  int index = 0;
  std::string name;
  std::size_t memory_bytes = 0;
  int major = 0;  // compute capability
  int minor = 0;
};
struct DeviceMemoryInfo {
  bool cuda = false;                // built with CUDA
  std::vector<CudaDevice> devices;  // visible to this process
  std::string mpi_cuda_aware;       // "no (MPIX_Query_cuda_support)", with COLLX_CUDA_AWARE if set
  // How device buffers move on each transport of this build: "direct" (the transport takes
  // device memory) or "staged" (through pinned host memory), e.g. {"mpi", "staged"}.
  std::vector<std::pair<std::string, std::string>> device_paths;
  std::vector<std::string> ucx_memory_types;  // what UCX handles here (empty without UCX)
  std::vector<std::string> memory_types;      // what the collectives accept: "host", "cuda"
};
DeviceMemoryInfo device_memory_info();
// Whether collx hands device buffers to the MPI library as they are (the MPI library is
// CUDA-aware, or COLLX_CUDA_AWARE=1 says so) rather than staging them through pinned host memory:
// device_paths' "mpi" entry as a bool, without querying the devices. MPI must be initialised.
bool mpi_takes_device_memory();

// This process's place among the ranks of `comm` that share its node (collective over `comm`):
// its rank there and how many there are. For picking a GPU per rank (rank % devices), or
// telling whether a communicator lives on one node (size == the communicator's size).
struct NodePlacement {
  int rank = 0;
  int size = 1;
};
NodePlacement node_placement(MPI_Comm comm);

// MPI_Get_library_version's text, first line (for example "Open MPI v4.1.4, ...").
std::string mpi_library_version();
// MPI standard version the library implements, "3.1".
std::string mpi_standard_version();

// What Algorithm::automatic runs for this call shape (COLLX_ALGO included).
// `shared_memory`: the communicator's ranks share an arena (Communicator::shared_memory()),
// so the table's shared_memory rows apply.
Algorithm auto_algorithm(Collective collective, std::size_t bytes, int nranks,
                         bool shared_memory = false);
// The same on ranks placed on nodes as `layout` says (Communicator::node_layout()): where they
// span several nodes, auto's node rules come first, as in the communicator's own calls.
struct NodeLayoutInfo;
Algorithm auto_algorithm(Collective collective, std::size_t bytes, int nranks, bool shared_memory,
                         const NodeLayoutInfo& layout);

// The table `auto` uses (one line per rule) and any COLLX_ALGO overrides in force.
std::string selection_table();

}  // namespace collx
