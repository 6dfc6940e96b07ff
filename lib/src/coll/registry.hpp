// The algorithm registry: one row per (collective, algorithm) that collx implements, naming the
// schedule (the coroutine, the algorithm's only form: a blocking call runs it to completion in
// place), its model (algorithms/cost_model.hpp) and, for arena rows, the algorithm that runs
// where there is no arena. A collective's rows stand in the file of its schedules, the first
// being the fallback when no selection rule matches; everything else reads them from here.
//
// Adding an algorithm: its schedule and one row in its collective's file, with its model entry
// (and, for a new name, one line in COLLX_ALGORITHM_LIST). docs/ARCHITECTURE.md walks through it.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <tuple>
#include <utility>

#include "collectives.hpp"
#include "collx/mpi_types.hpp"
#include "cost_model.hpp"
#include "fast_tls.hpp"

namespace collx::detail {

// The argument struct of each collective's schedules, in COLLX_COLLECTIVE_LIST's order
// (reduce_scatter_v runs reduce_scatter's); row<C> checks each schedule against it.
using ArgsTable = std::tuple<AllreduceArgs, BroadcastArgs, ReduceArgs, AllgatherArgs,
                             ReduceScatterArgs, ReduceScatterArgs, GatherArgs, ScatterArgs,
                             AlltoallArgs, BarrierArgs, PointToPointArgs>;
static_assert(std::tuple_size_v<ArgsTable> == kCollectiveCount);
template <Collective C>
using ArgsOf = std::tuple_element_t<static_cast<std::size_t>(C), ArgsTable>;

template <class Args>
using Schedule = Task (*)(Operation&, Args);
struct AlgorithmRow {
  using Erased = void (*)();
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::automatic;
  Erased schedule = nullptr;
  // Its model: the cost the selector weighs, and the steps in words that collx-info shows.
  const model::Entry* cost_model = nullptr;
  // How many tag phases the schedule uses: run_schedule hands it a share of exactly this many.
  int tag_phases = 0;
  // Arena rows: the algorithm that runs where the operation cannot use one; automatic: none.
  Algorithm without_arena = Algorithm::automatic;
  // The MPI library's own collective (Algorithm::mpi): host memory only, no simulated ranks.
  bool mpi_library = false;

  // Traits the layers above read instead of the algorithm's name.
  bool uses_arena() const { return without_arena != Algorithm::automatic; }
  // Phases inside and across nodes; on one node, or one rank per node, its flat form runs.
  bool node_aware() const { return cost_model != nullptr && cost_model->node_aware; }
  // Device buffers go through host copies whatever the transport: the node-aware rows run their
  // phases inside a node through the node's arena, the MPI library takes host memory only.
  bool host_copies() const { return node_aware() || mpi_library; }
};

// A row, type-checked against the collective's argument struct.
template <Collective C>
AlgorithmRow row(Algorithm algorithm, Schedule<ArgsOf<C>> schedule, const model::Entry& cost_model,
                 int tag_phases, Algorithm without_arena = Algorithm::automatic) {
  return {C,           algorithm,  reinterpret_cast<AlgorithmRow::Erased>(schedule),
          &cost_model, tag_phases, without_arena};
}

// The row of the MPI library's own collective C (mpi_library.cpp): no tag phases.
template <Collective C>
AlgorithmRow mpi_library_row(Schedule<ArgsOf<C>> schedule) {
  AlgorithmRow r = row<C>(Algorithm::mpi, schedule, model::mpi_library, 0);
  r.mpi_library = true;
  return r;
}

// Each collective's rows, defined beside its schedules.
std::span<const AlgorithmRow> allreduce_rows();
std::span<const AlgorithmRow> broadcast_rows();
std::span<const AlgorithmRow> reduce_rows();
std::span<const AlgorithmRow> allgather_rows();
std::span<const AlgorithmRow> reduce_scatter_rows();
std::span<const AlgorithmRow> gather_rows();
std::span<const AlgorithmRow> scatter_rows();
std::span<const AlgorithmRow> alltoall_rows();
std::span<const AlgorithmRow> barrier_rows();
std::span<const AlgorithmRow> sendrecv_rows();
// The MPI library's own collectives, one row per collective but sendrecv (mpi_library.cpp).
std::span<const AlgorithmRow> mpi_library_rows();
// Whether the MPI library's collective takes a call: `elements` fit MPI's int, and a reduction
// (null: none) is of a type and op MPI has (no 16-bit floats, no avg). The same on every rank.
bool mpi_library_takes(const Reduction* reduction, std::size_t elements);
// ---- the MPI library's own collectives, as collx's calls make them ----
// Blocking where `request` is null, else the nonblocking form; counts fit MPI's int. Both
// Algorithm::mpi's schedules (mpi_library.cpp) and the delegated path (api/collectives_api.cpp)
// make these, so a call runs the same MPI call whichever way it goes.
template <class Blocking, class Nonblocking, class... Args>
int blocking_or_not(Blocking blocking, Nonblocking nonblocking, MPI_Request* request,
                    Args... args) {
  return request != nullptr ? nonblocking(args..., request) : blocking(args...);
}
inline const void* in_place_or(const void* send, const void* recv) {
  return send == recv ? MPI_IN_PLACE : send;
}
inline int library_allreduce(MPI_Comm comm, const void* send, void* recv, int count, DataType type,
                             ReduceOp op, MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Allreduce, PMPI_Iallreduce, request, in_place_or(send, recv), recv,
                         count, mpi_datatype(type), mpi_op(op), comm);
}
inline int library_broadcast(MPI_Comm comm, void* buffer, int bytes, int root,
                             MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Bcast, PMPI_Ibcast, request, buffer, bytes, MPI_BYTE, root, comm);
}
// The root's blocking MPI_Reduce in place. Out of line: MPICH before 4.2 reads MPI_IN_PLACE as
// an address at a nonzero root above its short-message size (pmodels/mpich#6540, a segfault in a
// legal call), so there the root passes a copy of its data: the same bytes, one copy more.
int library_reduce_in_place(MPI_Comm comm, void* buffer, int count, DataType type, ReduceOp op,
                            int root);
