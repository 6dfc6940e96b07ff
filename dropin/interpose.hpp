// libcollx_mpi: the MPI collectives of an unmodified program, run by collx through the standard
// profiling interface (PMPI). What it decides for each call, the per-communicator state,
// errors and statistics.
//
// The rule every decision follows: whether a call goes to collx or to the MPI library depends
// only on what MPI requires to agree across the ranks of the call, so every rank decides alike
// and the collective is one call everywhere (docs/RELIABILITY.md, "The drop-in's promise"):
//  - process-wide settings, agreed across MPI_COMM_WORLD when MPI is initialised (COLLX_PMPI,
//    the thread level);
//  - the communicator: an intracommunicator, and whether collx already holds state for it,
//    which depends on the calls made on it before (the same on every rank, as MPI orders each
//    communicator's collectives alike on all of its ranks);
//  - the type signature (its byte count; for reductions the one predefined type it is made
//    of), the op, the root and the counts MPI requires to match. Never a datatype's form, an
//    address or an argument significant at one rank only: a rank whose datatype is derived or
//    has holes packs and unpacks its elements locally (call_buffers.hpp).
// Erroneous arguments that MPI itself must report (a negative count, a root out of range, a
// null buffer with elements of a predefined type) go to MPI, which reports them as it would.
#pragma once

#include <mpi.h>

#include <collx/communicator.hpp>
#include <collx/request.hpp>
#include <collx/types.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "call_buffers.hpp"
#include "type_layout.hpp"

