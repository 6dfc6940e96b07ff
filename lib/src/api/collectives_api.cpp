// The public collectives: argument checks, then the algorithm chosen and run (blocking or
// nonblocking) through run_collective.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
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

namespace {

const std::byte* bytes_of(const void* p) {
  return static_cast<const std::byte*>(p);
}
std::byte* bytes_of(void* p) {
  return static_cast<std::byte*>(p);
}

CallSignature signature(Collective c, std::size_t count, int type = -1, int op = -1,
                        int root = -1) {
  return {c, count, type, op, root};
}

Request allreduce_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, ReduceOp reduce_op, const Options& options,
                       bool blocking) {
  const ArgCheck check(Collective::allreduce, s->rank);
  check.type_op(type, reduce_op);
  const std::size_t bytes = check.bytes(count, type);
  check.buffer(sendbuf, bytes, "sendbuf");
  check.buffer(recvbuf, bytes, "recvbuf");
  check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
  if (nothing_to_move(Collective::allreduce, bytes)) return {};
  CallMemory memory =
      call_memory(*s, Collective::allreduce, options,
                  {{sendbuf, bytes, "sendbuf"}, {recvbuf, bytes, "recvbuf"}}, blocking);
  AllreduceArgs args{bytes_of(sendbuf),
                     bytes_of(recvbuf),
                     count,
                     Reduction::make(type, reduce_op, s->size, memory.reducer()),
                     {}};
  return run_collective(
      s, Collective::allreduce, bytes, options,
      signature(Collective::allreduce, count, static_cast<int>(type), static_cast<int>(reduce_op)),
      blocking, [&](Operation& op, Algorithm a) { return allreduce_task(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, bytes, true, 0);
        args.recv = staged.copy_of(recvbuf, bytes, false, bytes);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      });
}

Request broadcast_impl(const std::shared_ptr<CommState>& s, void* buffer, std::size_t count,
                       DataType type, int root, const Options& options, bool blocking) {
  const ArgCheck check(Collective::broadcast, s->rank);
  check.type(type);
  const std::size_t bytes = check.bytes(count, type);
  check.buffer(buffer, bytes, "buffer");
  check.rank_in_range(root, s->size, "root");
  if (nothing_to_move(Collective::broadcast, bytes)) return {};
  CallMemory memory =
      call_memory(*s, Collective::broadcast, options, {{buffer, bytes, "buffer"}}, blocking);
  BroadcastArgs args{bytes_of(buffer), count, size_of(type), root, {}};
  return run_collective(
      s, Collective::broadcast, bytes, options,
      signature(Collective::broadcast, count, static_cast<int>(type), -1, root), blocking,
      [&](Operation& op, Algorithm a) { return broadcast_task(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        const bool is_root = s->rank == root;
        args.buffer = staged.copy_of(buffer, bytes, is_root, is_root ? 0 : bytes);
      });
}

Request reduce_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, ReduceOp reduce_op, int root,
                    const Options& options, bool blocking) {
  const ArgCheck check(Collective::reduce, s->rank);
  check.type_op(type, reduce_op);
  const std::size_t bytes = check.bytes(count, type);
  check.rank_in_range(root, s->size, "root");
  check.buffer(sendbuf, bytes, "sendbuf");
  if (s->rank == root) {
    check.buffer(recvbuf, bytes, "recvbuf");
    check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
  }
  if (nothing_to_move(Collective::reduce, bytes)) return {};
  // recvbuf is significant at the root only.
  CallMemory memory = call_memory(
      *s, Collective::reduce, options,
      {{sendbuf, bytes, "sendbuf"}, {s->rank == root ? recvbuf : nullptr, bytes, "recvbuf"}},
      blocking);
  ReduceArgs args{bytes_of(sendbuf),
                  bytes_of(recvbuf),
                  count,
                  Reduction::make(type, reduce_op, s->size, memory.reducer()),
                  root,
                  {},
                  Algorithm::ring};
  return run_collective(
      s, Collective::reduce, bytes, options,
      signature(Collective::reduce, count, static_cast<int>(type), static_cast<int>(reduce_op),
                root),
      blocking,
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
        if (s->rank == root) args.recv = staged.copy_of(recvbuf, bytes, false, bytes);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      });
}

