// Algorithm::mpi: the MPI library's own collectives as registry rows, so that auto's trials
// measure them beside collx's and auto never runs slower than the MPI it wraps.
//
// A blocking call runs the MPI library's blocking collective, a nonblocking call (and, under
// COLLX_TIMEOUT, every call) its nonblocking one, completed by collx's engine: every rank's call
// has the same form, so every rank makes the same MPI call. On the communicator's duplicate
// (Transport::library_comm), with PMPI_ names (the drop-in must not see collx's own calls). Host
// memory only (device buffers come through host copies); types and ops MPI has only.
#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "collx/mpi_types.hpp"
#include "config.hpp"
#include "registry.hpp"
#include "transport_mpi.hpp"

namespace collx::detail {

namespace {

[[noreturn]] void unsupported(Operation& op, const std::string& why) {
  throw Error(ErrorCode::unsupported, std::string(to_string(op.info().collective)),
              op.transport().rank(), "algorithm mpi: " + why);
}

// Called at every poll of the MPI library's progress loop: the global count first, so that with
// nothing of collx's in flight a poll costs one load, not a thread-local lookup.
int progress_callback() {
  if (operations_in_flight.load(std::memory_order_relaxed) == 0) return 0;
  if (in_blocking_library_call) Engine::instance().progress_elsewhere();
  return 0;
}

// The MPI request of a nonblocking call, as something the engine waits on.
class LibraryRequestDone final : public WaitCondition {
 public:
  explicit LibraryRequestDone(MPI_Request* request) : request_(request) {}
  bool met() const override {
    int flag = 0;
    PMPI_Test(request_, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  }
  std::string describe(std::span<const int>) const override {
    return "the MPI library's own nonblocking collective";
  }

 private:
  MPI_Request* request_;
};

// What a schedule's call of the MPI library is made with.
struct LibraryCall {
  Operation& op;
  std::vector<int>& counts;  // what MPI reads until the call completes (reduce_scatter's)
  int rank() const { return op.transport().rank(); }
  // A count as MPI's int, or the reason it is not one.
  int as_int(std::size_t count) const {
    if (count > static_cast<std::size_t>(INT_MAX))
      unsupported(op, std::to_string(count) + " elements exceed MPI's int count");
    return static_cast<int>(count);
  }
  // The bytes of one block of an equal-block call.
  int block_bytes(const std::vector<std::size_t>& offsets, std::size_t element_size) const {
    return as_int((offsets[1] - offsets[0]) * element_size);
  }
};

// Collective C's MPI call for `a` (the delegated path describes its own: collectives_api.cpp).
template <Collective C>
LibraryArgs library_args(const LibraryCall& c, const ArgsOf<C>& a) {
  using enum Collective;
  if constexpr (C == allreduce) {
    return LibraryArgs::reducing(in_place_or(a.send, a.recv), a.recv, c.as_int(a.count),
                                 a.reduction.type, a.reduction.op);
  } else if constexpr (C == broadcast) {
    return {nullptr, a.buffer, c.as_int(a.count * a.element_size), a.root};
  } else if constexpr (C == reduce) {
    return LibraryArgs::reducing(c.rank() == a.root && a.send == a.recv ? MPI_IN_PLACE : a.send,
                                 a.recv, c.as_int(a.count), a.reduction.type, a.reduction.op,
                                 a.root);
  } else if constexpr (C == allgather) {
    const std::byte* own = a.recv + a.offsets[static_cast<std::size_t>(c.rank())] * a.element_size;
    return {a.send == nullptr || a.send == own ? MPI_IN_PLACE : a.send, a.recv,
            c.block_bytes(a.offsets, a.element_size)};
  } else if constexpr (C == reduce_scatter) {
    LibraryArgs l = LibraryArgs::reducing(in_place_or(a.send, a.recv), a.recv,
                                          c.as_int(a.offsets[1] - a.offsets[0]), a.reduction.type,
                                          a.reduction.op);
    const auto block = [&](std::size_t r) { return a.offsets[r + 1] - a.offsets[r]; };
    const std::size_t p = a.offsets.size() - 1;
    std::size_t r = 1;
    while (r < p && block(r) == block(0))
      ++r;
    if (r == p) return l;  // equal blocks: MPI_Reduce_scatter_block, no counts to allocate
    // Blocks that differ: MPI_Reduce_scatter. `counts` outlives a nonblocking call (it is kept
    // in the schedule's frame): MPI may read them until the call completes.
    c.counts.resize(p);
    for (r = 0; r < p; ++r)
      c.counts[r] = c.as_int(block(r));
    l.counts = c.counts.data();
    return l;
  } else if constexpr (C == gather || C == scatter) {
    // In place at the root: its own block stays where it is (null in `a`).
    const bool in_place = c.rank() == a.root && (C == gather ? a.send : a.recv) == nullptr;
    return {C == gather && in_place ? MPI_IN_PLACE : a.send,
            C == scatter && in_place ? MPI_IN_PLACE : a.recv,
            c.block_bytes(a.offsets, a.element_size), a.root};
  } else if constexpr (C == alltoall) {
    return {in_place_or(a.send, a.recv), a.recv, c.as_int(a.count * a.element_size)};
  } else {
    return {};
  }
}

// How errors name the MPI call `a` of collective `c`.
const char* call_name(Collective c, const LibraryArgs& a) {
  constexpr const char* names[] = {"MPI_Allreduce",
                                   "MPI_Bcast",
                                   "MPI_Reduce",
                                   "MPI_Allgather",
                                   "MPI_Reduce_scatter_block",
                                   "",
                                   "MPI_Gather",
                                   "MPI_Scatter",
                                   "MPI_Alltoall",
                                   "MPI_Barrier"};
  // One name per collective in COLLX_COLLECTIVE_LIST's order; sendrecv has no MPI library row.
  static_assert(std::size(names) == kCollectiveCount - 1);
  return a.counts != nullptr ? "MPI_Reduce_scatter" : names[static_cast<std::size_t>(c)];
}

// The schedule of a collective's call: on the communicator's duplicate that collx sends on.
template <Collective C>
Task schedule(Operation& op, ArgsOf<C> a) {
  const MPI_Comm comm = op.transport().library_comm();
  if (comm == MPI_COMM_NULL) unsupported(op, "no MPI communicator (simulated ranks)");
  if (op.device_memory()) unsupported(op, "device memory goes through host copies");
  std::vector<int> counts;
  const LibraryArgs call = library_args<C>({op, counts}, a);
  const auto check = [&](int code) {
    if (code != MPI_SUCCESS) [[unlikely]]
      throw_mpi_error(code, call_name(C, call), op.transport().rank(),
                      to_string(op.info().collective));
  };
  // With COLLX_TIMEOUT (on every rank alike) a blocking call runs the nonblocking form too: a
  // wait in collx's engine ends at the timeout, a wait inside the MPI library would not.
  if (op.info().blocking && config().timeout_seconds <= 0) {
    check(blocking_library_call([&] { return library_collective<C>(comm, call); }));
    co_return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  check(library_collective<C>(comm, call, &request));
  const LibraryRequestDone done(&request);
  co_await op.until(done);
}

}  // namespace

// While this thread blocks in one of the MPI library's blocking collectives, collx's other
// operations go on through its progress engine where it offers a callback (Open MPI's
// opal_progress_register, found at run time): a peer may wait in one of them for this rank, as
// MPI's progress rule lets it. Elsewhere (MPICH) they wait for this call to end.
COLLX_FAST_TLS constinit bool in_blocking_library_call = false;
std::atomic<bool> progress_callback_registered{false};

void register_progress_callback() {
  static std::once_flag once;
  std::call_once(once, [] {
    using Register = int (*)(int (*)());
    auto add = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "opal_progress_register"));
    if (add != nullptr) add(progress_callback);
  });
  progress_callback_registered.store(true, std::memory_order_release);
}

#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
int library_reduce_in_place(MPI_Comm comm, const LibraryArgs& a) {
  int size = 0;
  PMPI_Type_size(a.type, &size);
  const auto* data = static_cast<const std::byte*>(a.recv);
  const std::vector<std::byte> copy(data, data + static_cast<std::size_t>(a.count) * size);
  return PMPI_Reduce(copy.data(), a.recv, a.count, a.type, a.op, a.root, comm);
}
#endif

std::span<const AlgorithmRow> mpi_library_rows() {
  using enum Collective;
  static const AlgorithmRow rows[] = {
      mpi_library_row<allreduce>(schedule<allreduce>),
      mpi_library_row<broadcast>(schedule<broadcast>),
      mpi_library_row<reduce>(schedule<reduce>),
      mpi_library_row<allgather>(schedule<allgather>),
      mpi_library_row<reduce_scatter>(schedule<reduce_scatter>),
      mpi_library_row<gather>(schedule<gather>),
      mpi_library_row<scatter>(schedule<scatter>),
      mpi_library_row<alltoall>(schedule<alltoall>),
      mpi_library_row<barrier>(schedule<barrier>),
  };
  return rows;
}

}  // namespace collx::detail
