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

// ---- one descriptor per collective ----
// A call as its public entry takes it: its arguments; `checks`, the argument checks that the
// normal path and the delegated path share (they throw collx::Error and return what the call
// moves); `library`, the call as the MPI library's blocking collective, from what `checks`
// returned. run_call (below) is each one's normal path; fast (further below) its delegated path.

// A call's send and receive buffers, of `count` elements of `type` (one rank's block where the
// collective has blocks).
struct Buffers {
  const void* sendbuf;
  void* recvbuf;
  std::size_t count;
  DataType type;
};

// A reduction's call: Buffers, and the op to reduce with.
template <Collective C>
struct ReductionCall : Buffers {
  static constexpr Collective kCollective = C;
  ReduceOp op;
  // The checks' start: the (type, op) pair.
  ArgCheck type_op_checked(const CommState& s) const {
    const ArgCheck check(C, s.rank);
    check.type_op(type, op);
    return check;
  }
};

struct AllreduceCall : ReductionCall<Collective::allreduce> {
  // The bytes of one buffer.
  std::size_t checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t bytes = check.bytes(count, type);
    check.buffer(sendbuf, bytes, "sendbuf");
    check.buffer(recvbuf, bytes, "recvbuf");
    check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
    return bytes;
  }
  int library(const CommState& s, std::size_t) const {
    return library_allreduce(s.comm, sendbuf, recvbuf, static_cast<int>(count), type, op);
  }
};

struct BroadcastCall {
  static constexpr Collective kCollective = Collective::broadcast;
  void* buffer;
  std::size_t count;
  DataType type;
  int root;
  // The buffer's bytes.
  std::size_t checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t bytes = check.bytes(count, type);
    check.buffer(buffer, bytes, "buffer");
    check.rank_in_range(root, s.size, "root");
    return bytes;
  }
  int library(const CommState& s, std::size_t bytes) const {
    return library_broadcast(s.comm, buffer, static_cast<int>(bytes), root);
  }
};

struct ReduceCall : ReductionCall<Collective::reduce> {
  int root;
  // The bytes of one buffer.
  std::size_t checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t bytes = check.bytes(count, type);
    check.rank_in_range(root, s.size, "root");
    check.buffer(sendbuf, bytes, "sendbuf");
    if (s.rank == root) {
      check.buffer(recvbuf, bytes, "recvbuf");
      check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
    }
    return bytes;
  }
  int library(const CommState& s, std::size_t) const {
    return library_reduce(s.comm, s.rank == root && sendbuf == recvbuf, sendbuf, recvbuf,
                          static_cast<int>(count), type, op, root);
  }
};

// The blocks of allgather, gather and scatter: one rank's, every rank's, and whether the call is
// in place.
struct Blocks {
  std::size_t block;
  std::size_t total;
  bool in_place;
};

struct AllgatherCall : Buffers {
  static constexpr Collective kCollective = Collective::allgather;
  Blocks checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t block = check.bytes(count, type);
    const std::size_t total = check.total_bytes(count, s.size, type);
    check.buffer(recvbuf, total, "recvbuf");
    const std::byte* own = bytes_of(recvbuf) + static_cast<std::size_t>(s.rank) * block;
    const bool in_place = sendbuf == nullptr || sendbuf == own;
    if (!in_place) check.no_partial_overlap(sendbuf, block, "sendbuf", recvbuf, total, "recvbuf");
    return {block, total, in_place};
  }
  int library(const CommState& s, const Blocks& b) const {
    return library_allgather(s.comm, sendbuf, recvbuf, static_cast<int>(b.block), b.in_place);
  }
};

// reduce_scatter's buffers: the whole input (`total` bytes) and this rank's block (`mine`).
void reduce_scatter_buffers(const ArgCheck& check, const void* sendbuf, const void* recvbuf,
                            std::size_t total, std::size_t mine) {
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, mine, "recvbuf");
  if (sendbuf != recvbuf)
    check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, mine, "recvbuf");
}

