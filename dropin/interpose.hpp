// libcollx_mpi: the MPI collectives of an unmodified program, run by collx where collx has
// exactly MPI's semantics, through the standard profiling interface (PMPI). What it decides for
// each call, the per-communicator state, errors and statistics.
#pragma once

#include <mpi.h>

#include <collx/communicator.hpp>
#include <collx/request.hpp>
#include <collx/types.hpp>

#include <cstddef>
#include <optional>

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

// A reduction collx computes exactly as MPI defines it: a predefined type collx has and
// MPI_SUM, MPI_PROD, MPI_MIN or MPI_MAX. Anything else (user ops, MINLOC/MAXLOC, logical and
// bitwise ops, pair, complex, 16-bit and long double types, derived types) passes through.
struct Reduction {
  collx::DataType type;
  collx::ReduceOp op;
};
std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op);

// The bytes of `count` elements of a predefined datatype with no gaps (data movement moves them
// as bytes), or nothing: derived types pass through (only predefined types: ranks decide alike).
std::optional<std::size_t> contiguous_bytes(MPI_Datatype type, int count);

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

// Runs one intercepted call: `collective(communicator)` on collx when `reason` is null and the
// communicator allows it (an intracommunicator, not under MPI_THREAD_MULTIPLE, COLLX_PMPI not
// 0), otherwise `pass()` (the PMPI_ function). A collx::Error goes to the communicator's error
// handler as an MPI error code whose string is collx's message. Nonblocking: `collective`
// returns the collx::Request, which the program gets as an MPI request.
// No call arrives here from collx itself: libcollx calls the functions this library
// intercepts by their PMPI_ names (tests/dropin/library_calls_pmpi.sh checks it).
template <class Mode, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, Collective&& collective,
              Pass&& pass);

// ---- the machinery intercept() is made of ----
PassReason communicator_reason(MPI_Comm comm);
collx::Communicator& communicator_of(MPI_Comm comm);  // created on first use, kept in an attribute
void count(Call call, bool blocking, bool intercepted, PassReason reason);
int raise_error(MPI_Comm comm);  // the current exception, to the communicator's error handler
// A collx request as an MPI request (a generalized request that the intercepted MPI_Wait,
// MPI_Test and their -all, -any and -some forms complete).
MPI_Request start_request(collx::Request request, MPI_Comm comm);

template <class Mode, class Collective, class Pass>
int intercept(Mode mode, Call call, MPI_Comm comm, PassReason reason, Collective&& collective,
              Pass&& pass) {
  if (!reason) reason = communicator_reason(comm);
  if (reason) {
    count(call, Mode::blocking, false, reason);
    return pass();
  }
  count(call, Mode::blocking, true, nullptr);  // before collx's own lines (COLLX_DEBUG)
  try {
    if constexpr (Mode::blocking)
      collective(communicator_of(comm));
    else
      *mode.request = start_request(collective(communicator_of(comm)), comm);
  } catch (...) {
    return raise_error(comm);
  }
  return MPI_SUCCESS;
}

}  // namespace collx_mpi
