// The public collectives: argument checks, then the algorithm chosen and run (blocking or
// nonblocking) through run_collective.
#include <algorithm>
#include <limits>
#include <vector>

#include "collectives.hpp"
#include "collx/communicator.hpp"
#include "collx/error.hpp"
#include "collx/mpi_types.hpp"
#include "comm_state.hpp"
#include "memory.hpp"
#include "registry.hpp"
#include "transport_mpi.hpp"
#include "validate.hpp"

namespace collx::detail {

void library_collective_failed(const CommState& s, Collective collective, int code) {
  throw_mpi_error(code, "the MPI library's collective", s.rank, to_string(collective));
}

namespace {

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}
std::byte* bytes_of(void* p) {
  return static_cast<std::byte*>(p);
}

CallSignature signature(Collective c, std::uint64_t count, DataType type, int root = -1) {
  return {c, count, static_cast<int>(type), -1, root};
}
CallSignature signature(Collective c, std::uint64_t count, DataType type, ReduceOp op,
                        int root = -1) {
  return {c, count, static_cast<int>(type), static_cast<int>(op), root};
}

// A datatype's size, 0 for one that is not a DataType (the normal path reports it).
std::size_t checked_size(DataType type) {
  return static_cast<unsigned>(type) < static_cast<unsigned>(kDataTypeCount) ? size_of(type) : 0;
}
bool fits_int(std::size_t n) {
  return n <= static_cast<std::size_t>(std::numeric_limits<int>::max());
}
// A reduction of `bytes` (`count` elements within MPI's int, of a type and op the MPI library
// has) whose class goes to the MPI library: by its trials, or untried (library_for_untried).
[[gnu::always_inline]] inline bool delegated_reduction(const CommState& s, Collective collective,
                                                       std::size_t bytes, std::size_t count,
                                                       DataType type, ReduceOp op,
                                                       const Options& options) {
  if (!fits_int(count)) return false;
  if (mpi_datatype(type) == MPI_DATATYPE_NULL || mpi_op(op) == MPI_OP_NULL) return false;
  const CallSignature signature{Collective::allreduce, count, static_cast<int>(type),
                                static_cast<int>(op), -1};
  return s.delegates(collective, bytes, options, order_sensitive(signature, s.size));
}
// Whether a checked blocking call goes to the MPI library's own collective (the delegated path),
// from what every rank's call shares. `count` as the call takes it (buffer, or one rank's block).
[[gnu::always_inline]] inline bool delegated(const CommState& s, Collective collective,
                                             std::size_t count, DataType type, ReduceOp op,
                                             const Options& options) {
  // Every call asks (the drop-in's too, before collx takes one): the usual answer first.
  if (!s.delegating()) return false;
  if (collective == Collective::barrier) return s.delegates(collective, 0, options);
  if (count == 0) return false;
  const std::size_t element = checked_size(type);
  const std::size_t ranks = static_cast<std::size_t>(s.size);
  switch (collective) {
    case Collective::allreduce:
    case Collective::reduce:
      return delegated_reduction(s, collective, count * element, count, type, op, options);
    case Collective::reduce_scatter:
      return delegated_reduction(s, collective, count * ranks * element, count * ranks, type, op,
                                 options);
    case Collective::broadcast:
      return fits_int(count * element) && s.delegates(collective, count * element, options);
    case Collective::allgather:
    case Collective::gather:
    case Collective::scatter:
    case Collective::alltoall:
      return fits_int(count * element * ranks) &&
             s.delegates(collective, count * element * ranks, options);
    default:
      return false;
  }
}

// ---- the checks that the delegated path's entry shares ----

// allreduce's checks; returns the bytes of one buffer.
std::size_t allreduce_checks(const CommState& s, const void* sendbuf, const void* recvbuf,
                             std::size_t count, DataType type, ReduceOp op) {
  const ArgCheck check(Collective::allreduce, s.rank);
  check.type_op(type, op);
  const std::size_t bytes = check.bytes(count, type);
  check.buffer(sendbuf, bytes, "sendbuf");
  check.buffer(recvbuf, bytes, "recvbuf");
  check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
  return bytes;
}
// broadcast's checks; returns the buffer's bytes.
std::size_t broadcast_checks(const CommState& s, const void* buffer, std::size_t count,
                             DataType type, int root) {
  const ArgCheck check(Collective::broadcast, s.rank);
  check.type(type);
  const std::size_t bytes = check.bytes(count, type);
  check.buffer(buffer, bytes, "buffer");
  check.rank_in_range(root, s.size, "root");
  return bytes;
}
// reduce_scatter's buffers: the whole input (`total` bytes) and this rank's block (`mine`).
void reduce_scatter_buffers(const ArgCheck& check, const void* sendbuf, const void* recvbuf,
                            std::size_t total, std::size_t mine) {
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, mine, "recvbuf");
  if (sendbuf != recvbuf)
    check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, mine, "recvbuf");
}
// reduce's checks; returns the bytes of one buffer.
std::size_t reduce_checks(const CommState& s, const void* sendbuf, const void* recvbuf,
                          std::size_t count, DataType type, ReduceOp op, int root) {
  const ArgCheck check(Collective::reduce, s.rank);
  check.type_op(type, op);
  const std::size_t bytes = check.bytes(count, type);
  check.rank_in_range(root, s.size, "root");
  check.buffer(sendbuf, bytes, "sendbuf");
  if (s.rank == root) {
    check.buffer(recvbuf, bytes, "recvbuf");
    check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
  }
  return bytes;
}
// alltoall's checks; returns the bytes of one buffer.
std::size_t alltoall_checks(const CommState& s, const void* sendbuf, const void* recvbuf,
                            std::size_t count, DataType type) {
  const ArgCheck check(Collective::alltoall, s.rank);
  check.type(type);
  const std::size_t total = check.total_bytes(count, s.size, type);
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, total, "recvbuf");
  check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, total, "recvbuf");
  return total;
}