// `count` elements for every rank.
struct ReduceScatterCall : ReductionCall<Collective::reduce_scatter> {
  // The bytes of the whole input.
  std::size_t checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t total = check.total_bytes(count, s.size, type);
    reduce_scatter_buffers(check, sendbuf, recvbuf, total, count * size_of(type));
    return total;
  }
  int library(const CommState& s, std::size_t) const {
    return library_reduce_scatter_block(s.comm, sendbuf, recvbuf, static_cast<int>(count), type,
                                        op);
  }
};

// counts[r] elements for rank r: its MPI library row runs through collx's path, never delegated.
struct ReduceScatterVCall {
  static constexpr Collective kCollective = Collective::reduce_scatter_v;
  const void* sendbuf;
  void* recvbuf;
  std::span<const std::size_t> counts;
  DataType type;
  ReduceOp op;
};

// gather and scatter differ only in which of sendbuf and recvbuf is the root's full buffer.
template <Collective C>
struct RootedCall : Buffers {
  static_assert(C == Collective::gather || C == Collective::scatter);
  static constexpr Collective kCollective = C;
  static constexpr bool kGather = C == Collective::gather;
  int root;
  Blocks checks(const CommState& s) const {
    const ArgCheck check(C, s.rank);
    check.type(type);
    check.rank_in_range(root, s.size, "root");
    const std::size_t block = check.bytes(count, type);
    const std::size_t total = check.total_bytes(count, s.size, type);
    const bool in_place = check.rooted_blocks(s.rank == root, root, kGather ? recvbuf : sendbuf,
                                              kGather ? sendbuf : recvbuf, block, total, kGather);
    return {block, total, in_place};
  }
  int library(const CommState& s, const Blocks& b) const {
    const int n = static_cast<int>(b.block);
    return kGather ? library_gather(s.comm, sendbuf, recvbuf, n, root, b.in_place)
                   : library_scatter(s.comm, sendbuf, recvbuf, n, root, b.in_place);
  }
};
using GatherCall = RootedCall<Collective::gather>;
using ScatterCall = RootedCall<Collective::scatter>;

struct AlltoallCall : Buffers {
  static constexpr Collective kCollective = Collective::alltoall;
  // The bytes of one buffer.
  std::size_t checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t total = check.total_bytes(count, s.size, type);
    check.buffer(sendbuf, total, "sendbuf");
    check.buffer(recvbuf, total, "recvbuf");
    check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, total, "recvbuf");
    return total;
  }
  int library(const CommState& s, std::size_t) const {
    return library_alltoall(s.comm, sendbuf, recvbuf, static_cast<int>(count * size_of(type)));
  }
};

struct BarrierCall {
  static constexpr Collective kCollective = Collective::barrier;
  std::size_t checks(const CommState&) const { return 0; }
  int library(const CommState& s, std::size_t) const { return library_barrier(s.comm); }
};

// delegated() of a descriptor's call.
template <class Call>
[[gnu::always_inline]] inline bool delegated(const CommState& s, const Call& c,
                                             const Options& options) {
  constexpr Collective kC = Call::kCollective;
  if constexpr (requires { c.op; })
    return delegated(s, kC, c.count, c.type, c.op, options);
  else if constexpr (requires { c.count; })
    return delegated(s, kC, c.count, c.type, ReduceOp::sum, options);
  else
    return delegated(s, kC, 0, DataType::uint8, ReduceOp::sum, options);
}

// Runs the schedule of `c`'s collective on `args` through run_collective, with c.library(checked)
// as its MPI library call; `host_copies(staged)` points `args` at host copies of device buffers.
template <class Call, class Checked, class HostCopies>
Request run(const std::shared_ptr<CommState>& s, const Call& c, const Checked& checked,
            ArgsOf<Call::kCollective>& args, std::size_t bytes, const Options& options,
            const CallSignature& signature, bool blocking, CallMemory& memory,
            HostCopies&& host_copies) {
  const auto library = [&] { return c.library(*s, checked); };
  return run_collective(
      s, Call::kCollective, bytes, options, signature, blocking,
      [&](Operation& op, Algorithm a) { return run_schedule<Call::kCollective>(op, args, a); },
      std::move(memory.device), host_copies, library);
}

