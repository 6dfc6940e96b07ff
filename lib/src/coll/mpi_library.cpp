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

#include <climits>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "collx/mpi_types.hpp"
#include "config.hpp"
#include "registry.hpp"

namespace collx::detail {

namespace {

[[noreturn]] void unsupported(Operation& op, const std::string& why) {
  throw Error(ErrorCode::unsupported, std::string(to_string(op.info().collective)),
              op.transport().rank(), "algorithm mpi: " + why);
}

void check(Operation* op, Transport& t, int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  PMPI_Error_string(code, message, &length);
  const std::string collective = op ? std::string(to_string(op->info().collective)) : "mpi";
  throw Error(ErrorCode::mpi, collective, t.rank(), std::string(call) + " failed: " + message);
}

// A count as MPI's int, or the reason it is not one.
int as_int(Operation* op, Transport& t, std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw Error(ErrorCode::unsupported,
                op ? std::string(to_string(op->info().collective)) : std::string("mpi"), t.rank(),
                "algorithm mpi: " + std::to_string(count) + " elements exceed MPI's int count");
  }
  return static_cast<int>(count);
}

// While this thread blocks in one of the MPI library's blocking collectives, collx's other
// operations in flight go on through the MPI library's progress engine (where it offers a
// callback: Open MPI's opal_progress_register, found at run time): a peer may wait in one of them
// for this rank's part, as MPI's progress rule lets it. Elsewhere (MPICH) they wait for this
// call to end, as any operation of collx's waits while the program is outside collx.
thread_local bool in_blocking_library_call = false;

// Called at every poll of the MPI library's progress loop, the program's own calls' included:
// the global count first, so that with nothing of collx's in flight (a delegated call, a
// program's MPI_Wait) a poll costs one load, not a thread-local lookup (__tls_get_addr in a
// shared library) and a function-local static's guard.
int progress_callback() {
  if (operations_in_flight.load(std::memory_order_relaxed) == 0) return 0;
  if (in_blocking_library_call) Engine::instance().progress_elsewhere();
  return 0;
}

void register_progress_callback_once() {
  static const bool registered = [] {
    using Register = int (*)(int (*)());
    auto add = reinterpret_cast<Register>(dlsym(RTLD_DEFAULT, "opal_progress_register"));
    return add != nullptr && add(progress_callback) == 0;
  }();
  (void)registered;
}

// Runs `call` (a blocking collective of the MPI library) with the callback above armed.
template <class Call>
void blocking_library_call(Call&& call) {
  library_call_begins();
  try {
    call();
  } catch (...) {
    library_call_ends();
    throw;
  }
  library_call_ends();
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

// Runs a call of the MPI library: `blocking(comm)` for a blocking call, else `start(comm,
// &request)` and a wait through the engine.
template <class Blocking, class Start>
Task library_call(Operation& op, Blocking blocking, Start start) {
  const MPI_Comm comm = op.transport().library_comm();
  if (comm == MPI_COMM_NULL) unsupported(op, "no MPI communicator (simulated ranks)");
  if (op.device_memory()) unsupported(op, "device memory goes through host copies");
  std::vector<int> counts;  // what MPI reads until the call completes (reduce_scatter's)
  // With COLLX_TIMEOUT (on every rank alike) a blocking call runs the nonblocking form too: a
  // wait in collx's engine ends at the timeout, a wait inside the MPI library would not.
  if (op.info().blocking && config().timeout_seconds <= 0) {
    blocking_library_call([&] { blocking(comm, counts); });
    co_return;
  }
  MPI_Request request = MPI_REQUEST_NULL;
  start(comm, &request, counts);
  const LibraryRequestDone done(&request);
  co_await op.until(done);
}

const void* in_place_or(const void* send, const void* recv) {
  return send == recv ? MPI_IN_PLACE : send;
}

// ---- the collectives: each is its MPI call, blocking and nonblocking ----

void allreduce_call(Operation* op, Transport& t, MPI_Comm comm, const AllreduceArgs& a,
                    MPI_Request* request, std::vector<int>& /*counts*/) {
  const int n = as_int(op, t, a.count);
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const void* send = in_place_or(a.send, a.recv);
  check(op, t,
        request ? PMPI_Iallreduce(send, a.recv, n, type, reduce, comm, request)
                : PMPI_Allreduce(send, a.recv, n, type, reduce, comm),
        "MPI_Allreduce");
}

void broadcast_call(Operation* op, Transport& t, MPI_Comm comm, const BroadcastArgs& a,
                    MPI_Request* request, std::vector<int>& /*counts*/) {
  const int n = as_int(op, t, a.count * a.element_size);
  check(op, t,
        request ? PMPI_Ibcast(a.buffer, n, MPI_BYTE, a.root, comm, request)
                : PMPI_Bcast(a.buffer, n, MPI_BYTE, a.root, comm),
        "MPI_Bcast");
}

void reduce_call(Operation* op, Transport& t, MPI_Comm comm, const ReduceArgs& a,
                 MPI_Request* request, std::vector<int>& /*counts*/) {
  const int n = as_int(op, t, a.count);
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const bool root = t.rank() == a.root;
  const void* send = root ? in_place_or(a.send, a.recv) : a.send;
  std::vector<std::byte> input;
  if (send == MPI_IN_PLACE && request == nullptr)
    send = in_place_reduce_input(a.root, a.recv, a.count * size_of(a.reduction.type), input);
  check(op, t,
        request ? PMPI_Ireduce(send, a.recv, n, type, reduce, a.root, comm, request)
                : PMPI_Reduce(send, a.recv, n, type, reduce, a.root, comm),
        "MPI_Reduce");
}

// The bytes of one block of an equal-block call.
int block_bytes(Operation* op, Transport& t, const std::vector<std::size_t>& offsets,
                std::size_t element_size) {
  return as_int(op, t, (offsets[1] - offsets[0]) * element_size);
}

void allgather_call(Operation* op, Transport& t, MPI_Comm comm, const AllgatherArgs& a,
                    MPI_Request* request, std::vector<int>& /*counts*/) {
  const int block = block_bytes(op, t, a.offsets, a.element_size);
  const std::byte* own = a.recv + a.offsets[static_cast<std::size_t>(t.rank())] * a.element_size;
  const void* send = a.send == nullptr || a.send == own ? MPI_IN_PLACE : a.send;
  check(op, t,
        request ? PMPI_Iallgather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, comm, request)
                : PMPI_Allgather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, comm),
        "MPI_Allgather");
}