// The blocks of allgather, gather and scatter: one rank's, every rank's, and whether the call is
// in place.
struct Blocks {
  std::size_t block;
  std::size_t total;
  bool in_place;
};
Blocks allgather_checks(const CommState& s, const void* sendbuf, const void* recvbuf,
                        std::size_t count, DataType type) {
  const ArgCheck check(Collective::allgather, s.rank);
  check.type(type);
  const std::size_t block = check.bytes(count, type);
  const std::size_t total = check.total_bytes(count, s.size, type);
  check.buffer(recvbuf, total, "recvbuf");
  const std::byte* own = bytes_of(recvbuf) + static_cast<std::size_t>(s.rank) * block;
  const bool in_place = sendbuf == nullptr || sendbuf == own;
  if (!in_place) check.no_partial_overlap(sendbuf, block, "sendbuf", recvbuf, total, "recvbuf");
  return {block, total, in_place};
}
// gather's and scatter's checks (the root's full buffer holds every rank's block).
template <Collective C>
Blocks rooted_checks(const CommState& s, const void* sendbuf, const void* recvbuf,
                     std::size_t count, DataType type, int root) {
  constexpr bool kGather = C == Collective::gather;
  const ArgCheck check(C, s.rank);
  check.type(type);
  check.rank_in_range(root, s.size, "root");
  const std::size_t block = check.bytes(count, type);
  const std::size_t total = check.total_bytes(count, s.size, type);
  const bool in_place = check.rooted_blocks(s.rank == root, root, kGather ? recvbuf : sendbuf,
                                            kGather ? sendbuf : recvbuf, block, total, kGather);
  return {block, total, in_place};
}
int library_rooted(Collective collective, MPI_Comm comm, const void* sendbuf, void* recvbuf,
                   const Blocks& b, int root) {
  const int n = static_cast<int>(b.block);
  return collective == Collective::gather
             ? library_gather(comm, sendbuf, recvbuf, n, root, b.in_place)
             : library_scatter(comm, sendbuf, recvbuf, n, root, b.in_place);
}

// Runs the schedule of collective S (reduce_scatter's for reduce_scatter_v) on `args` through
// run_collective; `host_copies(staged)` points `args` at host copies of device buffers.
template <Collective S, class HostCopies>
Request run(const std::shared_ptr<CommState>& s, Collective collective, ArgsOf<S>& args,
            std::size_t bytes, const Options& options, const CallSignature& signature,
            bool blocking, CallMemory& memory, HostCopies&& host_copies, LibraryCall library_call) {
  return run_collective(
      s, collective, bytes, options, signature, blocking,
      [&](Operation& op, Algorithm a) { return run_schedule<S>(op, args, a); },
      std::move(memory.device), host_copies, library_call);
}