Request allgather_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                       std::size_t count, DataType type, const Options& options, bool blocking) {
  const ArgCheck check(Collective::allgather, s->rank);
  check.type(type);
  const std::size_t block = check.bytes(count, type);
  const std::size_t total = check.total_bytes(count, s->size, type);
  check.buffer(recvbuf, total, "recvbuf");
  std::byte* own = bytes_of(recvbuf) + static_cast<std::size_t>(s->rank) * block;
  const bool in_place = sendbuf == nullptr || sendbuf == own;
  if (!in_place) check.no_partial_overlap(sendbuf, block, "sendbuf", recvbuf, total, "recvbuf");
  if (nothing_to_move(Collective::allgather, total)) return {};
  CallMemory memory = call_memory(
      *s, Collective::allgather, options,
      {{in_place ? nullptr : sendbuf, block, "sendbuf"}, {recvbuf, total, "recvbuf"}}, blocking);
  AllgatherArgs args{in_place ? nullptr : bytes_of(sendbuf),
                     bytes_of(recvbuf),
                     s->lend_equal_offsets(count),
                     size_of(type),
                     {}};
  Request done = run_collective(
      s, Collective::allgather, total, options,
      signature(Collective::allgather, count, static_cast<int>(type)), blocking,
      [&](Operation& op, Algorithm a) { return allgather_task(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        // In place, this rank's block is an input inside recvbuf: the whole buffer goes in.
        if (!in_place) args.send = staged.copy_of(sendbuf, block, true, 0);
        args.recv = staged.copy_of(recvbuf, total, in_place, total);
      });
  s->give_back_offsets(count, std::move(args.offsets));
  return done;
}

Request reduce_scatter_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                            std::vector<std::size_t> offsets, DataType type, ReduceOp reduce_op,
                            const Options& options, bool blocking, Collective collective) {
  const ArgCheck check(collective, s->rank);
  check.type_op(type, reduce_op);
  const std::size_t total = check.bytes(offsets.back(), type);
  const std::size_t mine = (offsets[static_cast<std::size_t>(s->rank) + 1] -
                            offsets[static_cast<std::size_t>(s->rank)]) *
                           size_of(type);
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, mine, "recvbuf");
  if (sendbuf != recvbuf) {
    check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, mine, "recvbuf");
  }
  if (nothing_to_move(collective, total)) {
    s->give_back_offsets(CommState::kNoSpareOffsets, std::move(offsets));
    return {};
  }
  // The signature covers every rank's block length, so COLLX_CHECK catches differing counts.
  std::uint64_t counts_hash = 0;
  for (std::size_t r = 0; r + 1 < offsets.size(); ++r) {
    counts_hash = counts_hash * 1000003u + (offsets[r + 1] - offsets[r]);
  }
  CallMemory memory = call_memory(
      *s, collective, options, {{sendbuf, total, "sendbuf"}, {recvbuf, mine, "recvbuf"}}, blocking);
  ReduceScatterArgs args{bytes_of(sendbuf),
                         bytes_of(recvbuf),
                         std::move(offsets),
                         Reduction::make(type, reduce_op, s->size, memory.reducer()),
                         {}};
  Request done = run_collective(
      s, collective, total, options,
      signature(collective, counts_hash, static_cast<int>(type), static_cast<int>(reduce_op)),
      blocking, [&](Operation& op, Algorithm a) { return reduce_scatter_task(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, total, true, 0);
        args.recv = staged.copy_of(recvbuf, mine, false, mine);
        args.reduction = Reduction::make(type, reduce_op, s->size);
      });
  // Kept for its storage (the blocks may be a reduce_scatter_v's).
  s->give_back_offsets(CommState::kNoSpareOffsets, std::move(args.offsets));
  return done;
}

