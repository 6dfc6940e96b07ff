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

struct InLibraryCall {
  InLibraryCall() { library_call_begins(); }
  ~InLibraryCall() { library_call_ends(); }
  InLibraryCall(const InLibraryCall&) = delete;
  InLibraryCall& operator=(const InLibraryCall&) = delete;
};

// The MPI request of a nonblocking call, as something the engine waits on.
class LibraryRequestDone final : public WaitCondition {
 public:
  explicit LibraryRequestDone(MPI_Request* request) : request_(request) {}
  bool met() const override {
    int flag = 0;
    PMPI_Test(request_, &flag, MPI_STATUS_IGNORE);
    return flag != 0;
  }
  bool wait_for(std::chrono::microseconds limit) const override {
    const auto until = std::chrono::steady_clock::now() + limit;
    do {
      if (met()) return true;
    } while (std::chrono::steady_clock::now() < until);
    return false;
  }
  std::string describe(std::span<const int>) const override {
    return "the MPI library's own nonblocking collective";
  }

 private:
  MPI_Request* request_;
};

// One call of the MPI library: blocking where `request` is null, else nonblocking.
struct LibraryCall {
  Operation& op;
  MPI_Comm comm;
  MPI_Request* request;
  std::vector<int>& counts;  // what MPI reads until the call completes (reduce_scatter's)
  int rank() const { return op.transport().rank(); }
  // A count as MPI's int, or the reason it is not one.
  int as_int(std::size_t count) const {
    if (count > static_cast<std::size_t>(INT_MAX))
      unsupported(op, std::to_string(count) + " elements exceed MPI's int count");
    return static_cast<int>(count);
  }
  void check(int code, const char* call) const {
    if (code != MPI_SUCCESS) [[unlikely]]
      throw_mpi_error(code, call, rank(), to_string(op.info().collective));
  }
};

// The bytes of one block of an equal-block call.
int block_bytes(const LibraryCall& c, const std::vector<std::size_t>& offsets, std::size_t elem) {
  return c.as_int((offsets[1] - offsets[0]) * elem);
}

// ---- the collectives: each is its MPI call (registry.hpp), blocking or nonblocking ----

void allreduce_call(const LibraryCall& c, const AllreduceArgs& a) {
  c.check(library_allreduce(c.comm, a.send, a.recv, c.as_int(a.count), a.reduction.type,
                            a.reduction.op, c.request),
          "MPI_Allreduce");
}

void broadcast_call(const LibraryCall& c, const BroadcastArgs& a) {
  c.check(
      library_broadcast(c.comm, a.buffer, c.as_int(a.count * a.element_size), a.root, c.request),
      "MPI_Bcast");
}

void reduce_call(const LibraryCall& c, const ReduceArgs& a) {
  const bool root_in_place = c.rank() == a.root && a.send == a.recv;
  c.check(library_reduce(c.comm, root_in_place, a.send, a.recv, c.as_int(a.count), a.reduction.type,
                         a.reduction.op, a.root, c.request),
          "MPI_Reduce");
}

void allgather_call(const LibraryCall& c, const AllgatherArgs& a) {
  const std::byte* own = a.recv + a.offsets[static_cast<std::size_t>(c.rank())] * a.element_size;
  c.check(library_allgather(c.comm, a.send, a.recv, block_bytes(c, a.offsets, a.element_size),
                            a.send == nullptr || a.send == own, c.request),
          "MPI_Allgather");
}

void reduce_scatter_call(const LibraryCall& c, const ReduceScatterArgs& a) {
  const std::size_t p = a.offsets.size() - 1;
  bool equal = true;
  for (std::size_t r = 1; r < p && equal; ++r)
    equal = a.offsets[r + 1] - a.offsets[r] == a.offsets[1] - a.offsets[0];
  if (equal) {
    c.check(
        library_reduce_scatter_block(c.comm, a.send, a.recv, c.as_int(a.offsets[1] - a.offsets[0]),
                                     a.reduction.type, a.reduction.op, c.request),
        "MPI_Reduce_scatter_block");
    return;
  }
  // `counts` outlives a nonblocking call (it is kept in the schedule's frame): MPI may read
  // them until the call completes.
  c.counts.resize(p);
  for (std::size_t r = 0; r < p; ++r)
    c.counts[r] = c.as_int(a.offsets[r + 1] - a.offsets[r]);
  c.check(blocking_or_not(PMPI_Reduce_scatter, PMPI_Ireduce_scatter, c.request,
                          in_place_or(a.send, a.recv), a.recv, c.counts.data(),
                          mpi_datatype(a.reduction.type), mpi_op(a.reduction.op), c.comm),
          "MPI_Reduce_scatter");
}