void reduce_scatter_call(Operation* op, Transport& t, MPI_Comm comm, const ReduceScatterArgs& a,
                         MPI_Request* request, std::vector<int>& counts) {
  const MPI_Datatype type = mpi_datatype(a.reduction.type);
  const MPI_Op reduce = mpi_op(a.reduction.op);
  const void* send = in_place_or(a.send, a.recv);
  const std::size_t p = a.offsets.size() - 1;
  bool equal = true;
  for (std::size_t r = 1; r < p && equal; ++r)
    equal = a.offsets[r + 1] - a.offsets[r] == a.offsets[1] - a.offsets[0];
  if (equal) {
    const int n = as_int(op, t, a.offsets[1] - a.offsets[0]);
    check(op, t,
          request ? PMPI_Ireduce_scatter_block(send, a.recv, n, type, reduce, comm, request)
                  : PMPI_Reduce_scatter_block(send, a.recv, n, type, reduce, comm),
          "MPI_Reduce_scatter_block");
    return;
  }
  // `counts` outlives a nonblocking call (it is kept in the schedule's frame): MPI may read
  // them until the call completes.
  counts.resize(p);
  for (std::size_t r = 0; r < p; ++r)
    counts[r] = as_int(op, t, a.offsets[r + 1] - a.offsets[r]);
  check(op, t,
        request ? PMPI_Ireduce_scatter(send, a.recv, counts.data(), type, reduce, comm, request)
                : PMPI_Reduce_scatter(send, a.recv, counts.data(), type, reduce, comm),
        "MPI_Reduce_scatter");
}