// gather and scatter: the root's full buffer holds every rank's block, rank r's own block is
// block r. They differ only in which of sendbuf and recvbuf is the full buffer.
template <Collective C>
Request rooted_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                    std::size_t count, DataType type, int root, const Options& options,
                    bool blocking) {
  static_assert(C == Collective::gather || C == Collective::scatter);
  constexpr bool kGather = C == Collective::gather;
  const ArgCheck check(C, s->rank);
  check.type(type);
  check.rank_in_range(root, s->size, "root");
  const std::size_t block = check.bytes(count, type);
  const std::size_t total = check.total_bytes(count, s->size, type);
  const bool is_root = s->rank == root;
  const void* full = kGather ? recvbuf : sendbuf;
  const void* own = kGather ? sendbuf : recvbuf;
  const bool in_place = check.rooted_blocks(is_root, root, full, own, block, total, kGather);
  // The memory of the buffers this rank uses: the full one at the root, its own unless in place.
  const void* full_used = is_root ? full : nullptr;
  const void* own_used = in_place ? nullptr : own;
  if (nothing_to_move(C, total)) return {};
  CallMemory memory =
      call_memory(*s, C, options,
                  {{kGather ? own_used : full_used, kGather ? block : total, "sendbuf"},
                   {kGather ? full_used : own_used, kGather ? total : block, "recvbuf"}},
                  blocking);
  ArgsOf<C> args{kGather && in_place ? nullptr : bytes_of(sendbuf),
                 !kGather && in_place ? nullptr : bytes_of(recvbuf),
                 s->lend_equal_offsets(count),
                 size_of(type),
                 root,
                 {}};
  Request done = run_collective(
      s, C, total, options, signature(C, count, static_cast<int>(type), -1, root), blocking,
      [&](Operation& op, Algorithm a) { return run_schedule<C>(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        // The buffers this rank uses (as call_memory was given them): gather's own block in and,
        // at the root, the full buffer out (in place, the root's own block is in it: in too);
        // scatter's full buffer in at the root and the own block out.
        if (kGather) {
          if (own_used != nullptr) args.send = staged.copy_of(own_used, block, true, 0);
          if (full_used != nullptr) args.recv = staged.copy_of(full_used, total, in_place, total);
        } else {
          if (full_used != nullptr) args.send = staged.copy_of(full_used, total, true, 0);
          if (own_used != nullptr) args.recv = staged.copy_of(own_used, block, false, block);
        }
      });
  s->give_back_offsets(count, std::move(args.offsets));
  return done;
}

constexpr auto gather_impl = rooted_impl<Collective::gather>;
constexpr auto scatter_impl = rooted_impl<Collective::scatter>;

Request alltoall_impl(const std::shared_ptr<CommState>& s, const void* sendbuf, void* recvbuf,
                      std::size_t count, DataType type, const Options& options, bool blocking) {
  const ArgCheck check(Collective::alltoall, s->rank);
  check.type(type);
  const std::size_t total = check.total_bytes(count, s->size, type);
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, total, "recvbuf");
  check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, total, "recvbuf");
  if (nothing_to_move(Collective::alltoall, total)) return {};
  CallMemory memory =
      call_memory(*s, Collective::alltoall, options,
                  {{sendbuf, total, "sendbuf"}, {recvbuf, total, "recvbuf"}}, blocking);
  AlltoallArgs args{bytes_of(sendbuf), bytes_of(recvbuf), count, size_of(type), {}};
  return run_collective(
      s, Collective::alltoall, total, options,
      signature(Collective::alltoall, count, static_cast<int>(type)), blocking,
      [&](Operation& op, Algorithm a) { return alltoall_task(op, args, a); },
      std::move(memory.device),
      [&](StagedCall& staged) {
        args.send = staged.copy_of(sendbuf, total, true, 0);
        args.recv = staged.copy_of(recvbuf, total, false, total);
      });
}

Request barrier_impl(const std::shared_ptr<CommState>& s, const Options& options, bool blocking) {
  return run_collective(
      s, Collective::barrier, 0, options, signature(Collective::barrier, 0), blocking,
      [&](Operation& op, Algorithm a) { return barrier_task(op, BarrierArgs{}, a); });
}

