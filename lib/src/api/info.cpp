#include "collx/info.hpp"
#include "transport_mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <string>

#include "collx/build_config.hpp"
#include "collx/communicator.hpp"
#include "config.hpp"
#include "cuda_aware.hpp"
#include "device_api.hpp"
#include "host_reduce.hpp"
#include "selector.hpp"
#include "tuning.hpp"
#if COLLX_HAVE_UCX
#include "transport_ucx.hpp"
#endif

namespace collx {

BuildInfo build_info() {
  BuildInfo info;
  info.version = COLLX_VERSION_STRING;
  info.cuda = COLLX_HAVE_CUDA != 0;
  info.host_kernels = std::string(kernels::to_string(kernels::active_isa()));
  info.transports = {"mpi"};
#if COLLX_HAVE_UCX
  info.ucx = true;
  info.ucx_version = detail::ucx_version();
  info.transports.push_back("ucx");
#endif
  info.transport = std::string(detail::to_string(detail::config().transport));
  return info;
}

DeviceMemoryInfo device_memory_info() {
  DeviceMemoryInfo info;
  info.cuda = COLLX_HAVE_CUDA != 0;
  info.memory_types = {"host"};
  if (detail::DeviceApi* api = detail::device_api()) {
    info.devices = api->devices();
    // Device buffers are accepted where a device is visible.
    if (!info.devices.empty()) info.memory_types.push_back(std::string(api->name()));
  }
  const detail::CudaAwareness& aware = detail::cuda_awareness();
  info.mpi_cuda_aware = detail::describe(aware);
  info.device_paths.emplace_back("mpi", aware.mpi_direct() ? "direct" : "staged");
#if COLLX_HAVE_UCX
  info.ucx_memory_types = detail::ucx_memory_types();
  const bool ucx_cuda =
      std::count(info.ucx_memory_types.begin(), info.ucx_memory_types.end(), "cuda") > 0;
  info.device_paths.emplace_back(
      "ucx", detail::config().cuda_aware.value_or(ucx_cuda) ? "direct" : "staged");
#endif
  return info;
}

bool mpi_takes_device_memory() {
  return detail::cuda_awareness().mpi_direct();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string out(text, static_cast<std::size_t>(length));
  out.resize(std::min(out.find('\n'), out.size()));  // its first line
  while (!out.empty() && (out.back() == '\0' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::string mpi_standard_version() {
  int version = 0;
  int subversion = 0;
  MPI_Get_version(&version, &subversion);
  return std::to_string(version) + "." + std::to_string(subversion);
}

Algorithm auto_algorithm(Collective collective, std::size_t bytes, int nranks, bool shared_memory) {
  return auto_algorithm(collective, bytes, nranks, shared_memory, NodeLayoutInfo{});
}

Algorithm auto_algorithm(Collective collective, std::size_t bytes, int nranks, bool shared_memory,
                         const NodeLayoutInfo& layout) {
  int most = 1;
  for (int k : layout.ranks_per_node)
    most = std::max(most, k);
  return detail::resolve_algorithm(collective, Algorithm::automatic, bytes, nranks, -1,
                                   shared_memory, {layout.nodes, most, layout.uniform});
}

std::string selection_table() {
  std::string out;
  if (const detail::TuningTable* tuned = detail::active_tuning()) {
    out += "tuning file " + detail::config().tuning_file +
           (tuned->machine.empty() ? "" : " (" + tuned->machine + ")") + ", first:\n" +
           detail::describe_rules(tuned->rules);
    if (tuned->segment_bytes)
      out += "  segment_bytes " + std::to_string(tuned->segment_bytes) + "\n";
    if (tuned->pipeline_depth)
      out += "  pipeline_depth " + std::to_string(tuned->pipeline_depth) + "\n";
    out += "then the built-in table:\n";
  }
  out += detail::describe_node_rules();
  out += detail::describe_rules(detail::builtin_rules());
  const auto& forced = detail::config().algorithm;
  for (int c = 0; c < kCollectiveCount; ++c) {
    if (forced[c])
      out += "COLLX_ALGO override: " + std::string(to_string(static_cast<Collective>(c))) + " -> " +
             std::string(to_string(*forced[c])) + "\n";
  }
  return out;
}

}  // namespace collx
