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
#include <climits>
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
  // Its results are the same bits whatever its segment size (each element is combined in one
  // order), so auto may time its segment sizes on order-sensitive calls (segments_keep_bits()).
  bool segments_keep_bits = false;

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

// A row whose results do not depend on its segment size (AlgorithmRow::segments_keep_bits;
// tests/sim/collectives_sim_test.cpp checks each such row bit for bit).
inline AlgorithmRow segments_keep_bits(AlgorithmRow r) {
  r.segments_keep_bits = true;
  return r;
}

// Collective c's row of algorithm a, whose model entry is model::c_a (a schedule whose name holds
// a comma goes in parentheses): COLLX_ROW(allreduce, ring, allreduce_ring, 2) is
// row<Collective::allreduce>(Algorithm::ring, allreduce_ring, model::allreduce_ring, 2).
#define COLLX_ROW(c, a, schedule, ...) \
  row<Collective::c>(Algorithm::a, schedule, model::c##_##a, __VA_ARGS__)

// The row of the MPI library's own collective C (mpi_library.cpp): no tag phases.
template <Collective C>
AlgorithmRow mpi_library_row(Schedule<ArgsOf<C>> schedule) {
  AlgorithmRow r = row<C>(Algorithm::mpi, schedule, model::mpi_library, 0);
  r.mpi_library = true;
  return r;
}

// Each file's rows (its collectives' in COLLX_COLLECTIVE_LIST's order), beside their schedules.
std::span<const AlgorithmRow> allreduce_rows();
std::span<const AlgorithmRow> broadcast_rows();
std::span<const AlgorithmRow> reduce_rows();
std::span<const AlgorithmRow> allgather_rows();
std::span<const AlgorithmRow> reduce_scatter_rows();
std::span<const AlgorithmRow> gather_scatter_rows();
std::span<const AlgorithmRow> alltoall_rows();
std::span<const AlgorithmRow> barrier_sendrecv_rows();
// The MPI library's own collectives, one row per collective but sendrecv (mpi_library.cpp).
std::span<const AlgorithmRow> mpi_library_rows();
// ---- the MPI library's own collectives, as collx's calls make them ----
// Whether the MPI library's collective takes a call: `elements` fit MPI's int, and a reduction is
// of a type and op MPI has (no 16-bit floats, no avg). The same on every rank.
inline bool library_takes(std::size_t elements) {
  return elements <= static_cast<std::size_t>(INT_MAX);
}
[[gnu::always_inline]] inline bool library_takes(std::size_t elements, DataType type, ReduceOp op) {
  return library_takes(elements) && mpi_has(type, op);
}
// One call of the MPI library's collective, as both Algorithm::mpi's schedules (mpi_library.cpp)
// and the delegated path (api/collectives_api.cpp) describe it, so that a call makes the same MPI
// call whichever way it goes. `count` elements of `type`: a reduction's (reducing), else bytes,
// one rank's block where the collective has blocks. MPI_IN_PLACE as `send` (scatter's `recv`)
// where the call is in place. Counts fit MPI's int.
struct LibraryArgs {
  const void* send = nullptr;
  void* recv = nullptr;  // broadcast's buffer
  int count = 0;
  int root = 0;
  MPI_Op op = MPI_OP_NULL;
  MPI_Datatype type = MPI_BYTE;
  const int* counts = nullptr;  // reduce_scatter's blocks where they differ (MPI_Reduce_scatter)
  static LibraryArgs reducing(const void* send, void* recv, int count, DataType type, ReduceOp op,
                              int root = 0) {
    return {send, recv, count, root, mpi_op(op), mpi_datatype(type)};
  }
};
inline const void* in_place_or(const void* send, const void* recv) {
  return send == recv ? MPI_IN_PLACE : send;
}
// The root's blocking MPI_Reduce in place where MPICH before 4.2 reads MPI_IN_PLACE as an address
// at a nonzero root above its short-message size (pmodels/mpich#6540, a segfault in a legal call):
// the root passes a copy of its data, the same bytes, one copy more.
int library_reduce_in_place(MPI_Comm comm, const LibraryArgs& a);
// Collective C's call `a`: blocking where `request` is null, else its nonblocking form.
template <Collective C>
int library_collective(MPI_Comm comm, const LibraryArgs& a, MPI_Request* request = nullptr) {
  using enum Collective;
  const auto call = [&](auto blocking, auto nonblocking, auto... args) {
    return request != nullptr ? nonblocking(args..., comm, request) : blocking(args..., comm);
  };
  if constexpr (C == allreduce) {
    return call(PMPI_Allreduce, PMPI_Iallreduce, a.send, a.recv, a.count, a.type, a.op);
  } else if constexpr (C == broadcast) {
    return call(PMPI_Bcast, PMPI_Ibcast, a.recv, a.count, a.type, a.root);
  } else if constexpr (C == reduce) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
    if (a.send == MPI_IN_PLACE && a.root != 0 && request == nullptr)
      return library_reduce_in_place(comm, a);
#endif
    return call(PMPI_Reduce, PMPI_Ireduce, a.send, a.recv, a.count, a.type, a.op, a.root);
  } else if constexpr (C == allgather) {
    return call(PMPI_Allgather, PMPI_Iallgather, a.send, a.count, a.type, a.recv, a.count, a.type);
  } else if constexpr (C == reduce_scatter) {
    if (a.counts != nullptr)
      return call(PMPI_Reduce_scatter, PMPI_Ireduce_scatter, a.send, a.recv, a.counts, a.type,
                  a.op);
    return call(PMPI_Reduce_scatter_block, PMPI_Ireduce_scatter_block, a.send, a.recv, a.count,
                a.type, a.op);
  } else if constexpr (C == gather) {
    return call(PMPI_Gather, PMPI_Igather, a.send, a.count, a.type, a.recv, a.count, a.type,
                a.root);
  } else if constexpr (C == scatter) {
    return call(PMPI_Scatter, PMPI_Iscatter, a.send, a.count, a.type, a.recv, a.count, a.type,
                a.root);
  } else if constexpr (C == alltoall) {
    return call(PMPI_Alltoall, PMPI_Ialltoall, a.send, a.count, a.type, a.recv, a.count, a.type);
  } else {
    static_assert(C == barrier);
    return call(PMPI_Barrier, PMPI_Ibarrier);
  }
}

