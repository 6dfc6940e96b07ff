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

#include <cstddef>
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

// Runs one intercepted call: `collective(communicator, buffers)` on collx when `reason` is null
// and the communicator allows it (communicator_reason), otherwise `pass(request)`: the PMPI_
// function, blocking with a null request, nonblocking (MPI_Ixxx) with one. A collx::Error goes
// to the communicator's error handler as an MPI error code whose string is collx's message.
// Nonblocking: `collective` returns the collx::Request, which the program gets as an MPI
// request; `buffers` are unpacked when it completes.
// No call arrives here from collx itself: libcollx calls the functions this library
// intercepts by their PMPI_ names (tests/dropin/library_calls_pmpi.sh checks it).
template <class Mode, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, Collective&& collective,
              Pass&& pass);

// ---- the machinery intercept() is made of ----
// Why no call on `comm` goes to collx (COLLX_PMPI=0, MPI_THREAD_MULTIPLE, an intercommunicator),
// or nullptr. `blocking` false: a nonblocking call passes through where the MPI library offers
// no progress callback (progress_hook_available), and on a communicator collx holds no state
// for yet (making the state is collective and blocking, and ranks may start nonblocking calls
// on different communicators in different orders).
PassReason communicator_reason(MPI_Comm comm, bool blocking);
collx::Communicator& communicator_of(MPI_Comm comm);  // created on first use, kept in an attribute
void count(Call call, bool blocking, bool intercepted, PassReason reason);
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

template <class Mode, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, Collective&& collective,
              Pass&& pass) {
  if (!reason) reason = communicator_reason(comm, Mode::blocking);
  if (reason) {
    count(call, Mode::blocking, false, reason);
    return pass(mode.request);
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

}  // namespace collx_mpi
