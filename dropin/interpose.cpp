// The per-communicator state, errors, statistics and settings of libcollx_mpi.
#include "interpose.hpp"

#include "error_codes.hpp"

#include <collx/error.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>

namespace collx_mpi {

namespace {

struct Settings {
  bool enabled = true;     // COLLX_PMPI (0: everything passes through)
  bool stats = false;      // COLLX_PMPI_STATS=1 or 2
  bool unsettled = false;  // COLLX_PMPI_STATS=2: the classes whose trials did not end, too
  bool debug = false;      // COLLX_DEBUG=INFO or TRACE
};

bool env_is(const char* name, std::string_view value) {
  const char* v = std::getenv(name);
  return v && value == v;
}

const Settings& settings() {
  static const Settings read = [] {
    Settings s;
    s.enabled = !env_is("COLLX_PMPI", "0");
    s.unsettled = env_is("COLLX_PMPI_STATS", "2");
    s.stats = env_is("COLLX_PMPI_STATS", "1") || s.unsettled;
    s.debug = env_is("COLLX_DEBUG", "INFO") || env_is("COLLX_DEBUG", "TRACE");
    return s;
  }();
  return read;
}

int thread_level() {
  static const int level = [] {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    return provided;
  }();
  return level;
}

// Whether collx may take calls at all, as every rank of MPI_COMM_WORLD agreed when MPI was
// initialised (agree_at_init); where MPI_Init was not seen here (a library initialised MPI by
// its PMPI_ name), this rank's own settings.
enum class Agreement { not_asked, collx, mpi_only };
Agreement agreement = Agreement::not_asked;
const char* agreement_reason = nullptr;
bool nonblocking_agreed = false;  // every rank's MPI has the progress callback

// This rank's own reason to pass every call through, or nullptr.
PassReason local_reason() {
  if (!settings().enabled) return "COLLX_PMPI=0";
  // Several threads may call collectives at once; collx's calls are not made for that.
  if (thread_level() == MPI_THREAD_MULTIPLE) return "MPI_THREAD_MULTIPLE";
  return nullptr;
}

std::size_t form_index(Call call, bool blocking) {
  return static_cast<std::size_t>(call) + (blocking ? 0 : kCallCount);
}

// Communicators that hold collx state, so MPI_Finalize can release what the program did not
// free (their duplicates must be freed before MPI is finalised).
std::mutex registry_mutex;
std::set<MPI_Comm> registry;
int keyval = MPI_KEYVAL_INVALID;

// The communicator of the last call and what was asked of MPI about it: a run of calls on one
// communicator (the usual case) asks MPI nothing more. Forgotten when the communicator is freed
// (its handle may be given to a new one).
struct LastCommunicator {
  MPI_Comm comm = MPI_COMM_NULL;
  bool inter = false;
  collx::Communicator* state = nullptr;
  int size = 0;  // an intracommunicator's
};
LastCommunicator last;

int delete_state(MPI_Comm comm, int, void* value, void*) {
  const CollxScope inside;
  forget_communicator(comm);
  if (comm == last.comm) last = {};
  for (LibraryCall& remembered : library_calls)
    if (remembered.comm == comm) remembered = {};
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

namespace {

// collx's state of `comm`, or null where it has none yet.
collx::Communicator* existing_state(MPI_Comm comm) {
  if (keyval == MPI_KEYVAL_INVALID) return nullptr;
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, keyval, &value, &found);
  return found ? static_cast<collx::Communicator*>(value) : nullptr;
}

const LastCommunicator& look_up(MPI_Comm comm) {
  if (comm != last.comm) {
    int inter = 0;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
      last = {};
      last.inter = true;  // not a communicator: passes through (MPI reports it)
      return last;
    }
    int size = 0;
    if (!inter) PMPI_Comm_size(comm, &size);
    last = {comm, inter != 0, inter ? nullptr : existing_state(comm), size};
  }
  return last;
}

}  // namespace

int communicator_size(MPI_Comm comm) {
  if (comm == last.comm && last.size > 0) return last.size;
  int size = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return 0;
  return size;
}

PassReason communicator_reason(MPI_Comm comm, bool blocking) {
  if (agreement == Agreement::mpi_only) return agreement_reason;
  if (agreement == Agreement::not_asked) {
    if (const PassReason reason = local_reason()) return reason;
  }
  if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
  const LastCommunicator& known = look_up(comm);
  if (known.comm == MPI_COMM_NULL) return "not a communicator";
  if (known.inter) return "intercommunicator";
  if (!blocking) {
    const bool hook =
        agreement == Agreement::not_asked ? progress_hook_available() : nonblocking_agreed;
    if (!hook) return "nonblocking: the MPI library has no progress callback for collx";
    if (known.state == nullptr)
      return "a nonblocking call on a communicator before its first blocking collective";
    install_progress_hook();
  }
  return nullptr;
}

collx::Communicator* accepted_state() {
  return last.state;
}

Counts counts;
std::array<LibraryCall, kCallCount> library_calls{};
bool remembered_count_plain = false;

int raise_library_error(MPI_Comm comm, int code) {
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}
void remember_library_call(Call call, const LibraryCall& key) {
  remembered_count_plain = thread_level() != MPI_THREAD_MULTIPLE && !settings().debug;
  library_calls[static_cast<std::size_t>(call)] = key;
}

collx::Communicator& communicator_of(MPI_Comm comm) {
  if (comm == last.comm && last.state != nullptr) return *last.state;
  if (collx::Communicator* existing = existing_state(comm)) return *existing;
  if (keyval == MPI_KEYVAL_INVALID) {
    // MPI_COMM_NULL_COPY_FN: a duplicate of the program's communicator gets collx state of its
    // own on first use.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, nullptr);
  }
  // Collective over comm: every rank reaches this in the same call, since the decision to
  // intercept depends only on what MPI requires to agree.
  auto* created = new collx::Communicator(comm);
  PMPI_Comm_set_attr(comm, keyval, created);
  if (comm == last.comm) last.state = created;
  std::lock_guard lock(registry_mutex);
  registry.insert(comm);
  return *created;
}

void agree_at_init() {
  const CollxScope inside;
  int mine = local_reason() == nullptr ? 1 : 0;
  int hook = progress_hook_available() ? 1 : 0;
  int everyone = 0;
  PMPI_Allreduce(&hook, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  nonblocking_agreed = everyone == 1;
  PMPI_Allreduce(&mine, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (everyone == 0) {
    agreement = Agreement::mpi_only;
    agreement_reason = mine ? "another rank passes every call through (COLLX_PMPI=0 or "
                              "MPI_THREAD_MULTIPLE there)"
                            : local_reason();
    return;
  }
  agreement = Agreement::collx;
  // MPI_COMM_WORLD's state now, while every rank is here: the program's first call on it may
  // be a nonblocking one.
  int made = 1;
  try {
    communicator_of(MPI_COMM_WORLD);
  } catch (...) {
    made = 0;
  }
  PMPI_Allreduce(&made, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (everyone == 0) {
    if (existing_state(MPI_COMM_WORLD)) PMPI_Comm_delete_attr(MPI_COMM_WORLD, keyval);
    agreement = Agreement::mpi_only;
    agreement_reason = "collx could not start on every rank";
  }
}

// COLLX_DEBUG's line for a call (out of line: count's frame stays small).
[[gnu::noinline, gnu::cold]] void print_call(Call call, bool blocking, bool intercepted,
                                             PassReason reason) {
  if (intercepted)
    std::fprintf(stderr, "collx_mpi rank %d: %s -> collx\n", world_rank(),
                 mpi_name(call, blocking));
  else
    std::fprintf(stderr, "collx_mpi rank %d: %s -> MPI (%s)\n", world_rank(),
                 mpi_name(call, blocking), reason);
}

void count(Call call, bool blocking, bool intercepted, PassReason reason) {
  const auto i = form_index(call, blocking);
  std::atomic<long>& n = intercepted ? counts.intercepted[i] : counts.passed[i];
  // A locked add is a full barrier, some 20 cycles on a call of a few hundred: only where
  // threads may call at once; otherwise the program orders its calls and a plain add is exact.
  if (thread_level() == MPI_THREAD_MULTIPLE) {
    n.fetch_add(1, std::memory_order_relaxed);
  } else {
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  if (settings().debug) [[unlikely]]
    print_call(call, blocking, intercepted, reason);
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
  // A nonblocking call's communicator may have been freed since (MPI allows it): then the
  // error goes where MPI raises errors that belong to no communicator.
  PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_SELF : comm, code);
  return code;
}

void statistics(long* intercepted, long* passed) {
  *intercepted = 0;
  *passed = 0;
  for (int i = 0; i < kFormCount; ++i) {
    *intercepted += counts.intercepted[static_cast<std::size_t>(i)].load();
    *passed += counts.passed[static_cast<std::size_t>(i)].load();
  }
}

// Releases collx's state of every communicator still holding some, then prints the statistics.
void finalize_state() {
  const CollxScope inside;
  std::set<MPI_Comm> left;
  {
    std::lock_guard lock(registry_mutex);
    left = registry;
  }
  // What auto's trials settled on each communicator (COLLX_PMPI_STATS=1): which size classes a
  // benchmark's calls ran on the MPI library's collective and which on collx's algorithms
  // (=2: and how far the others' calls went into their wait or trials).
  if (settings().stats) {
    // One write: stderr is unbuffered, and a report written piece by piece interleaves with
    // the other ranks' output mid-line.
    std::string report;
    for (MPI_Comm comm : left) {
      const collx::Communicator* state = existing_state(comm);
      if (state == nullptr || state->rank() != 0) continue;
      const std::string heading = "collx_mpi rank " + std::to_string(world_rank()) +
                                  ": communicator of " + std::to_string(state->size()) + ": ";
      std::vector<std::string> lines = state->learned_choices();
      if (settings().unsettled) {
        const std::vector<std::string> unsettled = state->unsettled_classes();
        lines.insert(lines.end(), unsettled.begin(), unsettled.end());
      }
      for (const std::string& line : lines)
        report.append(heading).append(line).append("\n");
    }
    std::fwrite(report.data(), 1, report.size(), stderr);
  }
  for (MPI_Comm comm : left)
    PMPI_Comm_delete_attr(comm, keyval);
  if (keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&keyval);
  release_type_layouts();
  release_pack_communicator();
  remove_progress_hook();
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

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int result = PMPI_Init(argc, argv);
  if (result == MPI_SUCCESS) collx_mpi::agree_at_init();
  return result;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int result = PMPI_Init_thread(argc, argv, required, provided);
  if (result == MPI_SUCCESS) collx_mpi::agree_at_init();
  return result;
}

int MPI_Finalize() {
  collx_mpi::finalize_state();
  return PMPI_Finalize();
}

// How many calls this rank's program had intercepted and passed through so far (the
// conformance tests compare them across ranks: each rank must intercept the same calls).
__attribute__((visibility("default"))) void collx_mpi_statistics(long* intercepted, long* passed) {
  collx_mpi::statistics(intercepted, passed);
}

}  // extern "C"