// A blocking call of the MPI library's collective, `call()`: collx's operations in flight go on
// inside it through the MPI library's progress callback, where it has one. Inline (every
// delegated call makes one); constinit: no TLS wrapper call.
COLLX_FAST_TLS extern constinit bool in_blocking_library_call;
extern std::atomic<bool> progress_callback_registered;
void register_progress_callback();
template <class Call>
[[gnu::always_inline]] inline int blocking_library_call(Call&& call) {
  if (!progress_callback_registered.load(std::memory_order_acquire)) [[unlikely]]
    register_progress_callback();
  in_blocking_library_call = true;
  const int code = call();
  in_blocking_library_call = false;
  return code;
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

// A node-aware row's schedule: `Schedule(op, a, layout, node_arena)` where node_split gives a
// layout (with kUniform, one whose nodes hold as many ranks each), its node phases through the
// node's arena where there is one, whose turn is taken when the operation is built (call order)
// and held to the end. Elsewhere the flat algorithm that `Flat` names runs in its place.
template <Collective C,
          Task (*Schedule)(Operation&, ArgsOf<C>, const patterns::NodeLayout&, SharedArena*),
          Algorithm (*Flat)(const Operation&, const ArgsOf<C>&), bool kUniform = false>
Task with_node_arena(Operation& op, ArgsOf<C> a) {
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr || (kUniform && !layout->uniform()))
    return run_schedule<C>(op, a, Flat(op, a));
  SharedArena* arena = node_arena_for(op, *layout);
  if (arena == nullptr) return Schedule(op, std::move(a), *layout, nullptr);
  return in_turn(op, *arena, layout->local_rank(op.rank()),
                 Schedule(op, std::move(a), *layout, arena));
}

}  // namespace collx::detail