Request allreduce_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, ReduceOp reduce_op, const Options& options,
                       bool blocking) {
  const std::size_t bytes = allreduce_checks(*s, sendbuf, recvbuf, count, type, reduce_op);
  if (nothing_to_move(Collective::allreduce, bytes)) return {};
  const auto library = [&] {
    return library_allreduce(s->comm, sendbuf, recvbuf, static_cast<int>(count), type, reduce_op);
  };
  CallMemory memory =
      call_memory(*s, Collective::allreduce, options,
                  {{sendbuf, bytes, "sendbuf"}, {recvbuf, bytes, "recvbuf"}}, blocking);
  AllreduceArgs args{bytes_of(sendbuf),
                     bytes_of(recvbuf),
                     count,
                     Reduction::make(type, reduce_op, s->size, memory.reducer()),
                     {}};
  return run<Collective::allreduce>(
      s, Collective::allreduce, args, bytes, options,
      signature(Collective::allreduce, count, type, reduce_op), blocking, memory,
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, bytes, true, 0);
        args.recv = staged.copy_of(recvbuf, bytes, false, bytes);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      },
      library);
}

Request broadcast_impl(const std::shared_ptr<CommState>& s, void* buffer, std::size_t count,
                       DataType type, int root, const Options& options, bool blocking) {
  const std::size_t bytes = broadcast_checks(*s, buffer, count, type, root);
  if (nothing_to_move(Collective::broadcast, bytes)) return {};
  const auto library = [&] {
    return library_broadcast(s->comm, buffer, static_cast<int>(bytes), root);
  };
  CallMemory memory =
      call_memory(*s, Collective::broadcast, options, {{buffer, bytes, "buffer"}}, blocking);
  BroadcastArgs args{bytes_of(buffer), count, size_of(type), root, {}};
  const bool is_root = s->rank == root;
  return run<Collective::broadcast>(
      s, Collective::broadcast, args, bytes, options,
      signature(Collective::broadcast, count, type, root), blocking, memory,
      [&](StagedCall& staged) {
        args.buffer = staged.copy_of(buffer, bytes, is_root, is_root ? 0 : bytes);
      },
      library);
}

Request reduce_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, ReduceOp reduce_op, int root,
                    const Options& options, bool blocking) {
  const std::size_t bytes = reduce_checks(*s, sendbuf, recvbuf, count, type, reduce_op, root);
  const bool is_root = s->rank == root;
  if (nothing_to_move(Collective::reduce, bytes)) return {};
  const auto library = [&] {
    return library_reduce(s->comm, is_root && sendbuf == recvbuf, sendbuf, recvbuf,
                          static_cast<int>(count), type, reduce_op, root);
  };
  // recvbuf is significant at the root only.
  CallMemory memory = call_memory(
      *s, Collective::reduce, options,
      {{sendbuf, bytes, "sendbuf"}, {is_root ? recvbuf : nullptr, bytes, "recvbuf"}}, blocking);
  ReduceArgs args{bytes_of(sendbuf),
                  bytes_of(recvbuf),
                  count,
                  Reduction::make(type, reduce_op, s->size, memory.reducer()),
                  root,
                  {},
                  Algorithm::ring};
  return run_collective(
      s, Collective::reduce, bytes, options,
      signature(Collective::reduce, count, type, reduce_op, root), blocking,
      [&](Operation& op, Algorithm a) {
        if (a == Algorithm::rabenseifner) {
          args.scatter_algorithm = resolve_algorithm(Collective::reduce_scatter_v,
                                                     Algorithm::automatic, bytes, s->size, s->rank);
        }
        return reduce_task(op, args, a);
      },
      std::move(memory.device),
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, bytes, true, 0);
        if (is_root) args.recv = staged.copy_of(recvbuf, bytes, false, bytes);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      },
      library);
}

Request allgather_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, const Options& options, bool blocking) {
  const Blocks blocks = allgather_checks(*s, sendbuf, recvbuf, count, type);
  const auto [block, total, in_place] = blocks;
  if (nothing_to_move(Collective::allgather, total)) return {};
  const auto library = [&] {
    return library_allgather(s->comm, sendbuf, recvbuf, static_cast<int>(block), in_place);
  };
  CallMemory memory = call_memory(
      *s, Collective::allgather, options,
      {{in_place ? nullptr : sendbuf, block, "sendbuf"}, {recvbuf, total, "recvbuf"}}, blocking);
  AllgatherArgs args{in_place ? nullptr : bytes_of(sendbuf),
                     bytes_of(recvbuf),
                     s->lend_equal_offsets(count),
                     size_of(type),
                     {}};
  Request done = run<Collective::allgather>(
      s, Collective::allgather, args, total, options, signature(Collective::allgather, count, type),
      blocking, memory,
      [&](StagedCall& staged) {
        // In place, this rank's block is an input inside recvbuf: the whole buffer goes in.
        if (!in_place) args.send = staged.copy_of(sendbuf, block, true, 0);
        args.recv = staged.copy_of(recvbuf, total, in_place, total);
      },
      library);
  s->give_back_offsets(count, std::move(args.offsets));
  return done;
}

