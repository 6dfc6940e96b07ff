// The per-communicator state, errors, statistics and settings of libcollx_mpi.
#include "interpose.hpp"

#include <collx/error.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>

namespace collx_mpi {

namespace {

struct Settings {
  bool enabled = true;  // COLLX_PMPI (0: everything passes through)
  bool stats = false;   // COLLX_PMPI_STATS=1
  bool debug = false;   // COLLX_DEBUG=INFO or TRACE
};

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && value == v;
}

const Settings& settings() {
  static const Settings read = [] {
    Settings s;
    s.enabled = !env_is("COLLX_PMPI", "0");
    s.stats = env_is("COLLX_PMPI_STATS", "1");
    s.debug = env_is("COLLX_DEBUG", "INFO") || env_is("COLLX_DEBUG", "TRACE");
    return s;
  }();
  return read;
}

// Blocking forms first, then the nonblocking ones.
constexpr int kFormCount = 2 * kCallCount;
struct Counts {
  std::array<std::atomic<long>, kFormCount> intercepted{};
  std::array<std::atomic<long>, kFormCount> passed{};
};
std::size_t form_index(Call call, bool blocking) {
  return static_cast<std::size_t>(call) + (blocking ? 0 : kCallCount);
}
Counts counts;

// Communicators that hold collx state, so MPI_Finalize can release what the program did not
// free (their duplicates must be freed before MPI is finalised).
std::mutex registry_mutex;
std::set<MPI_Comm> registry;
int keyval = MPI_KEYVAL_INVALID;

int delete_state(MPI_Comm comm, int, void* value, void*) {
  {
    std::lock_guard lock(registry_mutex);
    registry.erase(comm);
  }
  try {
    delete static_cast<collx::Communicator*>(value);
  } catch (...) {
    return MPI_ERR_OTHER;
  }
  return MPI_SUCCESS;
}

int world_rank() {
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int thread_level() {
  static const int level = [] {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    return provided;
  }();
  return level;
}

// One added MPI error code per error class, its string replaced by the latest collx message
// (MPI_Add_error_string replaces a string set before): MPI_Error_string names collx's reason.
// MPICH gives a code added to a predefined class its generic message instead; there the code
// goes to a class of collx's own ("collx: <predefined class's message>").
int error_code_for(int error_class, const char* message) {
  static std::mutex mutex;
  static std::array<int, 64> codes{};
  std::lock_guard lock(mutex);
  int& code = codes.at(static_cast<std::size_t>(error_class) % codes.size());
  if (code == 0) {
    if (PMPI_Add_error_code(error_class, &code) != MPI_SUCCESS) return error_class;
    PMPI_Add_error_string(code, message);
    char seen[MPI_MAX_ERROR_STRING];
    int length = 0;
    PMPI_Error_string(code, seen, &length);
    if (std::strcmp(seen, message) != 0) {
      int own_class = 0;
      if (PMPI_Add_error_class(&own_class) != MPI_SUCCESS ||
          PMPI_Add_error_code(own_class, &code) != MPI_SUCCESS)
        return error_class;
      char predefined[MPI_MAX_ERROR_STRING];
      PMPI_Error_string(error_class, predefined, &length);
      PMPI_Add_error_string(own_class, (std::string("collx: ") + predefined).c_str());
    }
  }
  PMPI_Add_error_string(code, message);
  return code;
}

int error_class_of(collx::ErrorCode code) {
  switch (code) {
    case collx::ErrorCode::invalid_argument:
    case collx::ErrorCode::config:
      return MPI_ERR_ARG;
    case collx::ErrorCode::unsupported:
      return MPI_ERR_UNSUPPORTED_OPERATION;
    case collx::ErrorCode::communicator_freed:
      return MPI_ERR_COMM;
    case collx::ErrorCode::internal:
      return MPI_ERR_INTERN;
    default:
      return MPI_ERR_OTHER;
  }
}

}  // namespace

const char* mpi_name(Call call, bool blocking) {
  static constexpr std::array<const char*, kFormCount> names = {"MPI_Allreduce",
                                                                "MPI_Bcast",
                                                                "MPI_Reduce",
                                                                "MPI_Allgather",
                                                                "MPI_Reduce_scatter_block",
                                                                "MPI_Reduce_scatter",
                                                                "MPI_Gather",
                                                                "MPI_Scatter",
                                                                "MPI_Alltoall",
                                                                "MPI_Barrier",
                                                                "MPI_Iallreduce",
                                                                "MPI_Ibcast",
                                                                "MPI_Ireduce",
                                                                "MPI_Iallgather",
                                                                "MPI_Ireduce_scatter_block",
                                                                "MPI_Ireduce_scatter",
                                                                "MPI_Igather",
                                                                "MPI_Iscatter",
                                                                "MPI_Ialltoall",
                                                                "MPI_Ibarrier"};
  return names[form_index(call, blocking)];
}

PassReason communicator_reason(MPI_Comm comm) {
  if (!settings().enabled) return "COLLX_PMPI=0";
  if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
  // Several threads may call collectives at once; collx's calls are not made for that.
  if (thread_level() == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  int inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return "not a communicator";
  if (inter) return "intercommunicator";
  return nullptr;
}

collx::Communicator& communicator_of(MPI_Comm comm) {
  if (keyval == MPI_KEYVAL_INVALID) {
    // MPI_COMM_NULL_COPY_FN: a duplicate of the program's communicator gets collx state of its
    // own on first use.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, nullptr);
  }
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  if (found) return *static_cast<collx::Communicator*>(value);
  // Collective over comm: every rank reaches this in the same call, since the decision to
  // intercept depends only on arguments MPI requires to agree.
  auto* created = new collx::Communicator(comm);
  PMPI_Comm_set_attr(comm, keyval, created);
  std::lock_guard lock(registry_mutex);
  registry.insert(comm);
  return *created;
}

void count(Call call, bool blocking, bool intercepted, PassReason reason) {
  const auto i = form_index(call, blocking);
  (intercepted ? counts.intercepted[i] : counts.passed[i]).fetch_add(1, std::memory_order_relaxed);
  if (settings().debug) {
    if (intercepted)
      std::fprintf(stderr, "collx_mpi rank %d: %s -> collx\n", world_rank(),
                   mpi_name(call, blocking));
    else
      std::fprintf(stderr, "collx_mpi rank %d: %s -> MPI (%s)\n", world_rank(),
                   mpi_name(call, blocking), reason);
  }
}

int raise_error(MPI_Comm comm) {
  int code = MPI_ERR_INTERN;
  try {
    throw;
  } catch (const collx::Error& e) {
    code = error_code_for(error_class_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    code = error_code_for(MPI_ERR_NO_MEM, "collx: out of memory");
  } catch (const std::exception& e) {
    code = error_code_for(MPI_ERR_INTERN, e.what());
  }
  // MPI_ERRORS_ARE_FATAL aborts here; MPI_ERRORS_RETURN (or a handler of the program's) returns.
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

// Releases collx's state of every communicator still holding some, then prints the statistics.
void finalize_state() {
  std::set<MPI_Comm> left;
  {
    std::lock_guard lock(registry_mutex);
    left = registry;
  }
  for (MPI_Comm comm : left)
    PMPI_Comm_delete_attr(comm, keyval);
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
  if (!settings().stats) return;
  std::string line = "collx_mpi rank " + std::to_string(world_rank()) + ":";
  long intercepted = 0, passed = 0;
  std::string detail;
  for (bool blocking : {true, false}) {
    for (int c = 0; c < kCallCount; ++c) {
      const auto call = static_cast<Call>(c);
      const auto i = form_index(call, blocking);
      const long in = counts.intercepted[i].load(), out = counts.passed[i].load();
      intercepted += in;
      passed += out;
      if (in || out)
        detail += std::string(" ") + mpi_name(call, blocking) + " " + std::to_string(in) + "/" +
                  std::to_string(out);
    }
  }
  std::fprintf(stderr, "%s intercepted %ld, passed through %ld (intercepted/passed:%s)\n",
               line.c_str(), intercepted, passed, detail.c_str());
}

}  // namespace collx_mpi

extern "C" int MPI_Finalize() {
  collx_mpi::finalize_state();
  return PMPI_Finalize();
}