// `root_in_place`: this rank is the root and its call is in place.
inline int library_reduce(MPI_Comm comm, bool root_in_place, const void* send, void* recv,
                          int count, DataType type, ReduceOp op, int root,
                          MPI_Request* request = nullptr) {
  if (root_in_place && request == nullptr)
    return library_reduce_in_place(comm, recv, count, type, op, root);
  return blocking_or_not(PMPI_Reduce, PMPI_Ireduce, request, root_in_place ? MPI_IN_PLACE : send,
                         recv, count, mpi_datatype(type), mpi_op(op), root, comm);
}
inline int library_allgather(MPI_Comm comm, const void* send, void* recv, int block_bytes,
                             bool in_place, MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Allgather, PMPI_Iallgather, request, in_place ? MPI_IN_PLACE : send,
                         block_bytes, MPI_BYTE, recv, block_bytes, MPI_BYTE, comm);
}
inline int library_reduce_scatter_block(MPI_Comm comm, const void* send, void* recv, int count,
                                        DataType type, ReduceOp op,
                                        MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Reduce_scatter_block, PMPI_Ireduce_scatter_block, request,
                         in_place_or(send, recv), recv, count, mpi_datatype(type), mpi_op(op),
                         comm);
}
// In place: the root's block stays where it is (MPI_IN_PLACE as gather's send, scatter's recv).
inline int library_gather(MPI_Comm comm, const void* send, void* recv, int block_bytes, int root,
                          bool in_place, MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Gather, PMPI_Igather, request, in_place ? MPI_IN_PLACE : send,
                         block_bytes, MPI_BYTE, recv, block_bytes, MPI_BYTE, root, comm);
}
inline int library_scatter(MPI_Comm comm, const void* send, void* recv, int block_bytes, int root,
                           bool in_place, MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Scatter, PMPI_Iscatter, request, send, block_bytes, MPI_BYTE,
                         in_place ? MPI_IN_PLACE : recv, block_bytes, MPI_BYTE, root, comm);
}
inline int library_alltoall(MPI_Comm comm, const void* send, void* recv, int block_bytes,
                            MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Alltoall, PMPI_Ialltoall, request, in_place_or(send, recv),
                         block_bytes, MPI_BYTE, recv, block_bytes, MPI_BYTE, comm);
}
inline int library_barrier(MPI_Comm comm, MPI_Request* request = nullptr) {
  return blocking_or_not(PMPI_Barrier, PMPI_Ibarrier, request, comm);
}

// Around a blocking call of the MPI library's collective: collx's operations in flight go on
// inside it through the MPI library's progress callback, where it has one. Inline (every
// delegated call makes them); constinit: no TLS wrapper call.
COLLX_FAST_TLS extern constinit bool in_blocking_library_call;
extern std::atomic<bool> progress_callback_registered;
void register_progress_callback();
inline void library_call_begins() {
  if (!progress_callback_registered.load(std::memory_order_acquire)) [[unlikely]]
    register_progress_callback();
  in_blocking_library_call = true;
}
inline void library_call_ends() {
  in_blocking_library_call = false;
}

// Every row, collective by collective.
std::span<const AlgorithmRow> registry();
// The collective whose schedules run `collective` (reduce_scatter_v runs reduce_scatter's).
Collective schedules_of(Collective collective);
// Whether `collective` has a root: its schedules' arguments name one.
constexpr bool rooted(Collective collective) {
  return [collective]<std::size_t... I>(std::index_sequence<I...>) {
    return ((collective == static_cast<Collective>(I) &&
             requires(std::tuple_element_t<I, ArgsTable> a) { a.root; }) ||
            ...);
  }(std::make_index_sequence<kCollectiveCount>{});
}
static_assert(rooted(Collective::broadcast) && rooted(Collective::reduce) &&
              rooted(Collective::gather) && rooted(Collective::scatter) &&
              !rooted(Collective::allreduce) && !rooted(Collective::barrier));
// The row of (collective, algorithm), or null.
const AlgorithmRow* find_row(Collective collective, Algorithm algorithm);
// The algorithm of the collective's MPI library row, or automatic where it has none.
Algorithm library_algorithm(Collective collective);

[[noreturn]] void no_algorithm(Operation& op, Collective collective, Algorithm algorithm);

// Runs `algorithm`'s schedule for collective C (throws for an algorithm C does not have), on
// a share of `args.phases` of the row's tag_phases.
template <Collective C>
Task run_schedule(Operation& op, const ArgsOf<C>& args, Algorithm algorithm) {
  const AlgorithmRow* r = find_row(C, algorithm);
  if (r == nullptr) no_algorithm(op, C, algorithm);
  const bool arena = r->uses_arena() && shared_memory_usable(op);
  if (arena && op.info().algorithm == algorithm) op.mark_arena_row();
  if (r->uses_arena() && !arena) r = find_row(C, r->without_arena);
  ArgsOf<C> a = args;
  if constexpr (requires { a.phases; })
    a.phases = a.phases.part(to_string(r->algorithm).data(), 0, r->tag_phases);
  Task task = reinterpret_cast<Schedule<ArgsOf<C>>>(r->schedule)(op, std::move(a));
  if (arena) return in_turn(op, std::move(task));
  return task;
}

}  // namespace collx::detail