Request reduce_scatter_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                            std::vector<std::size_t> offsets, DataType type, ReduceOp reduce_op,
                            const Options& options, bool blocking, Collective collective) {
  const ArgCheck check(collective, s->rank);
  check.type_op(type, reduce_op);
  const std::size_t total = check.bytes(offsets.back(), type);
  const auto r = static_cast<std::size_t>(s->rank);
  const std::size_t mine = (offsets[r + 1] - offsets[r]) * size_of(type);
  reduce_scatter_buffers(check, sendbuf, recvbuf, total, mine);
  // Equal blocks only: reduce_scatter_v runs the library's row through collx's path.
  const auto equal_blocks = [&] {
    return library_reduce_scatter_block(s->comm, sendbuf, recvbuf,
                                        static_cast<int>(mine / size_of(type)), type, reduce_op);
  };
  const LibraryCall library =
      collective == Collective::reduce_scatter ? LibraryCall(equal_blocks) : LibraryCall();
  if (nothing_to_move(collective, total)) {
    s->give_back_offsets(CommState::kNoSpareOffsets, std::move(offsets));
    return {};
  }
  // The signature covers every rank's block length, so COLLX_CHECK catches differing counts.
  std::uint64_t counts_hash = 0;
  for (std::size_t j = 0; j + 1 < offsets.size(); ++j) {
    counts_hash = counts_hash * 1000003u + (offsets[j + 1] - offsets[j]);
  }
  CallMemory memory = call_memory(
      *s, collective, options, {{sendbuf, total, "sendbuf"}, {recvbuf, mine, "recvbuf"}}, blocking);
  ReduceScatterArgs args{bytes_of(sendbuf),
                         bytes_of(recvbuf),
                         std::move(offsets),
                         Reduction::make(type, reduce_op, s->size, memory.reducer()),
                         {}};
  Request done = run<Collective::reduce_scatter>(
      s, collective, args, total, options, signature(collective, counts_hash, type, reduce_op),
      blocking, memory,
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, total, true, 0);
        args.recv = staged.copy_of(recvbuf, mine, false, mine);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      },
      library);
  // Kept for its storage (the blocks may be a reduce_scatter_v's).
  s->give_back_offsets(CommState::kNoSpareOffsets, std::move(args.offsets));
  return done;
}

// gather and scatter differ only in which of sendbuf and recvbuf is the root's full buffer.
template <Collective C>
Request rooted_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, int root, const Options& options,
                    bool blocking) {
  static_assert(C == Collective::gather || C == Collective::scatter);
  constexpr bool kGather = C == Collective::gather;
  const Blocks blocks = rooted_checks<C>(*s, sendbuf, recvbuf, count, type, root);
  const auto [block, total, in_place] = blocks;
  const bool is_root = s->rank == root;
  const void* full = kGather ? recvbuf : sendbuf;
  const void* own = kGather ? sendbuf : recvbuf;
  // The buffers this rank uses: the full one at the root, its own unless in place; gather's own
  // block in and full buffer out, scatter's the other way round.
  const void* full_used = is_root ? full : nullptr;
  const void* own_used = in_place ? nullptr : own;
  const void* in = kGather ? own_used : full_used;
  const void* out = kGather ? full_used : own_used;
  const std::size_t in_bytes = kGather ? block : total;
  const std::size_t out_bytes = kGather ? total : block;
  if (nothing_to_move(C, total)) return {};
  const auto library = [&] { return library_rooted(C, s->comm, sendbuf, recvbuf, blocks, root); };
  CallMemory memory = call_memory(
      *s, C, options, {{in, in_bytes, "sendbuf"}, {out, out_bytes, "recvbuf"}}, blocking);
  ArgsOf<C> args{kGather && in_place ? nullptr : bytes_of(sendbuf),
                 !kGather && in_place ? nullptr : bytes_of(recvbuf),
                 s->lend_equal_offsets(count),
                 size_of(type),
                 root,
                 {}};
  Request done = run<C>(
      s, C, args, total, options, signature(C, count, type, root), blocking, memory,
      [&](StagedCall& staged) {
        if (in != nullptr) args.send = staged.copy_of(in, in_bytes, true, 0);
        // Downloaded too for a gather in place: the root's own block is in it.
        if (out != nullptr) {
          args.recv = staged.copy_of(out, out_bytes, kGather && in_place, out_bytes);
        }
      },
      library);
  s->give_back_offsets(count, std::move(args.offsets));
  return done;
}