Request run_call(const std::shared_ptr<CommState>& s, const AllreduceCall& c,
                 const Options& options, bool blocking) {
  const std::size_t bytes = c.checks(*s);
  if (nothing_to_move(c.kCollective, bytes)) return {};
  CallMemory memory =
      call_memory(*s, c.kCollective, options,
                  {{c.sendbuf, bytes, "sendbuf"}, {c.recvbuf, bytes, "recvbuf"}}, blocking);
  AllreduceArgs args{bytes_of(c.sendbuf),
                     bytes_of(c.recvbuf),
                     c.count,
                     Reduction::make(c.type, c.op, s->size, memory.reducer()),
                     {}};
  return run(s, c, bytes, args, bytes, options, signature(c.kCollective, c.count, c.type, c.op),
             blocking, memory, [&](StagedCall& staged) {
               args.send = staged.copy_of(c.sendbuf, bytes, true, 0);
               args.recv = staged.copy_of(c.recvbuf, bytes, false, bytes);
               args.reduction = Reduction::make(c.type, c.op, s->size);
             });
}

Request run_call(const std::shared_ptr<CommState>& s, const BroadcastCall& c,
                 const Options& options, bool blocking) {
  const std::size_t bytes = c.checks(*s);
  if (nothing_to_move(c.kCollective, bytes)) return {};
  CallMemory memory =
      call_memory(*s, c.kCollective, options, {{c.buffer, bytes, "buffer"}}, blocking);
  BroadcastArgs args{bytes_of(c.buffer), c.count, size_of(c.type), c.root, {}};
  const bool is_root = s->rank == c.root;
  return run(s, c, bytes, args, bytes, options, signature(c.kCollective, c.count, c.type, c.root),
             blocking, memory, [&](StagedCall& staged) {
               args.buffer = staged.copy_of(c.buffer, bytes, is_root, is_root ? 0 : bytes);
             });
}

Request run_call(const std::shared_ptr<CommState>& s, const ReduceCall& c, const Options& options,
                 bool blocking) {
  const std::size_t bytes = c.checks(*s);
  const bool is_root = s->rank == c.root;
  if (nothing_to_move(c.kCollective, bytes)) return {};
  const auto library = [&] { return c.library(*s, bytes); };
  // recvbuf is significant at the root only.
  CallMemory memory = call_memory(
      *s, c.kCollective, options,
      {{c.sendbuf, bytes, "sendbuf"}, {is_root ? c.recvbuf : nullptr, bytes, "recvbuf"}}, blocking);
  ReduceArgs args{bytes_of(c.sendbuf),
                  bytes_of(c.recvbuf),
                  c.count,
                  Reduction::make(c.type, c.op, s->size, memory.reducer()),
                  c.root,
                  {},
                  Algorithm::ring};
  return run_collective(
      s, c.kCollective, bytes, options, signature(c.kCollective, c.count, c.type, c.op, c.root),
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
        args.send = staged.copy_of(c.sendbuf, bytes, true, 0);
        if (is_root) args.recv = staged.copy_of(c.recvbuf, bytes, false, bytes);
        args.reduction = Reduction::make(c.type, c.op, s->size);
      },
      library);
}

