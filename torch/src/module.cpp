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
  // Whether initialize() initialised MPI (then finalize() finalises it), and the thread level
  // MPI provides.
  bool owns_mpi = false;
  int thread_level = MPI_THREAD_SINGLE;
  // MPI_COMM_WORLD's duplicate: the parent of every sub-group (torch.distributed.new_group).
  std::shared_ptr<collx::Communicator> world;
  // The communicators of the process groups made so far, freed before MPI is finalised.
  std::vector<std::weak_ptr<collx::Communicator>> groups;
};

ProcessState& process() {
  static ProcessState state;
  return state;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

collx::Communicator& world() {
  initialize();
  return *process().world;
}

}  // namespace

void initialize() {
  initialize_mpi();
  ProcessState& p = process();
  if (!p.world) p.world = std::make_shared<collx::Communicator>(MPI_COMM_WORLD);
}

void initialize_mpi() {
  ProcessState& p = process();
  if (p.world) return;
  // MPI_THREAD_MULTIPLE: the completion thread (work.hpp) tests requests while the caller's
  // thread starts collectives and waits on others. collx::Environment would ask for less.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&p.thread_level);
  } else {
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &p.thread_level) != MPI_SUCCESS)
      throw std::runtime_error("collx backend: MPI_Init_thread failed");
    p.owns_mpi = true;
  }
  if (p.thread_level < MPI_THREAD_MULTIPLE) {
    // Refused before anything is made or sent (and before torch's rendezvous, which a refusal
    // on one rank in init_process_group would leave the others waiting in).
    const char* level = thread_level_name(p.thread_level);
    const bool ours = p.owns_mpi;
    if (ours) {
      MPI_Finalize();
      p.owns_mpi = false;
    }
    throw std::runtime_error(c10::str(
        "collx backend: needs MPI initialised with MPI_THREAD_MULTIPLE (its completion thread "
        "calls MPI beside the thread that starts collectives), but MPI ",
        ours ? "provides only " : "was initialised with ", level,
        ": let `import collx_torch` initialise MPI, or initialise it with MPI_THREAD_MULTIPLE "
        "(mpi4py: mpi4py.rc.thread_level = \"multiple\")"));
  }
}

std::string open_port() {
  initialize_mpi();
  char port[MPI_MAX_PORT_NAME] = {};
  if (MPI_Open_port(MPI_INFO_NULL, port) != MPI_SUCCESS)
    throw std::runtime_error("collx backend: MPI_Open_port failed");
  return port;
}

void join(const std::string& port, int rank, int size) {
  initialize_mpi();
  ProcessState& p = process();
  if (p.world) throw std::runtime_error("collx backend: the world communicator exists already");
  auto check = [](int status, const char* what) {
    if (status != MPI_SUCCESS) {
      throw std::runtime_error(
          c10::str("collx backend: ", what, " failed while the processes joined one MPI world"));
    }
  };
  // Every process joined so far accepts the next one (rank 0's port), whichever connects first;
  // the merged group is then ordered by torch's ranks.
  MPI_Comm group = MPI_COMM_NULL;
  check(MPI_Comm_dup(MPI_COMM_SELF, &group), "MPI_Comm_dup");
  std::vector<char> name(port.begin(), port.end());
  name.push_back('\0');
  auto merge = [&](MPI_Comm inter, int high) {
    MPI_Comm merged = MPI_COMM_NULL;
    check(MPI_Intercomm_merge(inter, high, &merged), "MPI_Intercomm_merge");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&group);
    group = merged;
  };
  if (rank != 0) {
    MPI_Comm inter = MPI_COMM_NULL;
    check(MPI_Comm_connect(name.data(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter),
          "MPI_Comm_connect");
    merge(inter, 1);
  }
  for (;;) {
    int joined = 0;
    MPI_Comm_size(group, &joined);
    if (joined >= size) break;
    MPI_Comm inter = MPI_COMM_NULL;
    check(MPI_Comm_accept(name.data(), MPI_INFO_NULL, 0, group, &inter), "MPI_Comm_accept");
    merge(inter, 0);
  }
  MPI_Comm world = MPI_COMM_NULL;
  check(MPI_Comm_split(group, 0, rank, &world), "MPI_Comm_split");
  MPI_Comm_free(&group);
  p.world = std::make_shared<collx::Communicator>(world);
  MPI_Comm_free(&world);  // the communicator holds a duplicate
  if (rank == 0) MPI_Close_port(name.data());
}

bool initialized() {
  return process().world != nullptr;
}

std::string mpi_library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  return std::string(version, static_cast<std::size_t>(length));
}

void finalize() {
  ProcessState& p = process();
  // The works still in flight finish first (their requests need MPI and the communicators).
  Completer::instance().stop();
  for (const std::weak_ptr<collx::Communicator>& group : p.groups) {
    if (std::shared_ptr<collx::Communicator> comm = group.lock()) comm->free();
  }
  p.groups.clear();
  if (p.world) p.world->free();
  p.world.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (p.owns_mpi && !finalized) MPI_Finalize();
  p.owns_mpi = false;
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

c10::intrusive_ptr<ProcessGroupCollx> create_process_group(
    int group_rank, int group_size, const std::vector<int64_t>& global_ranks) {
  std::shared_ptr<collx::Communicator> comm;
  if (global_ranks.empty()) {
    comm = std::make_shared<collx::Communicator>(world().mpi_comm());
  } else {
    const std::vector<int> ranks(global_ranks.begin(), global_ranks.end());
    comm = std::make_shared<collx::Communicator>(world().create_group(ranks));
  }
  if (comm->rank() != group_rank || comm->size() != group_size) {
    throw std::runtime_error(c10::str(
        "collx backend: torch.distributed gives this process rank ", group_rank, " of ", group_size,
        " but MPI gives it rank ", comm->rank(), " of ", comm->size(),
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
  // Without the GIL: the completion thread, finishing the works still in flight, may run a
  // future's Python callback.
  m.def("finalize", &collx_torch::finalize,
        "Finish the works in flight, free every collx communicator, then finalise MPI if "
        "initialize() initialised it",
        py::call_guard<py::gil_scoped_release>());

  // The device types whose tensors this build takes: torch.distributed sends those to collx.
  m.def("devices", [] {
#ifdef COLLX_TORCH_CUDA
    return std::vector<std::string>{"cpu", "cuda"};
#else
    return std::vector<std::string>{"cpu"};
#endif
  });
  m.def("initialize_mpi", &collx_torch::initialize_mpi,
        "Initialise MPI unless it already is (no world communicator yet)");
  m.def("open_port", &collx_torch::open_port, "MPI_Open_port's name, for join()");
  m.def("join", &collx_torch::join, py::arg("port"), py::arg("rank"), py::arg("size"),
        "Processes not started as one MPI job (torchrun) join one world through rank 0's port: "
        "every process calls it with its torch rank",
        py::call_guard<py::gil_scoped_release>());
  m.def("initialized", &collx_torch::initialized);
  m.def("mpi_library", &collx_torch::mpi_library);
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