constexpr auto gather_impl = rooted_impl<Collective::gather>;
constexpr auto scatter_impl = rooted_impl<Collective::scatter>;

Request alltoall_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                      std::size_t count, DataType type, const Options& options, bool blocking) {
  const std::size_t total = alltoall_checks(*s, sendbuf, recvbuf, count, type);
  if (nothing_to_move(Collective::alltoall, total)) return {};
  const auto library = [&] {
    return library_alltoall(s->comm, sendbuf, recvbuf, static_cast<int>(count * size_of(type)));
  };
  CallMemory memory =
      call_memory(*s, Collective::alltoall, options,
                  {{sendbuf, total, "sendbuf"}, {recvbuf, total, "recvbuf"}}, blocking);
  AlltoallArgs args{bytes_of(sendbuf), bytes_of(recvbuf), count, size_of(type), {}};
  return run<Collective::alltoall>(
      s, Collective::alltoall, args, total, options, signature(Collective::alltoall, count, type),
      blocking, memory,
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, total, true, 0);
        args.recv = staged.copy_of(recvbuf, total, false, total);
      },
      library);
}

Request barrier_impl(const std::shared_ptr<CommState>& s, const Options& options, bool blocking) {
  const auto library = [&] { return library_barrier(s->comm); };
  BarrierArgs args;
  return run_collective(
      s, Collective::barrier, 0, options, {Collective::barrier, 0}, blocking,
      [&](Operation& op, Algorithm a) { return run_schedule<Collective::barrier>(op, args, a); },
      nullptr, nullptr, library);
}

// Point-to-point runs as an operation on the communicator's second context, with the user's
// tag as the MPI tag (tag base 0) and no algorithm choice. `sends`, `receives`: which half runs.
Request point_to_point_impl(const std::shared_ptr<CommState>& s, const void* sendbuf,
                            std::size_t sendcount, int dest, void* recvbuf, std::size_t recvcount,
                            int source, DataType type, int tag, bool sends, bool receives,
                            bool blocking) {
  const ArgCheck check(Collective::sendrecv, s->rank);
  check.type(type);
  const std::size_t send_bytes = sends ? check.bytes(sendcount, type) : 0;
  const std::size_t recv_bytes = receives ? check.bytes(recvcount, type) : 0;
  const PointToPointArgs args{
      bytes_of(sendbuf),      send_bytes, sends ? dest : -1, bytes_of(recvbuf), recv_bytes,
      receives ? source : -1, tag};
  if (tag < 0 || tag > Communicator::kMaxTag) {
    check.fail(ErrorCode::invalid_argument, "tag: " + std::to_string(tag) + " is outside 0.." +
                                                std::to_string(Communicator::kMaxTag));
  }
  if (sends) check.rank_in_range(dest, s->size, "dest");
  if (receives) check.rank_in_range(source, s->size, "source");
  check.buffer(sendbuf, send_bytes, "sendbuf");
  check.buffer(recvbuf, recv_bytes, "recvbuf");
  // Point-to-point has no Options: its memory is detected (a half that does not run has 0 bytes).
  CallMemory memory = call_memory(
      *s, Collective::sendrecv, Options{},
      {{sendbuf, send_bytes, "sendbuf"}, {recvbuf, recv_bytes, "recvbuf"}}, blocking, /*p2p=*/true);
  const OpInfo info{
      .collective = Collective::sendrecv, .algorithm = Algorithm::direct, .segment_bytes = 1};
  return launch(
      s, info, nullptr, blocking, [&](Operation& op) { return point_to_point_task(op, args); },
      std::move(memory.device));
}

// ---- the delegated path's entry ----
// A blocking call whose size class settled on the MPI library (CommState::delegates) makes its
// PMPI_ call from the public entry, ahead of entry(), whose bookkeeping, error paths and dispatch
// would cost as much as the MPI library's call. Only a call that passes every check goes this
// way; any other returns false and takes the normal path, which reports it.

// Runs `checks(s)` (the normal path's argument checks, which throw collx::Error) and, where they
// pass and the call's class goes to the MPI library, `call(s)` on the delegated path. A call of
// no elements that passes them is done here (nothing_to_move), delegating or not: the normal
// path's entry would cost it several times what the MPI library's call of nothing costs.
template <Collective C, class Checks, class Call>
bool fast(const std::shared_ptr<CommState>& state, std::size_t count, DataType type, ReduceOp op,
          const Options& options, Checks&& checks, Call&& call) {
  constexpr bool kMovesData = C != Collective::barrier;
  CommState* s = state.get();
  if (s == nullptr || !(s->delegating() || (kMovesData && count == 0)) || !s->notices->quiet())
    return false;
  try {
    checks(*s);
    if (kMovesData && count == 0) return nothing_to_move(C, 0);
    if (!delegated(*s, C, count, type, op, options)) return false;
  } catch (const Error&) {
    return false;  // the normal path reports it
  }
  run_delegated(*s, C, [&] { return call(*s); });
  return true;
}