namespace collx_mpi {

// The intercepted functions, for the statistics and the debug lines.
enum class Call {
  allreduce,
  bcast,
  reduce,
  allgather,
  reduce_scatter_block,
  reduce_scatter,
  gather,
  scatter,
  alltoall,
  barrier,
};
inline constexpr int kCallCount = 10;
const char* mpi_name(Call call, bool blocking);

// A reduction collx computes exactly as MPI defines it: MPI_SUM, MPI_PROD, MPI_MIN or MPI_MAX
// over a type signature made of one predefined type collx has (8-, 32- and 64-bit integers,
// float, double), in any datatype's form. Anything else (user ops, MINLOC/MAXLOC, logical and
// bitwise ops, pair, complex, 16-bit and long double types) passes through; MPI requires the
// op and the datatype to be the same on every rank, so every rank decides alike.
struct Reduction {
  collx::DataType type;
  collx::ReduceOp op;
  std::size_t elements;  // collx elements in one element of the MPI datatype
};
std::optional<Reduction> reduction_of(const TypeLayout& layout, MPI_Op op);

// Why a call goes to the MPI library instead of collx, or nullptr when collx takes it.
using PassReason = const char*;

// The blocking form of a collective (MPI_Allreduce) or the nonblocking one (MPI_Iallreduce,
// which returns its request in *request).
struct Blocking {
  static constexpr bool blocking = true;
  MPI_Request* request = nullptr;
};
struct Nonblocking {
  static constexpr bool blocking = false;
  MPI_Request* request;
};

// A call as collx takes it, for goes_to_library.
struct Signature {
  collx::Collective collective;
  std::size_t count;
  collx::DataType type;
  collx::ReduceOp op = collx::ReduceOp::sum;
};

// What decided that a blocking call went to the MPI library (goes_to_library): its
// communicator, datatypes, counts, op and root (where it decides), as the program gave them. A
// call that matches the one its function remembered last goes to the MPI library at once: a
// settled size class stays settled (collx never tries its calls again) and nothing else of the
// decision can change. Remembered only with predefined datatypes and ops (a freed handle never
// comes back as another one), forgotten when the communicator is freed. Calls with a send and a
// receive side (allgather, alltoall, gather, scatter) hold both.
struct LibraryCall {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  int count = 0;
  MPI_Datatype other_type = MPI_DATATYPE_NULL;
  int other_count = 0;
  MPI_Op op = MPI_OP_NULL;
  int root = -1;
  // The datatypes the decision read are predefined (only such calls are remembered).
  bool predefined = false;
  // collx's count of the calls started on `comm` (Communicator::calls_started), once remembered
  std::uint64_t* calls_started = nullptr;
  MPI_Comm library_comm = MPI_COMM_NULL;  // state->mpi_comm(), where the call goes
  bool operator==(const LibraryCall& other) const {
    return comm == other.comm && type == other.type && count == other.count &&
           other_type == other.other_type && other_count == other.other_count && op == other.op &&
           root == other.root;
  }
};
// The delegated call each function remembers (remember_library_call).
// Hidden (as counts and remembered_count_plain): the fast path reads them without the GOT.
[[gnu::visibility("hidden")]] extern std::array<LibraryCall, kCallCount> library_calls;
// The remembered call `key` matches, or null.
inline const LibraryCall* remembered_library_call(Call call, const LibraryCall& key) {
  const LibraryCall& remembered = library_calls[static_cast<std::size_t>(call)];
  return key.comm != MPI_COMM_NULL && remembered == key ? &remembered : nullptr;
}
// The calls intercepted and passed through so far, per function: blocking forms first, then
// the nonblocking ones (count).
inline constexpr int kFormCount = 2 * kCallCount;
struct Counts {
  std::array<std::atomic<long>, kFormCount> intercepted{};
  std::array<std::atomic<long>, kFormCount> passed{};
};
[[gnu::visibility("hidden")]] extern Counts counts;
// Whether count() of a remembered call is a plain add (no MPI_THREAD_MULTIPLE, no COLLX_DEBUG
// line to print): settled before the first call is remembered. The remembered path is the
// delegated call's whole cost, so it adds inline rather than through count().
[[gnu::visibility("hidden")]] extern bool remembered_count_plain;
// The remembered call `key` matches, counted and numbered as collx's delegated call, or null:
// the program's MPI_ function then makes its PMPI_ call on the remembered call's library_comm.
// The MPI_ function checks this first, before its own frame: a delegated call's whole cost
// in the drop-in is these few loads and compares, the count and the call's number
// (docs/AUTO.md, "What a small call costs").
inline const LibraryCall* delegated_call(Call call, const LibraryCall& key);

// Runs one intercepted call: `collective(communicator, buffers)` on collx when `reason` is null
// and the communicator allows it (communicator_reason), otherwise `pass(request, comm)`: the PMPI_
// function, blocking with a null request, nonblocking (MPI_Ixxx) with one. A collx::Error goes
// to the communicator's error handler as an MPI error code whose string is collx's message.
// Nonblocking: `collective` returns the collx::Request, which the program gets as an MPI
// request; `buffers` are unpacked when it completes.
// No call arrives here from collx itself: libcollx calls the functions this library
// intercepts by their PMPI_ names (tests/dropin/library_calls_pmpi.sh checks it).
//
// `signature(communicator)` says the call as collx takes it (a Signature): a blocking call
// whose size class auto's trials settled on the MPI library's own collective
// (collx::Communicator::goes_to_library) goes to `pass` too, before collx sets anything up, on
// the program's communicator with the program's arguments: the MPI library's call without
// collx's steps in between (the delegated call). Every rank decides it alike, and the same on
// every later call: the settled class stays settled. The call is made as collx's own delegated
// call would make it (on collx's duplicate of the communicator, numbered as collx's call), so
// ranks that decide otherwise (collx's own path, a rank whose state came later) still meet in
// it. `key` is the call's LibraryCall, remembered where its datatypes are predefined. Where they
// are not, `library(buffers, duplicate)` makes the call: the MPI library's predefined ops may
// refuse derived datatypes (Open MPI does), so a reduction's elements go packed, as the one
// predefined type they are made of; the other collectives' `library` is `pass`.
template <class Mode, class SignatureOf, class Library, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, const LibraryCall& key,
              SignatureOf&& signature, Library&& library, Collective&& collective, Pass&& pass);

// ---- the machinery intercept() is made of ----
// Why no call on `comm` goes to collx (COLLX_PMPI=0, MPI_THREAD_MULTIPLE, an intercommunicator),
// or nullptr. `blocking` false: a nonblocking call passes through where the MPI library offers
// no progress callback (progress_hook_available), and on a communicator collx holds no state
// for yet (making the state is collective and blocking, and ranks may start nonblocking calls
// on different communicators in different orders).
PassReason communicator_reason(MPI_Comm comm, bool blocking);
collx::Communicator& communicator_of(MPI_Comm comm);  // created on first use, kept in an attribute
// MPI_Comm_size of `comm` (0 where it is not a communicator), without asking MPI again for the
// communicator of the last call.
int communicator_size(MPI_Comm comm);
// collx's state of the communicator communicator_reason last accepted, or null where it has
// none yet (a call on it makes it).
collx::Communicator* accepted_state();
void remember_library_call(Call call, const LibraryCall& key);
void count(Call call, bool blocking, bool intercepted, PassReason reason);
// A delegated call's MPI error code (on collx's duplicate, which returns errors) raised on the
// program's communicator, as the program's own call would have raised it.
// Out of line: the error's path (raise_library_error) stays out of the delegated call's frame.
int raise_library_error(MPI_Comm comm, int code);
inline int library_result(MPI_Comm comm, int code) {
  if (code != MPI_SUCCESS) [[unlikely]]
    return raise_library_error(comm, code);
  return code;
}
int raise_error(MPI_Comm comm);  // the current exception, to the communicator's error handler
// A collx request as an MPI request (a generalized request that the intercepted MPI_Wait,
// MPI_Test and their -all, -any and -some forms complete); `buffers` are unpacked first.
MPI_Request start_request(collx::Request request, MPI_Comm comm,
                          std::unique_ptr<CallBuffers> buffers);