Request run_call(const std::shared_ptr<CommState>& s, const AllgatherCall& c,
                 const Options& options, bool blocking) {
  const Blocks blocks = c.checks(*s);
  const auto [block, total, in_place] = blocks;
  if (nothing_to_move(c.kCollective, total)) return {};
  CallMemory memory = call_memory(
      *s, c.kCollective, options,
      {{in_place ? nullptr : c.sendbuf, block, "sendbuf"}, {c.recvbuf, total, "recvbuf"}},
      blocking);
  AllgatherArgs args{in_place ? nullptr : bytes_of(c.sendbuf),
                     bytes_of(c.recvbuf),
                     s->lend_equal_offsets(c.count),
                     size_of(c.type),
                     {}};
  Request done = run(s, c, blocks, args, total, options, signature(c.kCollective, c.count, c.type),
                     blocking, memory, [&](StagedCall& staged) {
                       // In place, this rank's block is an input inside recvbuf: the whole buffer
                       // goes in.
                       if (!in_place) args.send = staged.copy_of(c.sendbuf, block, true, 0);
                       args.recv = staged.copy_of(c.recvbuf, total, in_place, total);
                     });
  s->give_back_offsets(c.count, std::move(args.offsets));
  return done;
}

// reduce_scatter and reduce_scatter_v on blocks of offsets[r + 1] - offsets[r] elements;
// `library`: the call as MPI_Reduce_scatter_block (equal blocks only).
Request reduce_scatter_blocks(const std::shared_ptr<CommState>& s, const void* sendbuf,
                              void* recvbuf, std::vector<std::size_t> offsets, DataType type,
                              ReduceOp reduce_op, const Options& options, bool blocking,
                              Collective collective, LibraryCall library) {
  const ArgCheck check(collective, s->rank);
  check.type_op(type, reduce_op);
  const std::size_t total = check.bytes(offsets.back(), type);
  const auto r = static_cast<std::size_t>(s->rank);
  const std::size_t mine = (offsets[r + 1] - offsets[r]) * size_of(type);
  reduce_scatter_buffers(check, sendbuf, recvbuf, total, mine);
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
  Request done = run_collective(
      s, collective, total, options, signature(collective, counts_hash, type, reduce_op), blocking,
      [&](Operation& op, Algorithm a) {
        return run_schedule<Collective::reduce_scatter>(op, args, a);
      },
      std::move(memory.device),
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

Request run_call(const std::shared_ptr<CommState>& s, const ReduceScatterCall& c,
                 const Options& options, bool blocking) {
  // The blocks are checked before their offsets are computed (a product that wraps would pass
  // every later check).
  const ArgCheck check(c.kCollective, s->rank);
  check.type(c.type);
  check.total_bytes(c.count, s->size, c.type);
  const auto library = [&] { return c.library(*s, 0); };
  return reduce_scatter_blocks(s, c.sendbuf, c.recvbuf, s->lend_equal_offsets(c.count), c.type,
                               c.op, options, blocking, c.kCollective, library);
}

Request run_call(const std::shared_ptr<CommState>& s, const ReduceScatterVCall& c,
                 const Options& options, bool blocking) {
  if (c.counts.size() != static_cast<std::size_t>(s->size)) {
    throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", s->rank,
                "counts: " + std::to_string(c.counts.size()) + " entries for " +
                    std::to_string(s->size) + " ranks");
  }
  std::vector<std::size_t> offsets(c.counts.size() + 1, 0);
  for (std::size_t r = 0; r < c.counts.size(); ++r) {
    offsets[r + 1] = offsets[r] + c.counts[r];
    if (offsets[r + 1] < offsets[r]) {
      throw Error(ErrorCode::invalid_argument, "reduce_scatter_v", s->rank,
                  "counts: their sum exceeds the largest possible buffer");
    }
  }
  return reduce_scatter_blocks(s, c.sendbuf, c.recvbuf, std::move(offsets), c.type, c.op, options,
                               blocking, c.kCollective, {});
}

template <Collective C>
Request run_call(const std::shared_ptr<CommState>& s, const RootedCall<C>& c,
                 const Options& options, bool blocking) {
  constexpr bool kGather = RootedCall<C>::kGather;
  const Blocks blocks = c.checks(*s);
  const auto [block, total, in_place] = blocks;
  const bool is_root = s->rank == c.root;
  const void* full = kGather ? c.recvbuf : c.sendbuf;
  const void* own = kGather ? c.sendbuf : c.recvbuf;
  // The buffers this rank uses: the full one at the root, its own unless in place; gather's own
  // block in and full buffer out, scatter's the other way round.
  const void* full_used = is_root ? full : nullptr;
  const void* own_used = in_place ? nullptr : own;
  const void* in = kGather ? own_used : full_used;
  const void* out = kGather ? full_used : own_used;
  const std::size_t in_bytes = kGather ? block : total;
  const std::size_t out_bytes = kGather ? total : block;
  if (nothing_to_move(C, total)) return {};
  CallMemory memory = call_memory(
      *s, C, options, {{in, in_bytes, "sendbuf"}, {out, out_bytes, "recvbuf"}}, blocking);
  ArgsOf<C> args{kGather && in_place ? nullptr : bytes_of(c.sendbuf),
                 !kGather && in_place ? nullptr : bytes_of(c.recvbuf),
                 s->lend_equal_offsets(c.count),
                 size_of(c.type),
                 c.root,
                 {}};
  Request done = run(s, c, blocks, args, total, options, signature(C, c.count, c.type, c.root),
                     blocking, memory, [&](StagedCall& staged) {
                       if (in != nullptr) args.send = staged.copy_of(in, in_bytes, true, 0);
                       // Downloaded too for a gather in place: the root's own block is in it.
                       if (out != nullptr) {
                         args.recv = staged.copy_of(out, out_bytes, kGather && in_place, out_bytes);
                       }
                     });
  s->give_back_offsets(c.count, std::move(args.offsets));
  return done;
}

Request run_call(const std::shared_ptr<CommState>& s, const AlltoallCall& c, const Options& options,
                 bool blocking) {
  const std::size_t total = c.checks(*s);
  if (nothing_to_move(c.kCollective, total)) return {};
  CallMemory memory =
      call_memory(*s, c.kCollective, options,
                  {{c.sendbuf, total, "sendbuf"}, {c.recvbuf, total, "recvbuf"}}, blocking);
  AlltoallArgs args{bytes_of(c.sendbuf), bytes_of(c.recvbuf), c.count, size_of(c.type), {}};
  return run(s, c, total, args, total, options, signature(c.kCollective, c.count, c.type), blocking,
             memory, [&](StagedCall& staged) {
               args.send = staged.copy_of(c.sendbuf, total, true, 0);
               args.recv = staged.copy_of(c.recvbuf, total, false, total);
             });
}

Request run_call(const std::shared_ptr<CommState>& s, const BarrierCall& c, const Options& options,
                 bool blocking) {
  const auto library = [&] { return c.library(*s, 0); };
  BarrierArgs args;
  return run_collective(
      s, c.kCollective, 0, options, {c.kCollective, 0}, blocking,
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

// Whether `c` moves no elements (a count of 0; a barrier always counts as moving).
template <class Call>
constexpr bool moves_nothing(const Call& c) {
  if constexpr (requires { c.count; })
    return c.count == 0;
  else
    return false;
}
// Runs `call.checks(s)` (the normal path's argument checks, which throw collx::Error) and, where
// they pass and the call's class goes to the MPI library, `call.library` on the delegated path. A
// call of no elements that passes them is done here (nothing_to_move), delegating or not: the
// normal path's entry would cost it several times what the MPI library's call of nothing costs.
template <class Call>
bool fast(const std::shared_ptr<CommState>& state, const Call& call, const Options& options) {
  CommState* s = state.get();
  const bool nothing = moves_nothing(call);
  if (s == nullptr || !(s->delegating() || nothing) || !s->notices->quiet()) return false;
  decltype(call.checks(*s)) checked{};
  try {
    checked = call.checks(*s);
    if (nothing) return nothing_to_move(Call::kCollective, 0);
    if (!delegated(*s, call, options)) return false;
  } catch (const Error&) {
    return false;  // the normal path reports it
  }
  run_delegated(*s, Call::kCollective, [&] { return call.library(*s, checked); });
  return true;
}
bool fast(const std::shared_ptr<CommState>&, const ReduceScatterVCall&, const Options&) {
  return false;
}

// A collective entry point: run_call through guarded().
template <class Call>
Request entry(const std::shared_ptr<CommState>& s, const Call& call, const Options& options,
              bool blocking) {
  return guarded(s, Call::kCollective, [&] { return run_call(s, call, options, blocking); });
}
// A blocking call that the delegated path did not take. Out of line: the public entry's frame
// then holds the delegated path's registers alone, not the normal path's captured arguments.
template <class Call>
[[gnu::noinline]] void blocking_entry(const std::shared_ptr<CommState>& s, const Call& call,
                                      const Options& options) {
  entry(s, call, options, true);
}

}  // namespace

}  // namespace collx::detail

namespace collx {

bool Communicator::goes_to_library(Collective collective, std::size_t count, DataType type,
                                   ReduceOp op) const noexcept {
  return state_ != nullptr && detail::delegated(*state_, collective, count, type, op, Options{});
}
void Communicator::library_call_made() noexcept {
  if (state_ != nullptr) ++state_->next_sequence;
}

// A collective's blocking call `name` and its nonblocking i`name`: one entry, told apart by its
// last argument. `params`: the public signature; then the fields of its descriptor `Call`.
#define COLLX_BLOCKING_AND_NONBLOCKING(name, Call, params, ...)              \
  void Communicator::name params {                                           \
    const detail::Call call{__VA_ARGS__};                                    \
    if (detail::fast(state_, call, options)) return;                         \
    detail::blocking_entry(state_, call, options);                           \
  }                                                                          \
  Request Communicator::i##name params {                                     \
    return detail::entry(state_, detail::Call{__VA_ARGS__}, options, false); \
  }

COLLX_BLOCKING_AND_NONBLOCKING(allreduce, AllreduceCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, const Options& options),
                               sendbuf, recvbuf, count, type, op)