bool fast_allreduce(const std::shared_ptr<CommState>& state, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, ReduceOp op, const Options& options) {
  return fast<Collective::allreduce>(
      state, count, type, op, options,
      [&](CommState& s) { allreduce_checks(s, sendbuf, recvbuf, count, type, op); },
      [&](CommState& s) {
        return library_allreduce(s.comm, sendbuf, recvbuf, static_cast<int>(count), type, op);
      });
}
bool fast_broadcast(const std::shared_ptr<CommState>& state, void* buffer, std::size_t count,
                    DataType type, int root, const Options& options) {
  return fast<Collective::broadcast>(
      state, count, type, ReduceOp::sum, options,
      [&](CommState& s) { broadcast_checks(s, buffer, count, type, root); },
      [&](CommState& s) {
        return library_broadcast(s.comm, buffer, static_cast<int>(count * size_of(type)), root);
      });
}
bool fast_reduce(const std::shared_ptr<CommState>& state, const void* sendbuf, void* recvbuf,
                 std::size_t count, DataType type, ReduceOp op, int root, const Options& options) {
  return fast<Collective::reduce>(
      state, count, type, op, options,
      [&](CommState& s) { reduce_checks(s, sendbuf, recvbuf, count, type, op, root); },
      [&](CommState& s) {
        return library_reduce(s.comm, s.rank == root && sendbuf == recvbuf, sendbuf, recvbuf,
                              static_cast<int>(count), type, op, root);
      });
}
bool fast_alltoall(const std::shared_ptr<CommState>& state, const void* sendbuf, void* recvbuf,
                   std::size_t count, DataType type, const Options& options) {
  return fast<Collective::alltoall>(
      state, count, type, ReduceOp::sum, options,
      [&](CommState& s) { alltoall_checks(s, sendbuf, recvbuf, count, type); },
      [&](CommState& s) {
        return library_alltoall(s.comm, sendbuf, recvbuf, static_cast<int>(count * size_of(type)));
      });
}
bool fast_allgather(const std::shared_ptr<CommState>& state, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, const Options& options) {
  Blocks blocks{};
  return fast<Collective::allgather>(
      state, count, type, ReduceOp::sum, options,
      [&](CommState& s) { blocks = allgather_checks(s, sendbuf, recvbuf, count, type); },
      [&](CommState& s) {
        return library_allgather(s.comm, sendbuf, recvbuf, static_cast<int>(blocks.block),
                                 blocks.in_place);
      });
}
template <Collective C>
bool fast_rooted(const std::shared_ptr<CommState>& state, const void* sendbuf, void* recvbuf,
                 std::size_t count, DataType type, int root, const Options& options) {
  Blocks blocks{};
  return fast<C>(
      state, count, type, ReduceOp::sum, options,
      [&](CommState& s) { blocks = rooted_checks<C>(s, sendbuf, recvbuf, count, type, root); },
      [&](CommState& s) { return library_rooted(C, s.comm, sendbuf, recvbuf, blocks, root); });
}
constexpr auto fast_gather = fast_rooted<Collective::gather>;
constexpr auto fast_scatter = fast_rooted<Collective::scatter>;
bool fast_reduce_scatter(const std::shared_ptr<CommState>& state, const void* sendbuf,
                         void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                         const Options& options) {
  return fast<Collective::reduce_scatter>(
      state, count, type, op, options,
      [&](CommState& s) {
        const ArgCheck check(Collective::reduce_scatter, s.rank);
        check.type_op(type, op);
        reduce_scatter_buffers(check, sendbuf, recvbuf, check.total_bytes(count, s.size, type),
                               count * size_of(type));
      },
      [&](CommState& s) {
        return library_reduce_scatter_block(s.comm, sendbuf, recvbuf, static_cast<int>(count), type,
                                            op);
      });
}
bool fast_barrier(const std::shared_ptr<CommState>& state, const Options& options) {
  return fast<Collective::barrier>(
      state, 0, DataType::uint8, ReduceOp::sum, options, [](CommState&) {},
      [&](CommState& s) { return library_barrier(s.comm); });
}
// Collectives without one.
template <class... Args>
bool no_fast(const Args&...) {
  return false;
}