// At MPI_Init: every rank of MPI_COMM_WORLD agrees whether collx takes calls at all, and
// MPI_COMM_WORLD's state is made.
void agree_at_init();
// The calls intercepted and passed through so far, over every function.
void statistics(long* intercepted, long* passed);
// Finalize's release of collx's state.
void finalize_state();
// A communicator the program freed: its nonblocking calls in flight report errors elsewhere.
void forget_communicator(MPI_Comm comm);
// Whether the MPI library lets collx progress inside its own blocking calls (Open MPI's
// opal_progress_register): collx's nonblocking operations then go on while the program blocks
// in any MPI call, as the MPI standard's progress rule asks of nonblocking collectives.
bool progress_hook_available();
void install_progress_hook();
void remove_progress_hook();
// Marks the drop-in's own calls into collx: the progress callback stays out of them (collx's
// engine is not re-entrant).
struct CollxScope {
  CollxScope();
  ~CollxScope();
  CollxScope(const CollxScope&) = delete;
  CollxScope& operator=(const CollxScope&) = delete;
};

template <class Mode, class SignatureOf, class Library, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, const LibraryCall& key,
              SignatureOf&& signature, Library&& library, Collective&& collective, Pass&& pass) {
  if (!reason) reason = communicator_reason(comm, Mode::blocking);
  if (reason) {
    count(call, Mode::blocking, false, reason);
    return pass(mode.request, comm);
  }
  if constexpr (Mode::blocking) {
    if (collx::Communicator* known = accepted_state()) {
      const auto [collective_kind, elements, type, op] = signature(*known);
      if (known->goes_to_library(collective_kind, elements, type, op)) {
        count(call, true, true, nullptr);
        collx::Communicator& state = *known;
        state.library_call_made();
        if (key.predefined) {
          LibraryCall remembered = key;
          remembered.calls_started = state.calls_started();
          remembered.library_comm = state.mpi_comm();
          remember_library_call(call, remembered);
          return library_result(comm, pass(nullptr, remembered.library_comm));
        }
        try {
          CallBuffers buffers(false);
          const int code = library(buffers, state.mpi_comm());
          buffers.finish();
          return library_result(comm, code);
        } catch (...) {
          return raise_error(comm);
        }
      }
    }
  }
  if constexpr (Mode::blocking) {
    // What follows (the arguments converted, collx's entry) is what collx's path costs a call
    // here, and the delegated call above skips it: auto's trials time collx's candidates from here.
    if (collx::Communicator* known = accepted_state()) known->entering_call();
  }
  count(call, Mode::blocking, true, nullptr);  // before collx's own lines (COLLX_DEBUG)
  const CollxScope inside;
  try {
    if constexpr (Mode::blocking) {
      CallBuffers buffers(false);
      collective(communicator_of(comm), buffers);
      buffers.finish();
    } else {
      auto buffers = std::make_unique<CallBuffers>(true);
      collx::Request request = collective(communicator_of(comm), *buffers);
      *mode.request = start_request(std::move(request), comm, std::move(buffers));
    }
  } catch (...) {
    return raise_error(comm);
  }
  return MPI_SUCCESS;
}

inline const LibraryCall* delegated_call(Call call, const LibraryCall& key) {
  const LibraryCall* remembered = remembered_library_call(call, key);
  if (!remembered) return nullptr;
  if (remembered_count_plain) [[likely]] {
    std::atomic<long>& n = counts.intercepted[static_cast<std::size_t>(call)];
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  } else {
    count(call, true, true, nullptr);
  }
  ++*remembered->calls_started;  // Communicator::library_call_made, inline
  return remembered;
}

}  // namespace collx_mpi
