// Algorithm::mpi: the MPI library's own collectives, as rows of the registry like collx's
// algorithms, so that auto's trials measure them beside collx's and the call goes to the MPI
// library where it is faster (autotune.hpp): auto then never runs slower than the MPI it wraps,
// on any machine, beyond the trials' own cost.
//
// A blocking call runs the MPI library's blocking collective (MPI_Allreduce), a nonblocking
// call (and, under COLLX_TIMEOUT, every call) its nonblocking one (MPI_Iallreduce), completed by
// collx's engine like any operation:
// MPI matches a blocking collective only with blocking ones, and every rank's call has the same
// form, so every rank makes the same MPI call. It runs on the communicator's duplicate that
// collx sends on (Transport::library_comm), with the library's PMPI_ names (the drop-in must not
// see collx's own calls). Host memory only: device buffers come through host copies
// (needs_host_copy); reductions of types and ops MPI has (no 16-bit floats, no avg:
// mpi_library_takes).
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

// Called at every poll of the MPI library's progress loop, the program's own calls' included:
// the global count first, so that with nothing of collx's in flight (a delegated call, a
// program's MPI_Wait) a poll costs one load, not a thread-local lookup (__tls_get_addr in a
// shared library) and a function-local static's guard.
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

const void* in_place_or(const void* send, const void* recv) {
  return send == recv ? MPI_IN_PLACE : send;
}

// The bytes of one block of an equal-block call.
int block_bytes(const LibraryCall& c, const std::vector<std::size_t>& offsets, std::size_t elem) {
  return c.as_int((offsets[1] - offsets[0]) * elem);
}

// ---- the collectives: each is its MPI call, blocking and nonblocking ----

void allreduce_call(const LibraryCall& c, const AllreduceArgs& a) {
  const int n = c.as_int(a.count);
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const void* send = in_place_or(a.send, a.recv);
  c.check(c.request ? PMPI_Iallreduce(send, a.recv, n, type, reduce, c.comm, c.request)
                    : PMPI_Allreduce(send, a.recv, n, type, reduce, c.comm),
          "MPI_Allreduce");
}

void broadcast_call(const LibraryCall& c, const BroadcastArgs& a) {
  const int n = c.as_int(a.count * a.element_size);
  c.check(c.request ? PMPI_Ibcast(a.buffer, n, MPI_BYTE, a.root, c.comm, c.request)
                    : PMPI_Bcast(a.buffer, n, MPI_BYTE, a.root, c.comm),
          "MPI_Bcast");
}

void reduce_call(const LibraryCall& c, const ReduceArgs& a) {
  const int n = c.as_int(a.count);
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const void* send = c.rank() == a.root ? in_place_or(a.send, a.recv) : a.send;
  std::vector<std::byte> input;
  if (send == MPI_IN_PLACE && c.request == nullptr)
    send = in_place_reduce_input(a.root, a.recv, a.count * size_of(a.reduction.type), input);
  c.check(c.request ? PMPI_Ireduce(send, a.recv, n, type, reduce, a.root, c.comm, c.request)
                    : PMPI_Reduce(send, a.recv, n, type, reduce, a.root, c.comm),
          "MPI_Reduce");
}

void allgather_call(const LibraryCall& c, const AllgatherArgs& a) {
  const int block = block_bytes(c, a.offsets, a.element_size);
  const std::byte* own = a.recv + a.offsets[static_cast<std::size_t>(c.rank())] * a.element_size;
  const void* send = a.send == nullptr || a.send == own ? MPI_IN_PLACE : a.send;
  c.check(c.request
              ? PMPI_Iallgather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, c.comm, c.request)
              : PMPI_Allgather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, c.comm),
          "MPI_Allgather");
}

void reduce_scatter_call(const LibraryCall& c, const ReduceScatterArgs& a) {
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const void* send = in_place_or(a.send, a.recv);
  const std::size_t p = a.offsets.size() - 1;
  bool equal = true;
  for (std::size_t r = 1; r < p && equal; ++r)
    equal = a.offsets[r + 1] - a.offsets[r] == a.offsets[1] - a.offsets[0];
  if (equal) {
    const int n = c.as_int(a.offsets[1] - a.offsets[0]);
    c.check(c.request ? PMPI_Ireduce_scatter_block(send, a.recv, n, type, reduce, c.comm, c.request)
                      : PMPI_Reduce_scatter_block(send, a.recv, n, type, reduce, c.comm),
            "MPI_Reduce_scatter_block");
    return;
  }
  // `counts` outlives a nonblocking call (it is kept in the schedule's frame): MPI may read
  // them until the call completes.
  c.counts.resize(p);
  for (std::size_t r = 0; r < p; ++r)
    c.counts[r] = c.as_int(a.offsets[r + 1] - a.offsets[r]);
  const int* counts = c.counts.data();
  c.check(c.request ? PMPI_Ireduce_scatter(send, a.recv, counts, type, reduce, c.comm, c.request)
                    : PMPI_Reduce_scatter(send, a.recv, counts, type, reduce, c.comm),
          "MPI_Reduce_scatter");
}

void gather_call(const LibraryCall& c, const GatherArgs& a) {
  const int block = block_bytes(c, a.offsets, a.element_size);
  const void* send = c.rank() == a.root && a.send == nullptr ? MPI_IN_PLACE : a.send;
  c.check(c.request ? PMPI_Igather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, a.root, c.comm,
                                   c.request)
                    : PMPI_Gather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, a.root, c.comm),
          "MPI_Gather");
}

void scatter_call(const LibraryCall& c, const ScatterArgs& a) {
  const int block = block_bytes(c, a.offsets, a.element_size);
  void* recv = c.rank() == a.root && a.recv == nullptr ? MPI_IN_PLACE : a.recv;
  c.check(c.request ? PMPI_Iscatter(a.send, block, MPI_BYTE, recv, block, MPI_BYTE, a.root, c.comm,
                                    c.request)
                    : PMPI_Scatter(a.send, block, MPI_BYTE, recv, block, MPI_BYTE, a.root, c.comm),
          "MPI_Scatter");
}

void alltoall_call(const LibraryCall& c, const AlltoallArgs& a) {
  const int block = c.as_int(a.count * a.element_size);
  const void* send = in_place_or(a.send, a.recv);
  c.check(c.request
              ? PMPI_Ialltoall(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, c.comm, c.request)
              : PMPI_Alltoall(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, c.comm),
          "MPI_Alltoall");
}

void barrier_call(const LibraryCall& c, const BarrierArgs&) {
  c.check(c.request ? PMPI_Ibarrier(c.comm, c.request) : PMPI_Barrier(c.comm), "MPI_Barrier");
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
// operations in flight go on through the MPI library's progress engine (where it offers a
// callback: Open MPI's opal_progress_register, found at run time): a peer may wait in one of them
// for this rank's part, as MPI's progress rule lets it. Elsewhere (MPICH) they wait for this
// call to end, as any operation of collx's waits while the program is outside collx.
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

const void* in_place_reduce_input(int root, const std::byte* root_data, std::size_t bytes,
                                  std::vector<std::byte>& copy) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
  if (root != 0) {
    copy.assign(root_data, root_data + bytes);
    return copy.data();
  }
#else
  (void)root, (void)root_data, (void)bytes, (void)copy;
#endif
  return MPI_IN_PLACE;
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