// A blocking call that the delegated path did not take. Out of line: the public entry's frame
// then holds the delegated path's registers alone, not the normal path's captured arguments.
template <class Impl, class... Args>
[[gnu::noinline]] void blocking_entry(const std::shared_ptr<CommState>& s, Collective collective,
                                      Impl&& impl, const Args&... args) {
  entry(s, collective, impl, args..., true);
}

// reduce_scatter's blocks of `count` elements per rank, checked before their offsets are
// computed (a product that wraps would pass every later check).
std::vector<std::size_t> block_offsets(CommState& s, std::size_t count, DataType type) {
  const ArgCheck check(Collective::reduce_scatter, s.rank);
  check.type(type);
  check.total_bytes(count, s.size, type);
  return s.lend_equal_offsets(count);
}

}  // namespace

}  // namespace collx::detail

namespace collx {

namespace {

// reduce_scatter's blocks: `count` elements for every rank, or counts[r] for rank r.
Request reduce_scatter_blocks(const std::shared_ptr<detail::CommState>& s, const void* sendbuf,
                              void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                              const Options& options, bool blocking) {
  return detail::reduce_scatter_impl(s, sendbuf, recvbuf, detail::block_offsets(*s, count, type),
                                     type, op, options, blocking, Collective::reduce_scatter);
}
Request reduce_scatter_counts(const std::shared_ptr<detail::CommState>& s, const void* sendbuf,
                              void* recvbuf, std::span<const std::size_t> counts, DataType type,
                              ReduceOp op, const Options& options, bool blocking) {
  if (counts.size() != static_cast<std::size_t>(s->size)) {
    throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", s->rank,
                "counts: " + std::to_string(counts.size()) + " entries for " +
                    std::to_string(s->size) + " ranks");
  }
  std::vector<std::size_t> offsets(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r + 1] = offsets[r] + counts[r];
    if (offsets[r + 1] < offsets[r]) {
      throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", s->rank,
                  "counts: their sum exceeds the largest possible buffer");
    }
  }
  return detail::reduce_scatter_impl(s, sendbuf, recvbuf, std::move(offsets), type, op, options,
                                     blocking, Collective::reduce_scatter_v);
}

}  // namespace

bool Communicator::goes_to_library(Collective collective, std::size_t count, DataType type,
                                   ReduceOp op) const noexcept {
  return state_ != nullptr && detail::delegated(*state_, collective, count, type, op, Options{});
}
void Communicator::library_call_made() noexcept {
  if (state_ != nullptr) ++state_->next_sequence;
}

// A collective's blocking call `name` and its nonblocking i`name`: one entry, told apart by its
// last argument. `params`: the public signature; then what the entry passes to `impl`.
#define COLLX_BLOCKING_AND_NONBLOCKING(name, impl, fast, params, ...)         \
  void Communicator::name params {                                            \
    if (detail::fast(state_, __VA_ARGS__)) return;                            \
    detail::blocking_entry(state_, Collective::name, impl, __VA_ARGS__);      \
  }                                                                           \
  Request Communicator::i##name params {                                      \
    return detail::entry(state_, Collective::name, impl, __VA_ARGS__, false); \
  }

COLLX_BLOCKING_AND_NONBLOCKING(allreduce, detail::allreduce_impl, fast_allreduce,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, const Options& options),
                               sendbuf, recvbuf, count, type, op, options)
COLLX_BLOCKING_AND_NONBLOCKING(broadcast, detail::broadcast_impl, fast_broadcast,
                               (void* buffer, std::size_t count, DataType type, int root,
                                const Options& options),
                               buffer, count, type, root, options)
COLLX_BLOCKING_AND_NONBLOCKING(reduce, detail::reduce_impl, fast_reduce,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, int root, const Options& options),
                               sendbuf, recvbuf, count, type, op, root, options)
COLLX_BLOCKING_AND_NONBLOCKING(allgather, detail::allgather_impl, fast_allgather,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, const Options& options),
                               sendbuf, recvbuf, count, type, options)
COLLX_BLOCKING_AND_NONBLOCKING(reduce_scatter, reduce_scatter_blocks, fast_reduce_scatter,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, const Options& options),
                               sendbuf, recvbuf, count, type, op, options)
COLLX_BLOCKING_AND_NONBLOCKING(reduce_scatter_v, reduce_scatter_counts, no_fast,
                               (const void* sendbuf, void* recvbuf,
                                std::span<const std::size_t> counts, DataType type, ReduceOp op,
                                const Options& options),
                               sendbuf, recvbuf, counts, type, op, options)