// Point-to-point runs as an operation on the communicator's second context, with the user's
// tag as the MPI tag (tag base 0) and no algorithm choice.
Request point_to_point_impl(const std::shared_ptr<CommState>& s, const PointToPointArgs& args,
                            DataType type, bool sends, bool receives, bool blocking) {
  const ArgCheck check(Collective::sendrecv, s->rank);
  check.type(type);
  if (args.tag < 0 || args.tag > Communicator::kMaxTag) {
    check.require(false, ErrorCode::invalid_argument,
                  "tag: " + std::to_string(args.tag) + " is outside 0.." +
                      std::to_string(Communicator::kMaxTag));
  }
  if (sends) check.rank_in_range(args.dest, s->size, "dest");
  if (receives) check.rank_in_range(args.source, s->size, "source");
  check.buffer(args.send, args.send_bytes, "sendbuf");
  check.buffer(args.recv, args.recv_bytes, "recvbuf");
  // Point-to-point has no Options: its memory is detected.
  CallMemory memory = call_memory(*s, Collective::sendrecv, Options{},
                                  {{sends ? args.send : nullptr, args.send_bytes, "sendbuf"},
                                   {receives ? args.recv : nullptr, args.recv_bytes, "recvbuf"}},
                                  blocking, /*p2p=*/true);
  OpInfo info;
  info.collective = Collective::sendrecv;
  info.algorithm = Algorithm::direct;
  info.tag_base = 0;
  info.segment_bytes = 1;
  info.pipeline_depth = 1;
  if (blocking) {
    Operation op(*s->p2p_transport, info, {}, std::move(memory.device));
    run_blocking(op, point_to_point_task(op, args));
    return {};
  }
  auto op = std::make_shared<Operation>(*s->p2p_transport, info, s, std::move(memory.device));
  Task task = point_to_point_task(*op, args);
  return start_nonblocking(std::move(op), std::move(task));
}

