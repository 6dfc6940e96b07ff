// The algorithm registry: one row per (collective, algorithm) that collx implements. A row
// names the schedule (the coroutine that runs the algorithm on an Operation, the only form of
// the algorithm: a blocking call runs it to completion in place, run_blocking), its model (cost
// and description, algorithms/cost_model.hpp) and, for rows that need the shared arena, the
// algorithm that runs instead where there is none. The rows of a collective stand in the file of
// its schedules (allreduce_rows() in allreduce.cpp, ...), the first row being the fallback when no
// selection rule matches; everything else (Algorithm lists, COLLX_ALGO parsing, the selector's
// checks, the cost model, collx-info, collx-bench -a all, the simulated-rank suite) reads them
// from here.
//
// Adding an algorithm: its schedule and one row in its collective's file, with its model entry
// (and, for a new name, one line in COLLX_ALGORITHM_LIST, collx/algorithm.hpp).
// docs/ARCHITECTURE.md walks through it.
#pragma once

#include <atomic>
#include <cstddef>
#include <span>
#include <tuple>
#include <vector>

#include "collectives.hpp"
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
  // Its model (algorithms/cost_model.hpp): the cost the selector's tables and collx-model
  // weigh, and the steps in words that collx-info and docs/ALGORITHMS.md show.
  const model::Entry* cost_model = nullptr;
  // How many tag phases the schedule uses: run_schedule hands it a share of exactly this many,
  // so a phase beyond them throws (Phases), and a caller that hands it fewer throws too.
  int tag_phases = 0;
  // Rows that run through the shared arena: the algorithm that runs where the operation
  // cannot use one (ranks on several nodes, device buffers). automatic: needs none.
  Algorithm without_arena = Algorithm::automatic;
  // The MPI library's own collective (Algorithm::mpi, mpi_library.cpp): host memory only (device
  // buffers go through host copies), no simulated ranks, not one of collx's algorithms.
  bool mpi_library = false;

  // Traits the layers above read instead of the algorithm's name.
  // Runs through the shared arena (where the operation can use one).
  bool uses_arena() const { return without_arena != Algorithm::automatic; }
  // Phases inside and across nodes (its model splits what crosses between nodes); on one node,
  // or with one rank per node, it runs as its flat form.
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
// Whether the MPI library's collective takes a call: `elements` fit MPI's int count, and a
// reduction (null: none) is of a type and op MPI has (no 16-bit floats, no avg). The same on
// every rank (every rank's call has the same count, type and op).
bool mpi_library_takes(const Reduction* reduction, std::size_t elements);
// The send buffer of an in-place blocking MPI_Reduce at root `root`, whose data (`bytes` of it)
// is at `root_data`: MPI_IN_PLACE, or a copy of the data in `copy` where the MPI library reads
// MPI_IN_PLACE as an address (MPICH before 4.2 at a nonzero root above its short-message size:
// pmodels/mpich#6540, a segfault in a legal call). The same bytes, one copy more, and no rank's
// decision changes.
const void* in_place_reduce_input(int root, const std::byte* root_data, std::size_t bytes,
                                  std::vector<std::byte>& copy);
// Around a blocking call of the MPI library's own collective: collx's other operations in flight
// go on inside it through the MPI library's progress callback, where it has one.
// (Inline: every delegated call makes them.)
// constinit: no TLS wrapper call (a thread_local declared extern may need dynamic init).
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
// The row of (collective, algorithm), or null.
const AlgorithmRow* find_row(Collective collective, Algorithm algorithm);
// The algorithm of the collective's MPI library row (AlgorithmRow::mpi_library), or automatic
// where it has none.
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