COLLX_BLOCKING_AND_NONBLOCKING(gather, detail::gather_impl, fast_gather,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, int root, const Options& options),
                               sendbuf, recvbuf, count, type, root, options)
COLLX_BLOCKING_AND_NONBLOCKING(scatter, detail::scatter_impl, fast_scatter,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, int root, const Options& options),
                               sendbuf, recvbuf, count, type, root, options)
COLLX_BLOCKING_AND_NONBLOCKING(alltoall, detail::alltoall_impl, fast_alltoall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, const Options& options),
                               sendbuf, recvbuf, count, type, options)
COLLX_BLOCKING_AND_NONBLOCKING(barrier, detail::barrier_impl, fast_barrier,
                               (const Options& options), options)
#undef COLLX_BLOCKING_AND_NONBLOCKING

void Communicator::allreduce(InPlace, void* buffer, std::size_t count, DataType type, ReduceOp op,
                             const Options& options) {
  allreduce(buffer, buffer, count, type, op, options);
}
void Communicator::allgather(InPlace, void* recvbuf, std::size_t count, DataType type,
                             const Options& options) {
  allgather(nullptr, recvbuf, count, type, options);
}

void Communicator::send(const void* buffer, std::size_t count, DataType type, int dest, int tag) {
  detail::point_to_point_impl(detail::live(state_), buffer, count, dest, nullptr, 0, -1, type, tag,
                              true, false, true);
}
void Communicator::recv(void* buffer, std::size_t count, DataType type, int source, int tag) {
  detail::point_to_point_impl(detail::live(state_), nullptr, 0, -1, buffer, count, source, type,
                              tag, false, true, true);
}
void Communicator::sendrecv(const void* sendbuf, std::size_t sendcount, int dest, void* recvbuf,
                            std::size_t recvcount, int source, DataType type, int tag) {
  detail::point_to_point_impl(detail::live(state_), sendbuf, sendcount, dest, recvbuf, recvcount,
                              source, type, tag, true, true, true);
}
Request Communicator::isend(const void* buffer, std::size_t count, DataType type, int dest,
                            int tag) {
  return detail::point_to_point_impl(detail::live(state_), buffer, count, dest, nullptr, 0, -1,
                                     type, tag, true, false, false);
}
Request Communicator::irecv(void* buffer, std::size_t count, DataType type, int source, int tag) {
  return detail::point_to_point_impl(detail::live(state_), nullptr, 0, -1, buffer, count, source,
                                     type, tag, false, true, false);
}

std::optional<Communicator> Communicator::split(int color, int key) const {
  MPI_Comm out = MPI_COMM_NULL;
  detail::check_mpi(
      MPI_Comm_split(detail::state_of(*this).comm, color < 0 ? MPI_UNDEFINED : color, key, &out),
      "MPI_Comm_split", rank());
  if (out == MPI_COMM_NULL) return std::nullopt;
  return Communicator(Adopt{}, out);
}

Communicator Communicator::create_group(std::span<const int> ranks) const {
  auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::invalid_argument, "create_group", rank(), why);
  };
  if (ranks.empty()) fail("ranks: empty");
  bool member = false;
  for (int r : ranks) {
    if (r < 0 || r >= size()) {
      fail("ranks: " + std::to_string(r) + " is not a rank of a communicator of " +
           std::to_string(size()));
    }
    member = member || r == rank();
  }
  // Checked on every rank that calls, before anything collective: a list with a rank twice
  // is an error wherever it is seen (MPI_Group_incl would leave the listed ranks waiting).
  std::vector<int> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    fail("ranks: " + std::to_string(*twice) + " is listed twice");
  if (!member) fail("ranks: this rank is not listed (only the listed ranks call create_group)");
  MPI_Group parent_group = MPI_GROUP_NULL;
  MPI_Group group = MPI_GROUP_NULL;
  detail::check_mpi(MPI_Comm_group(detail::state_of(*this).comm, &parent_group), "MPI_Comm_group",
                    rank());
  detail::check_mpi(
      MPI_Group_incl(parent_group, static_cast<int>(ranks.size()), ranks.data(), &group),
      "MPI_Group_incl", rank());
  MPI_Comm out = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(detail::state_of(*this).comm, group, 0, &out);
  MPI_Group_free(&group);
  MPI_Group_free(&parent_group);
  detail::check_mpi(rc, "MPI_Comm_create_group", rank());
  return Communicator(Adopt{}, out);
}

}  // namespace collx
