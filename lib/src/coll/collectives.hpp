// The collectives' algorithm tasks, callable on any transport (the entry points and the
// in-process simulator run these). Dispatchers take arguments by reference and the coroutine
// copies them into its frame; an algorithm posts only on its share of the tag phases (Phases).
//
// GCC 12 destroys a non-trivially-destructible temporary inside a co_await expression twice:
// in coroutines pass such arguments as named locals or spans, never as temporaries.
#pragma once

#include <bit>
#include <cstddef>
#include <vector>

#include "blocks.hpp"
#include "collx/algorithm.hpp"
#include "cost_model.hpp"
#include "node_layout.hpp"
#include "operation.hpp"
#include "reduction.hpp"

namespace collx::detail {

// ---- allreduce ----
struct AllreduceArgs {
  const std::byte* send = nullptr;  // may equal recv (in place)
  std::byte* recv = nullptr;
  std::size_t count = 0;
  Reduction reduction;
  Phases phases;
};
Task allreduce_task(Operation& op, const AllreduceArgs& args, Algorithm algorithm);

// ---- broadcast: root's buffer to every rank ----
struct BroadcastArgs {
  std::byte* buffer = nullptr;
  std::size_t count = 0;
  std::size_t element_size = 1;
  int root = 0;
  Phases phases;
};
Task broadcast_task(Operation& op, const BroadcastArgs& args, Algorithm algorithm);

// ---- reduce: op over every rank's send into recv at the root ----
struct ReduceArgs {
  const std::byte* send = nullptr;  // at the root may equal recv (in place)
  std::byte* recv = nullptr;        // significant at the root only
  std::size_t count = 0;
  Reduction reduction;
  int root = 0;
  Phases phases;
  // Rabenseifner's reduce-scatter half (the selector's choice for a reduce_scatter_v of this
  // size, made by the caller: schedules do not consult the selector).
  Algorithm scatter_algorithm = Algorithm::ring;
};
Task reduce_task(Operation& op, const ReduceArgs& args, Algorithm algorithm);

// ---- allgather: block r (offsets[r] .. offsets[r+1] elements) comes from rank r ----
struct AllgatherArgs {
  const std::byte* send = nullptr;  // null or recv + offset(rank): in place
  std::byte* recv = nullptr;
  std::vector<std::size_t> offsets;  // nranks + 1 prefix sums, in elements
  std::size_t element_size = 1;
  Phases phases;
};
Task allgather_task(Operation& op, const AllgatherArgs& args, Algorithm algorithm);

// ---- reduce_scatter: op over every rank's full send; rank r keeps block r ----
struct ReduceScatterArgs {
  const std::byte* send = nullptr;   // offsets.back() elements
  std::byte* recv = nullptr;         // block r; may alias send (then written only at the end)
  std::vector<std::size_t> offsets;  // nranks + 1 prefix sums, in elements
  Reduction reduction;
  Phases phases;
};
Task reduce_scatter_task(Operation& op, const ReduceScatterArgs& args, Algorithm algorithm);

// ---- gather: block r from rank r to the root; scatter: block r from the root to rank r ----
// The root's full buffer holds every block: gather's recv, scatter's send. The other buffer is
// the rank's own block (null at the root: in place).
struct RootedArgs {
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::vector<std::size_t> offsets;  // nranks + 1 prefix sums, in elements
  std::size_t element_size = 1;
  int root = 0;
  Phases phases;
};
using GatherArgs = RootedArgs;
using ScatterArgs = RootedArgs;
Task gather_task(Operation& op, const GatherArgs& args, Algorithm algorithm);
Task scatter_task(Operation& op, const ScatterArgs& args, Algorithm algorithm);

// ---- alltoall: block j of rank i's send becomes block i of rank j's recv ----
struct AlltoallArgs {
  const std::byte* send = nullptr;  // may equal recv (in place)
  std::byte* recv = nullptr;
  std::size_t count = 0;  // elements per block
  std::size_t element_size = 1;
  Phases phases;
};
Task alltoall_task(Operation& op, const AlltoallArgs& args, Algorithm algorithm);
// The input to send from: a.send, or in place a copy of the buffer made in `copy` (a schedule
// that overwrites blocks before it has sent them).
const std::byte* stable_input(Operation& op, const AlltoallArgs& a, ScratchBuffer& copy);

// ---- barrier ----
struct BarrierArgs {
  Phases phases;
};
Task barrier_task(Operation& op, const BarrierArgs& args, Algorithm algorithm);

// ---- point to point (tag = the user's tag; the operation's own tag base is ignored) ----
struct PointToPointArgs {
  const std::byte* send = nullptr;
  std::size_t send_bytes = 0;
  int dest = -1;  // -1: no send
  std::byte* recv = nullptr;
  std::size_t recv_bytes = 0;
  int source = -1;  // -1: no receive
  int tag = 0;
};
Task point_to_point_task(Operation& op, PointToPointArgs args);

// ---- shared memory: through the transport's SharedArena (shm_collectives.cpp) ----
// Whether this operation can: its ranks share an arena, its buffers are host memory.
bool shared_memory_usable(Operation& op);
// Runs `body` (a shared-memory task) in its turn on the arena, after the shared-memory
// operations started before it; or on a given arena where this rank is `me` (a node-aware
// composite holds its node's turn for its whole run).
Task in_turn(Operation& op, Task body);
Task in_turn(Operation& op, SharedArena& arena, int me, Task body);
// This rank's node arena where the operation can run its node phases through it; else null.
SharedArena* node_arena_for(Operation& op, const patterns::NodeLayout& layout);
// The shared-memory schedules (their rows name the point-to-point fallback, registry.hpp).
Task broadcast_shared_memory(Operation& op, BroadcastArgs args);
// The shared-memory rows whose blocking call of one ring slot (a rank) can run at once, without
// an operation: the schedule's one step, from run_collective (shared_memory_at_once).
constexpr bool runs_at_once(Collective c) {
  return c == Collective::broadcast || c == Collective::reduce || c == Collective::gather ||
         c == Collective::scatter;
}
// Whether this rank `me` of `nranks` may run a blocking call on `arena` at once: the arena is
// the call's, and no operation holds or awaits a turn there (nor any is in flight in this
// process: a progress thread could take a turn).
bool arena_free_at_once(SharedArena& arena, int me, int nranks);
// The one step of a blocking broadcast of one ring slot (not as pointers), a reduce of one
// slot, a gather or scatter of one slot a rank (not as pointers), run at once: each waits
// within a spin (SharedArena::spin) at most, a producer for room in its ring (a scatter's root
// for all its slots), a reader or root for the slots it reads; false where the call is larger or
// the spin ends first, with nothing done: the operation runs it. The same slots and counters as
// their schedules, so ranks may take either.
bool broadcast_shared_memory_at_once(SharedArena& arena, int me, const BroadcastArgs& args);
bool reduce_shared_memory_at_once(SharedArena& arena, int me, const ReduceArgs& args);
bool gather_shared_memory_at_once(SharedArena& arena, int me, const GatherArgs& args);
bool scatter_shared_memory_at_once(SharedArena& arena, int me, const ScatterArgs& args);
// Collective C's (runs_at_once) blocking call of `args` run at once where the arena is free.
template <Collective C, class Args>
bool shared_memory_at_once(SharedArena& arena, int me, int nranks, const Args& args) {
  static_assert(runs_at_once(C));
  if (!arena_free_at_once(arena, me, nranks)) return false;
  if constexpr (C == Collective::broadcast) {
    return broadcast_shared_memory_at_once(arena, me, args);
  } else if constexpr (C == Collective::reduce) {
    return reduce_shared_memory_at_once(arena, me, args);
  } else if constexpr (C == Collective::gather) {
    return gather_shared_memory_at_once(arena, me, args);
  } else {
    return scatter_shared_memory_at_once(arena, me, args);
  }
}
// Gather's (kGather) or scatter's.
template <bool kGather>
Task rooted_shared_memory(Operation& op, RootedArgs args);
Task allgather_shared_memory(Operation& op, AllgatherArgs args);
Task reduce_shared_memory(Operation& op, ReduceArgs args);
Task allreduce_shared_memory(Operation& op, AllreduceArgs args);
Task reduce_scatter_shared_memory(Operation& op, ReduceScatterArgs args);
Task alltoall_shared_memory(Operation& op, AlltoallArgs args);

// ---- node-aware algorithms (hierarchical, multi_leader; docs/ALGORITHMS.md) ----
// Their parts run on groups of ranks from the transport's node layout: node_split gives it where
// the operation spans nodes and some node holds several ranks; else null (a flat algorithm runs).
const patterns::NodeLayout* node_split(Operation& op);

// Whether the node-aware pipelines' node phases on messages run the butterfly (and recursive
// doubling to gather) rather than the ring: on many nodes of 2^j ranks each, where a rank's
// block of a node segment, `block_bytes`, is at most one segment.
inline bool halving_inside_node(const Operation& op, const patterns::NodeLayout& layout,
                                std::size_t block_bytes) {
  return layout.nodes() >= model::kManyNodes && layout.uniform() &&
         std::has_single_bit(static_cast<unsigned>(layout.max_ranks_per_node())) &&
         block_bytes <= op.segment_bytes();
}

// By node, the rank that holds the buffer for its node: the root on its node, else the leader.
std::vector<int> node_heads(const patterns::NodeLayout& layout, int root);

// The node-aware allgather's and reduce_scatter's order of the blocks (uniform nodes): by local
// rank first, so that region i, the blocks of local rank i's ranks (by node), is contiguous.
struct LocalRankOrder {
  std::vector<int> order;       // position -> rank
  std::vector<std::size_t> at;  // where each position starts (elements); p + 1 prefix sums
  int nodes = 1;
  int per_node = 1;
  // The per_node + 1 offsets of the regions.
  std::vector<std::size_t> regions() const;
  // The nodes + 1 offsets of region `local`'s blocks, from the region's start.
  std::vector<std::size_t> within(int local) const;
};
LocalRankOrder local_rank_order(const patterns::NodeLayout& layout,
                                const patterns::BlockLayout& blocks);

// The nblocks + 1 block offsets of a layout.
inline std::vector<std::size_t> offsets_of(const patterns::BlockLayout& layout) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(layout.nblocks()) + 1);
  for (int b = 0; b <= layout.nblocks(); ++b)
    offsets[static_cast<std::size_t>(b)] = layout.offset(b);
  return offsets;
}
// Prefix sums of `count` elements per rank over `nranks` ranks.
inline std::vector<std::size_t> equal_offsets(std::size_t count, int nranks) {
  return offsets_of(patterns::BlockLayout{count * static_cast<std::size_t>(nranks), nranks});
}

}  // namespace collx::detail