void gather_call(const LibraryCall& c, const GatherArgs& a) {
  c.check(library_gather(c.comm, a.send, a.recv, block_bytes(c, a.offsets, a.element_size), a.root,
                         c.rank() == a.root && a.send == nullptr, c.request),
          "MPI_Gather");
}

void scatter_call(const LibraryCall& c, const ScatterArgs& a) {
  c.check(library_scatter(c.comm, a.send, a.recv, block_bytes(c, a.offsets, a.element_size), a.root,
                          c.rank() == a.root && a.recv == nullptr, c.request),
          "MPI_Scatter");
}

void alltoall_call(const LibraryCall& c, const AlltoallArgs& a) {
  c.check(library_alltoall(c.comm, a.send, a.recv, c.as_int(a.count * a.element_size), c.request),
          "MPI_Alltoall");
}

void barrier_call(const LibraryCall& c, const BarrierArgs&) {
  c.check(library_barrier(c.comm, c.request), "MPI_Barrier");
}

// The schedule of a collective's call: on the communicator's duplicate that collx sends on.
template <Collective C, void (*Call)(const LibraryCall&, const ArgsOf<C>&)>
Task schedule(Operation& op, ArgsOf<C> a) {
  const MPI_Comm comm = op.transport().library_comm();
  if (comm == MPI_COMM_NULL) unsupported(op, "no MPI communicator (simulated ranks)");
  if (op.device_memory()) unsupported(op, "device memory goes through host copies");
  std::vector<int> counts;
  // With COLLX_TIMEOUT (on every rank alike) a blocking call runs the nonblocking form too: a
  // wait in collx's engine ends at the timeout, a wait inside the MPI library would not.
  if (op.info().blocking && config().timeout_seconds <= 0) {
    const InLibraryCall armed;  // the progress callback, while the call blocks
    Call({op, comm, nullptr, counts}, a);
    co_return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  Call({op, comm, &request, counts}, a);
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

int library_reduce_in_place(MPI_Comm comm, void* buffer, int count, DataType type, ReduceOp op,
                            int root) {
  const void* send = MPI_IN_PLACE;
  std::vector<std::byte> copy;
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
  if (root != 0) {
    const auto* data = static_cast<const std::byte*>(buffer);
    copy.assign(data, data + static_cast<std::size_t>(count) * size_of(type));
    send = copy.data();
  }
#endif
  return PMPI_Reduce(send, buffer, count, mpi_datatype(type), mpi_op(op), root, comm);
}

bool mpi_library_takes(const Reduction* reduction, std::size_t elements) {
  if (elements > static_cast<std::size_t>(INT_MAX)) return false;
  if (reduction == nullptr) return true;
  return mpi_datatype(reduction->type) != MPI_DATATYPE_NULL && mpi_op(reduction->op) != MPI_OP_NULL;
}

std::span<const AlgorithmRow> mpi_library_rows() {
  static const AlgorithmRow rows[] = {
      mpi_library_row<Collective::allreduce>(schedule<Collective::allreduce, allreduce_call>),
      mpi_library_row<Collective::broadcast>(schedule<Collective::broadcast, broadcast_call>),
      mpi_library_row<Collective::reduce>(schedule<Collective::reduce, reduce_call>),
      mpi_library_row<Collective::allgather>(schedule<Collective::allgather, allgather_call>),
      mpi_library_row<Collective::reduce_scatter>(
          schedule<Collective::reduce_scatter, reduce_scatter_call>),
      mpi_library_row<Collective::gather>(schedule<Collective::gather, gather_call>),
      mpi_library_row<Collective::scatter>(schedule<Collective::scatter, scatter_call>),
      mpi_library_row<Collective::alltoall>(schedule<Collective::alltoall, alltoall_call>),
      mpi_library_row<Collective::barrier>(schedule<Collective::barrier, barrier_call>),
  };
  return rows;
}

}  // namespace collx::detail