void gather_call(Operation* op, Transport& t, MPI_Comm comm, const GatherArgs& a,
                 MPI_Request* request, std::vector<int>& /*counts*/) {
  const int block = block_bytes(op, t, a.offsets, a.element_size);
  const bool root = t.rank() == a.root;
  const void* send = root && a.send == nullptr ? MPI_IN_PLACE : a.send;
  check(op, t,
        request
            ? PMPI_Igather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, a.root, comm, request)
            : PMPI_Gather(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, a.root, comm),
        "MPI_Gather");
}

void scatter_call(Operation* op, Transport& t, MPI_Comm comm, const ScatterArgs& a,
                  MPI_Request* request, std::vector<int>& /*counts*/) {
  const int block = block_bytes(op, t, a.offsets, a.element_size);
  const bool root = t.rank() == a.root;
  void* recv = root && a.recv == nullptr ? MPI_IN_PLACE : a.recv;
  check(op, t,
        request
            ? PMPI_Iscatter(a.send, block, MPI_BYTE, recv, block, MPI_BYTE, a.root, comm, request)
            : PMPI_Scatter(a.send, block, MPI_BYTE, recv, block, MPI_BYTE, a.root, comm),
        "MPI_Scatter");
}

void alltoall_call(Operation* op, Transport& t, MPI_Comm comm, const AlltoallArgs& a,
                   MPI_Request* request, std::vector<int>& /*counts*/) {
  const int block = as_int(op, t, a.count * a.element_size);
  const void* send = in_place_or(a.send, a.recv);
  check(op, t,
        request ? PMPI_Ialltoall(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, comm, request)
                : PMPI_Alltoall(send, block, MPI_BYTE, a.recv, block, MPI_BYTE, comm),
        "MPI_Alltoall");
}

void barrier_call(Operation* op, Transport& t, MPI_Comm comm, const BarrierArgs&,
                  MPI_Request* request, std::vector<int>&) {
  check(op, t, request ? PMPI_Ibarrier(comm, request) : PMPI_Barrier(comm), "MPI_Barrier");
}

// The schedule of a collective's call.
template <Collective C, void (*Call)(Operation*, Transport&, MPI_Comm, const ArgsOf<C>&,
                                     MPI_Request*, std::vector<int>&)>
Task schedule(Operation& op, ArgsOf<C> args) {
  Transport& t = op.transport();
  return library_call(
      op,
      [&op, &t, args](MPI_Comm comm, std::vector<int>& counts) {
        Call(&op, t, comm, args, nullptr, counts);
      },
      [&op, &t, args](MPI_Comm comm, MPI_Request* request, std::vector<int>& counts) {
        Call(&op, t, comm, args, request, counts);
      });
}

template <Collective C, void (*Call)(Operation*, Transport&, MPI_Comm, const ArgsOf<C>&,
                                     MPI_Request*, std::vector<int>&)>
AlgorithmRow library_row() {
  return mpi_library_row<C>(schedule<C, Call>);
}

}  // namespace

void library_call_begins() {
  register_progress_callback_once();
  in_blocking_library_call = true;
}
void library_call_ends() {
  in_blocking_library_call = false;
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
      library_row<Collective::allreduce, allreduce_call>(),
      library_row<Collective::broadcast, broadcast_call>(),
      library_row<Collective::reduce, reduce_call>(),
      library_row<Collective::allgather, allgather_call>(),
      library_row<Collective::reduce_scatter, reduce_scatter_call>(),
      library_row<Collective::gather, gather_call>(),
      library_row<Collective::scatter, scatter_call>(),
      library_row<Collective::alltoall, alltoall_call>(),
      library_row<Collective::barrier, barrier_call>(),
  };
  return rows;
}

}  // namespace collx::detail

namespace collx {

MPI_Datatype mpi_datatype(DataType type) {
  switch (type) {
    case DataType::int8:
      return MPI_INT8_T;
    case DataType::uint8:
      return MPI_UINT8_T;
    case DataType::int32:
      return MPI_INT32_T;
    case DataType::uint32:
      return MPI_UINT32_T;
    case DataType::int64:
      return MPI_INT64_T;
    case DataType::uint64:
      return MPI_UINT64_T;
    case DataType::float32:
      return MPI_FLOAT;
    case DataType::float64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;  // 16-bit floats: MPI has none
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      return MPI_MAX;
    default:
      return MPI_OP_NULL;  // avg: MPI has none
  }
}

}  // namespace collx