COLLX_BLOCKING_AND_NONBLOCKING(broadcast, BroadcastCall,
                               (void* buffer, std::size_t count, DataType type, int root,
                                const Options& options),
                               buffer, count, type, root)
COLLX_BLOCKING_AND_NONBLOCKING(reduce, ReduceCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, int root, const Options& options),
                               sendbuf, recvbuf, count, type, op, root)
COLLX_BLOCKING_AND_NONBLOCKING(allgather, AllgatherCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, const Options& options),
                               sendbuf, recvbuf, count, type)
COLLX_BLOCKING_AND_NONBLOCKING(reduce_scatter, ReduceScatterCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, ReduceOp op, const Options& options),
                               sendbuf, recvbuf, count, type, op)
COLLX_BLOCKING_AND_NONBLOCKING(reduce_scatter_v, ReduceScatterVCall,
                               (const void* sendbuf, void* recvbuf,
                                std::span<const std::size_t> counts, DataType type, ReduceOp op,
                                const Options& options),
                               sendbuf, recvbuf, counts, type, op)
COLLX_BLOCKING_AND_NONBLOCKING(gather, GatherCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, int root, const Options& options),
                               sendbuf, recvbuf, count, type, root)
COLLX_BLOCKING_AND_NONBLOCKING(scatter, ScatterCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, int root, const Options& options),
                               sendbuf, recvbuf, count, type, root)
COLLX_BLOCKING_AND_NONBLOCKING(alltoall, AlltoallCall,
                               (const void* sendbuf, void* recvbuf, std::size_t count,
                                DataType type, const Options& options),
                               sendbuf, recvbuf, count, type)
COLLX_BLOCKING_AND_NONBLOCKING(barrier, BarrierCall, (const Options& options))
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