std::size_t element_bytes(Collective c, int rank, std::size_t count, DataType type) {
  return ArgCheck(c, rank).bytes(count, type);
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

using detail::bytes_of;

namespace {

// The delegated path's shared checks (CommState::delegates): a count MPI's int holds, and for a
// reduction one the MPI library computes, delegated by its trials where its bits do not depend
// on the algorithm and by library_for_untried where they do (its size class's trials are not
// its own).
// A datatype's size, 0 for one that is not a DataType (the normal path reports it).
std::size_t checked_size(DataType type) {
  return static_cast<unsigned>(type) < static_cast<unsigned>(kDataTypeCount) ? size_of(type) : 0;
}
bool fits_int(std::size_t n) {
  return n <= static_cast<std::size_t>(std::numeric_limits<int>::max());
}
// A reduction of `bytes` in all (`count` elements) whose class goes to the MPI library: by its
// trials, or untried where its bits depend on the order of combination (library_for_untried).
bool delegated_reduction(const detail::CommState& s, Collective collective, std::size_t bytes,
                         std::size_t count, DataType type, ReduceOp op, const Options& options) {
  if (!fits_int(count)) return false;
  if (mpi_datatype(type) == MPI_DATATYPE_NULL || mpi_op(op) == MPI_OP_NULL) return false;
  const detail::CallSignature signature{Collective::allreduce, count, static_cast<int>(type),
                                        static_cast<int>(op), -1};
  return s.delegates(collective, bytes, options, detail::order_sensitive(signature, s.size));
}
// The root of a rooted call, in range.
bool root_ok(const detail::CommState& s, int root) {
  return root >= 0 && root < s.size;
}

// Whether a blocking call goes to the MPI library's own collective (the delegated path): what
// every rank's call shares; each call adds its local conditions (its buffers, its root in range).
// `count` as the call takes it (the buffer, or one rank's block).
bool delegated(const detail::CommState& s, Collective collective, std::size_t count, DataType type,
               ReduceOp op, const Options& options) {
  // Every call asks (the drop-in's too, before collx takes one): the usual answer first.
  if (!s.delegating()) [[likely]]
    return false;
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

}  // namespace

bool Communicator::goes_to_library(Collective collective, std::size_t count, DataType type,
                                   ReduceOp op) const noexcept {
  return state_ != nullptr && delegated(*state_, collective, count, type, op, Options{});
}
void Communicator::library_call_made() noexcept {
  if (state_ != nullptr) ++state_->next_sequence;
}

void Communicator::allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                             ReduceOp op, const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  if (delegated(s, Collective::allreduce, count, type, op, options) && sendbuf != nullptr &&
      recvbuf != nullptr) {
    detail::delegated_call(s, Collective::allreduce, [&] {
      return PMPI_Allreduce(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf,
                            static_cast<int>(count), mpi_datatype(type), mpi_op(op), s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::allreduce, [&] {
    detail::allreduce_impl(state_, sendbuf, recvbuf, count, type, op, options, true);
  });
}
void Communicator::allreduce(InPlace, void* buffer, std::size_t count, DataType type, ReduceOp op,
                             const Options& options) {
  allreduce(buffer, buffer, count, type, op, options);
}
Request Communicator::iallreduce(const void* sendbuf, void* recvbuf, std::size_t count,
                                 DataType type, ReduceOp op, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::allreduce, [&] {
    return detail::allreduce_impl(state_, sendbuf, recvbuf, count, type, op, options, false);
  });
}

void Communicator::broadcast(void* buffer, std::size_t count, DataType type, int root,
                             const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  if (delegated(s, Collective::broadcast, count, type, ReduceOp::sum, options) &&
      buffer != nullptr && root_ok(s, root)) {
    detail::delegated_call(s, Collective::broadcast, [&] {
      return PMPI_Bcast(buffer, static_cast<int>(count * size_of(type)), MPI_BYTE, root, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::broadcast, [&] {
    detail::broadcast_impl(state_, buffer, count, type, root, options, true);
  });
}
Request Communicator::ibroadcast(void* buffer, std::size_t count, DataType type, int root,
                                 const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::broadcast, [&] {
    return detail::broadcast_impl(state_, buffer, count, type, root, options, false);
  });
}

void Communicator::reduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                          ReduceOp op, int root, const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  if (delegated(s, Collective::reduce, count, type, op, options) && root_ok(s, root) &&
      sendbuf != nullptr && (s.rank != root || recvbuf != nullptr)) {
    const bool in_place = s.rank == root && sendbuf == recvbuf;
    std::vector<std::byte> input;
    const void* send =
        in_place ? detail::in_place_reduce_input(root, static_cast<const std::byte*>(recvbuf),
                                                 count * size_of(type), input)
                 : sendbuf;
    detail::delegated_call(s, Collective::reduce, [&] {
      return PMPI_Reduce(send, recvbuf, static_cast<int>(count), mpi_datatype(type), mpi_op(op),
                         root, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::reduce, [&] {
    detail::reduce_impl(state_, sendbuf, recvbuf, count, type, op, root, options, true);
  });
}
Request Communicator::ireduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                              ReduceOp op, int root, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::reduce, [&] {
    return detail::reduce_impl(state_, sendbuf, recvbuf, count, type, op, root, options, false);
  });
}

void Communicator::allgather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                             const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  const std::size_t block = count * checked_size(type);
  if (delegated(s, Collective::allgather, count, type, ReduceOp::sum, options) &&
      recvbuf != nullptr) {
    const void* own =
        static_cast<const std::byte*>(recvbuf) + block * static_cast<std::size_t>(s.rank);
    const bool in_place = sendbuf == nullptr || sendbuf == own;
    detail::delegated_call(s, Collective::allgather, [&] {
      return PMPI_Allgather(in_place ? MPI_IN_PLACE : sendbuf, static_cast<int>(block), MPI_BYTE,
                            recvbuf, static_cast<int>(block), MPI_BYTE, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::allgather, [&] {
    detail::allgather_impl(state_, sendbuf, recvbuf, count, type, options, true);
  });
}
void Communicator::allgather(InPlace, void* recvbuf, std::size_t count, DataType type,
                             const Options& options) {
  detail::state_of(*this);  // throws if freed
  detail::guarded(state_, Collective::allgather, [&] {
    detail::allgather_impl(state_, nullptr, recvbuf, count, type, options, true);
  });
}
Request Communicator::iallgather(const void* sendbuf, void* recvbuf, std::size_t count,
                                 DataType type, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::allgather, [&] {
    return detail::allgather_impl(state_, sendbuf, recvbuf, count, type, options, false);
  });
}

void Communicator::reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                  DataType type, ReduceOp op, const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  if (delegated(s, Collective::reduce_scatter, count, type, op, options) && sendbuf != nullptr &&
      recvbuf != nullptr) {
    detail::delegated_call(s, Collective::reduce_scatter, [&] {
      return PMPI_Reduce_scatter_block(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, recvbuf,
                                       static_cast<int>(count), mpi_datatype(type), mpi_op(op),
                                       s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::reduce_scatter, [&] {
    detail::reduce_scatter_impl(state_, sendbuf, recvbuf,
                                detail::block_offsets(*state_, count, type), type, op, options,
                                true, Collective::reduce_scatter);
  });
}
Request Communicator::ireduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count,
                                      DataType type, ReduceOp op, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::reduce_scatter, [&] {
    return detail::reduce_scatter_impl(state_, sendbuf, recvbuf,
                                       detail::block_offsets(*state_, count, type), type, op,
                                       options, false, Collective::reduce_scatter);
  });
}

namespace {
std::vector<std::size_t> prefix_sums(const Communicator& comm,
                                     std::span<const std::size_t> counts) {
  if (counts.size() != static_cast<std::size_t>(comm.size())) {
    throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", comm.rank(),
                "counts: " + std::to_string(counts.size()) + " entries for " +
                    std::to_string(comm.size()) + " ranks");
  }
  std::vector<std::size_t> offsets(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    offsets[r + 1] = offsets[r] + counts[r];
    if (offsets[r + 1] < offsets[r]) {
      throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", comm.rank(),
                  "counts: their sum exceeds the largest possible buffer");
    }
  }
  return offsets;
}
}  // namespace

void Communicator::reduce_scatter_v(const void* sendbuf, void* recvbuf,
                                    std::span<const std::size_t> counts, DataType type, ReduceOp op,
                                    const Options& options) {
  detail::state_of(*this);  // throws if freed
  detail::guarded(state_, Collective::reduce_scatter_v, [&] {
    detail::reduce_scatter_impl(state_, sendbuf, recvbuf, prefix_sums(*this, counts), type, op,
                                options, true, Collective::reduce_scatter_v);
  });
}
Request Communicator::ireduce_scatter_v(const void* sendbuf, void* recvbuf,
                                        std::span<const std::size_t> counts, DataType type,
                                        ReduceOp op, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::reduce_scatter_v, [&] {
    return detail::reduce_scatter_impl(state_, sendbuf, recvbuf, prefix_sums(*this, counts), type,
                                       op, options, false, Collective::reduce_scatter_v);
  });
}

void Communicator::gather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                          int root, const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  const std::size_t block = count * checked_size(type);
  if (delegated(s, Collective::gather, count, type, ReduceOp::sum, options) && root_ok(s, root) &&
      (s.rank == root ? recvbuf != nullptr : sendbuf != nullptr)) {
    const bool in_place = s.rank == root && (sendbuf == nullptr ||
                                             sendbuf == static_cast<const std::byte*>(recvbuf) +
                                                            block * static_cast<std::size_t>(root));
    detail::delegated_call(s, Collective::gather, [&] {
      return PMPI_Gather(in_place ? MPI_IN_PLACE : sendbuf, static_cast<int>(block), MPI_BYTE,
                         recvbuf, static_cast<int>(block), MPI_BYTE, root, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::gather, [&] {
    detail::gather_impl(state_, sendbuf, recvbuf, count, type, root, options, true);
  });
}
Request Communicator::igather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                              int root, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::gather, [&] {
    return detail::gather_impl(state_, sendbuf, recvbuf, count, type, root, options, false);
  });
}

void Communicator::scatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                           int root, const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  const std::size_t block = count * checked_size(type);
  if (delegated(s, Collective::scatter, count, type, ReduceOp::sum, options) && root_ok(s, root) &&
      (s.rank == root ? sendbuf != nullptr : recvbuf != nullptr)) {
    const bool in_place = s.rank == root && (recvbuf == nullptr ||
                                             recvbuf == static_cast<const std::byte*>(sendbuf) +
                                                            block * static_cast<std::size_t>(root));
    detail::delegated_call(s, Collective::scatter, [&] {
      return PMPI_Scatter(sendbuf, static_cast<int>(block), MPI_BYTE,
                          in_place ? MPI_IN_PLACE : recvbuf, static_cast<int>(block), MPI_BYTE,
                          root, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::scatter, [&] {
    detail::scatter_impl(state_, sendbuf, recvbuf, count, type, root, options, true);
  });
}
Request Communicator::iscatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                               int root, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::scatter, [&] {
    return detail::scatter_impl(state_, sendbuf, recvbuf, count, type, root, options, false);
  });
}

void Communicator::alltoall(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                            const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  const std::size_t block = count * checked_size(type);
  if (delegated(s, Collective::alltoall, count, type, ReduceOp::sum, options) &&
      sendbuf != nullptr && recvbuf != nullptr) {
    detail::delegated_call(s, Collective::alltoall, [&] {
      return PMPI_Alltoall(sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf, static_cast<int>(block),
                           MPI_BYTE, recvbuf, static_cast<int>(block), MPI_BYTE, s.comm);
    });
    return;
  }
  detail::guarded(state_, Collective::alltoall, [&] {
    detail::alltoall_impl(state_, sendbuf, recvbuf, count, type, options, true);
  });
}
Request Communicator::ialltoall(const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::alltoall, [&] {
    return detail::alltoall_impl(state_, sendbuf, recvbuf, count, type, options, false);
  });
}

void Communicator::barrier(const Options& options) {
  detail::CommState& s = detail::state_of(*this);  // throws if freed
  if (delegated(s, Collective::barrier, 0, DataType::uint8, ReduceOp::sum, options)) {
    detail::delegated_call(s, Collective::barrier, [&] { return PMPI_Barrier(s.comm); });
    return;
  }
  detail::guarded(state_, Collective::barrier,
                  [&] { detail::barrier_impl(state_, options, true); });
}
Request Communicator::ibarrier(const Options& options) {
  detail::state_of(*this);  // throws if freed
  return detail::guarded(state_, Collective::barrier,
                         [&] { return detail::barrier_impl(state_, options, false); });
}

void Communicator::send(const void* buffer, std::size_t count, DataType type, int dest, int tag) {
  detail::state_of(*this);
  const std::size_t bytes = detail::element_bytes(Collective::sendrecv, rank(), count, type);
  detail::point_to_point_impl(state_, {bytes_of(buffer), bytes, dest, nullptr, 0, -1, tag}, type,
                              true, false, true);
}
void Communicator::recv(void* buffer, std::size_t count, DataType type, int source, int tag) {
  detail::state_of(*this);
  const std::size_t bytes = detail::element_bytes(Collective::sendrecv, rank(), count, type);
  detail::point_to_point_impl(state_, {nullptr, 0, -1, bytes_of(buffer), bytes, source, tag}, type,
                              false, true, true);
}
void Communicator::sendrecv(const void* sendbuf, std::size_t sendcount, int dest, void* recvbuf,
                            std::size_t recvcount, int source, DataType type, int tag) {
  detail::state_of(*this);
  detail::point_to_point_impl(
      state_,
      {bytes_of(sendbuf), detail::element_bytes(Collective::sendrecv, rank(), sendcount, type),
       dest, bytes_of(recvbuf),
       detail::element_bytes(Collective::sendrecv, rank(), recvcount, type), source, tag},
      type, true, true, true);
}
Request Communicator::isend(const void* buffer, std::size_t count, DataType type, int dest,
                            int tag) {
  detail::state_of(*this);
  const std::size_t bytes = detail::element_bytes(Collective::sendrecv, rank(), count, type);
  return detail::point_to_point_impl(state_, {bytes_of(buffer), bytes, dest, nullptr, 0, -1, tag},
                                     type, true, false, false);
}
Request Communicator::irecv(void* buffer, std::size_t count, DataType type, int source, int tag) {
  detail::state_of(*this);
  const std::size_t bytes = detail::element_bytes(Collective::sendrecv, rank(), count, type);
  return detail::point_to_point_impl(state_, {nullptr, 0, -1, bytes_of(buffer), bytes, source, tag},
                                     type, false, true, false);
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
