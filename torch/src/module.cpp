// The Python module collx_torch._C: MPI's lifetime inside a Python process, and the factory
// torch.distributed calls for a "collx" process group.
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

#include <c10/util/StringUtil.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace collx_torch {
namespace {

struct ProcessState {
  std::unique_ptr<collx::Environment> environment;
  // MPI_COMM_WORLD's duplicate: the parent of every sub-group (torch.distributed.new_group).
  std::shared_ptr<collx::Communicator> world;
  // The communicators of the process groups made so far, freed before MPI is finalised.
  std::vector<std::weak_ptr<collx::Communicator>> groups;
};

ProcessState& process() {
  static ProcessState state;
  return state;
}

collx::Communicator& world() {
  initialize();
  return *process().world;
}

}  // namespace

void initialize() {
  ProcessState& p = process();
  if (p.world) return;
  int argc = 0;
  char** argv = nullptr;
  p.environment = std::make_unique<collx::Environment>(argc, argv);
  p.world = std::make_shared<collx::Communicator>(MPI_COMM_WORLD);
}

void finalize() {
  ProcessState& p = process();
  for (const std::weak_ptr<collx::Communicator>& group : p.groups) {
    if (std::shared_ptr<collx::Communicator> comm = group.lock()) comm->free();
  }
  p.groups.clear();
  if (p.world) p.world->free();
  p.world.reset();
  p.environment.reset();
}

int world_rank() {
  return world().rank();
}

int world_size() {
  return world().size();
}

std::string broadcast_string(const std::string& value, int root) {
  collx::Communicator& comm = world();
  std::uint64_t length = value.size();
  comm.broadcast(&length, 1, collx::DataType::uint64, root);
  std::string result = value;
  result.resize(length);
  comm.broadcast(result.data(), length, collx::DataType::uint8, root);
  return result;
}

c10::intrusive_ptr<ProcessGroupCollx> create_process_group(int group_rank, int group_size,
                                                           const std::vector<int64_t>& global_ranks) {
  std::shared_ptr<collx::Communicator> comm;
  if (global_ranks.empty()) {
    comm = std::make_shared<collx::Communicator>(world().mpi_comm());
  } else {
    const std::vector<int> ranks(global_ranks.begin(), global_ranks.end());
    comm = std::make_shared<collx::Communicator>(world().create_group(ranks));
  }
  if (comm->rank() != group_rank || comm->size() != group_size) {
    throw std::runtime_error(c10::str(
        "collx backend: torch.distributed gives this process rank ", group_rank, " of ",
        group_size, " but MPI gives it rank ", comm->rank(), " of ", comm->size(),
        ": run the processes with mpirun and let `import collx_torch` set RANK and WORLD_SIZE"));
  }
  process().groups.push_back(comm);
  return c10::make_intrusive<ProcessGroupCollx>(std::move(comm));
}

}  // namespace collx_torch

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "collx as a torch.distributed backend (the C++ side of collx_torch)";
  m.def("initialize", &collx_torch::initialize,
        "Initialise MPI unless it already is, and duplicate MPI_COMM_WORLD");
  m.def("finalize", &collx_torch::finalize,
        "Free every collx communicator, then finalise MPI if initialize() initialised it");
  m.def("world_rank", &collx_torch::world_rank);
  m.def("world_size", &collx_torch::world_size);
  m.def("broadcast_string", &collx_torch::broadcast_string, py::arg("value"), py::arg("root"));
  // Returned as torch's own ProcessGroup (or Backend) type, which torch.distributed registered
  // with pybind11: the process group's methods are torch's bindings calling collx's overrides.
  m.def(
      "create_process_group",
      [](int group_rank, int group_size, const std::vector<int64_t>& global_ranks) {
        return c10::intrusive_ptr<collx_torch::BackendBase>(
            collx_torch::create_process_group(group_rank, group_size, global_ranks));
      },
      py::arg("group_rank"), py::arg("group_size"), py::arg("global_ranks"),
      py::call_guard<py::gil_scoped_release>());
}
