// The public collectives: argument checks, then the algorithm chosen and run (blocking or
// nonblocking) through run_collective.
#include <algorithm>
#include <array>
#include <new>
#include <type_traits>
#include <vector>

#include "collectives.hpp"
#include "collx/communicator.hpp"
#include "collx/error.hpp"
#include "comm_state.hpp"
#include "memory.hpp"
#include "registry.hpp"
#include "shm_arena.hpp"
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

// A datatype's size, 0 for one that is not a DataType (the normal path reports it).
std::size_t checked_size(DataType type) {
  return static_cast<unsigned>(type) < static_cast<unsigned>(kDataTypeCount) ? size_of(type) : 0;
}
// Whether a checked blocking call goes to the MPI library's own collective (the delegated path),
// from what every rank's call shares. `count` as the call takes it (buffer, or one rank's block).
[[gnu::always_inline]] inline bool delegated(const CommState& s, Collective collective,
                                             std::size_t count, DataType type, ReduceOp op,
                                             const Options& options) {
  using enum Collective;
  // Every call asks (the drop-in's too, before collx takes one): the usual answer first.
  if (!s.delegating()) return false;
  if (collective == barrier) return s.delegates(collective, 0, options);
  if (count == 0 || collective == reduce_scatter_v || collective == sendrecv) return false;
  // The call's elements and bytes (every rank's block where the collective has blocks).
  const std::size_t elements =
      collective == allreduce || collective == reduce || collective == broadcast
          ? count
          : count * static_cast<std::size_t>(s.size);
  const bool reduction =
      collective == allreduce || collective == reduce || collective == reduce_scatter;
  // A reduction of a type and op the MPI library has, whose class goes to the MPI library: by
  // its trials, or untried (library_for_untried).
  if (reduction && !library_takes(elements, type, op)) return false;
  const std::size_t bytes = elements * checked_size(type);
  if (!reduction) return library_takes(bytes) && s.delegates(collective, bytes, options);
  const CallSignature signature{allreduce, elements, static_cast<int>(type), static_cast<int>(op)};
  return s.delegates(collective, bytes, options, order_sensitive(signature, s.size));
}

// ---- one descriptor per collective ----
// A call as its public entry takes it: its arguments; `checks`, the argument checks that the
// normal path and the delegated path share (they throw collx::Error and return the call's
// Checked); `library`, the call as the MPI library's blocking collective, from what `checks`
// returned; `args`, its schedule's arguments, and `buffers` (buffers_of), its buffers on this
// rank, for its normal path (run_call, below). fast (further below) is its delegated path.

// What a call's checks return: the bytes of one rank's block, of the whole call (what keys the
// selector: the buffer of allreduce, broadcast and reduce, every block of the others), and
// whether the call is in place.
struct Checked {
  std::size_t block;
  std::size_t total;
  bool in_place;
};

// One buffer of a call on this rank (null: unused here), in the order sendbuf, recvbuf. Where the
// call runs on host copies of device buffers, its copy is downloaded when `input`, and its first
// `output` bytes are uploaded when the call ends.
struct CallBuffer {
  BufferArg arg;
  bool input;
  std::size_t output;
};
using CallBuffers = std::array<CallBuffer, 2>;
// sendbuf's `in` bytes, an input; recvbuf's `out` bytes, an output (an input too with
// `recv_in`).
CallBuffers send_recv(const void* sendbuf, std::size_t in, const void* recvbuf, std::size_t out,
                      bool recv_in = false) {
  return {{{{sendbuf, in, "sendbuf"}, true, 0}, {{recvbuf, out, "recvbuf"}, recv_in, out}}};
}

// A call's send and receive buffers, of `count` elements of `type` (one rank's block where the
// collective has blocks).
struct Buffers {
  const void* sendbuf;
  void* recvbuf;
  std::size_t count;
  DataType type;
  bool operator==(const Buffers&) const = default;
};

// A reduction's call: Buffers, and the op to reduce with.
template <Collective C>
struct ReductionCall : Buffers {
  static constexpr Collective kCollective = C;
  ReduceOp op;
  bool operator==(const ReductionCall&) const = default;
  // The checks' start: the (type, op) pair.
  ArgCheck type_op_checked(const CommState& s) const {
    const ArgCheck check(C, s.rank);
    check.type_op(type, op);
    return check;
  }
  int library(const CommState& s, const Checked&) const {
    return library_collective<kCollective>(
        s.comm, LibraryArgs::reducing(in_place_or(sendbuf, recvbuf), recvbuf,
                                      static_cast<int>(count), type, op));
  }
};

// The checks of a call that reads `total` bytes at sendbuf and writes `mine` at recvbuf (the same
// buffer: in place). Always inlined: the delegated path runs it (its own frame costs a call).
[[gnu::always_inline]] inline Checked send_and_recv(const ArgCheck& check, const void* sendbuf,
                                                    const void* recvbuf, std::size_t total,
                                                    std::size_t mine) {
  check.buffer(sendbuf, total, "sendbuf");
  check.buffer(recvbuf, mine, "recvbuf");
  check.no_partial_overlap(sendbuf, total, "sendbuf", recvbuf, mine, "recvbuf");
  return {mine, total, false};
}

struct AllreduceCall : ReductionCall<Collective::allreduce> {
  bool operator==(const AllreduceCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t bytes = check.bytes(count, type);
    return send_and_recv(check, sendbuf, recvbuf, bytes, bytes);
  }
  AllreduceArgs args(CommState& s, const Checked&, DeviceCall* device) const {
    return {
        bytes_of(sendbuf), bytes_of(recvbuf), count, Reduction::make(type, op, s.size, device), {}};
  }
};

struct BroadcastCall {
  static constexpr Collective kCollective = Collective::broadcast;
  void* buffer;
  std::size_t count;
  DataType type;
  int root;
  bool operator==(const BroadcastCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t bytes = check.bytes(count, type);
    check.buffer(buffer, bytes, "buffer");
    check.rank_in_range(root, s.size, "root");
    return {bytes, bytes, false};
  }
  int library(const CommState& s, const Checked& b) const {
    return library_collective<kCollective>(s.comm,
                                           {nullptr, buffer, static_cast<int>(b.total), root});
  }
  CallBuffers buffers(const CommState& s, const Checked& b) const {
    const bool is_root = s.rank == root;
    return {{{{buffer, b.total, "buffer"}, is_root, is_root ? 0 : b.total}, {}}};
  }
  BroadcastArgs args(CommState&, const Checked&, DeviceCall*) const {
    return {bytes_of(buffer), count, size_of(type), root, {}};
  }
};

struct ReduceCall : ReductionCall<Collective::reduce> {
  int root;
  bool operator==(const ReduceCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t bytes = check.bytes(count, type);
    check.rank_in_range(root, s.size, "root");
    check.buffer(sendbuf, bytes, "sendbuf");
    if (s.rank == root) {
      check.buffer(recvbuf, bytes, "recvbuf");
      check.no_partial_overlap(sendbuf, bytes, "sendbuf", recvbuf, bytes, "recvbuf");
    }
    return {bytes, bytes, false};
  }
  int library(const CommState& s, const Checked&) const {
    return library_collective<kCollective>(
        s.comm, LibraryArgs::reducing(s.rank == root && sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf,
                                      recvbuf, static_cast<int>(count), type, op, root));
  }
  // recvbuf is significant at the root only.
  CallBuffers buffers(const CommState& s, const Checked& b) const {
    return send_recv(sendbuf, b.total, s.rank == root ? recvbuf : nullptr, b.total);
  }
  ReduceArgs args(CommState& s, const Checked&, DeviceCall* device) const {
    return {bytes_of(sendbuf),
            bytes_of(recvbuf),
            count,
            Reduction::make(type, op, s.size, device),
            root,
            {},
            Algorithm::ring};
  }
};

struct AllgatherCall : Buffers {
  static constexpr Collective kCollective = Collective::allgather;
  bool operator==(const AllgatherCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t block = check.bytes(count, type);
    const std::size_t total = check.bytes(count, type, s.size);
    check.buffer(recvbuf, total, "recvbuf");
    const std::byte* own = bytes_of(recvbuf) + static_cast<std::size_t>(s.rank) * block;
    const bool in_place = sendbuf == nullptr || sendbuf == own;
    if (!in_place) check.no_partial_overlap(sendbuf, block, "sendbuf", recvbuf, total, "recvbuf");
    return {block, total, in_place};
  }
  int library(const CommState& s, const Checked& b) const {
    return library_collective<kCollective>(
        s.comm, {b.in_place ? MPI_IN_PLACE : sendbuf, recvbuf, static_cast<int>(b.block)});
  }
  // In place, this rank's block is an input inside recvbuf: the whole buffer goes in.
  CallBuffers buffers(const CommState&, const Checked& b) const {
    return send_recv(b.in_place ? nullptr : sendbuf, b.block, recvbuf, b.total, b.in_place);
  }
  AllgatherArgs args(CommState& s, const Checked& b, DeviceCall*) const {
    return {b.in_place ? nullptr : bytes_of(sendbuf),
            bytes_of(recvbuf),
            s.lend_equal_offsets(count),
            size_of(type),
            {}};
  }
};

// `count` elements for every rank.
struct ReduceScatterCall : ReductionCall<Collective::reduce_scatter> {
  bool operator==(const ReduceScatterCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check = type_op_checked(s);
    const std::size_t total = check.bytes(count, type, s.size);
    return send_and_recv(check, sendbuf, recvbuf, total, count * size_of(type));
  }
  ReduceScatterArgs args(CommState& s, const Checked&, DeviceCall* device) const {
    return {bytes_of(sendbuf),
            bytes_of(recvbuf),
            s.lend_equal_offsets(count),
            Reduction::make(type, op, s.size, device),
            {}};
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
  // Checked, and the blocks' offsets (in elements).
  struct Blocks : Checked {
    std::vector<std::size_t> offsets;
  };
  Blocks checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    if (counts.size() != static_cast<std::size_t>(s.size)) {
      check.fail(ErrorCode::invalid_argument, "counts: " + std::to_string(counts.size()) +
                                                  " entries for " + std::to_string(s.size) +
                                                  " ranks");
    }
    std::vector<std::size_t> offsets(counts.size() + 1, 0);
    for (std::size_t r = 0; r < counts.size(); ++r) {
      offsets[r + 1] = offsets[r] + counts[r];
      if (offsets[r + 1] < offsets[r])
        check.fail(ErrorCode::invalid_argument,
                   "counts: their sum exceeds the largest possible buffer");
    }
    check.type_op(type, op);
    const std::size_t total = check.bytes(offsets.back(), type);
    const auto r = static_cast<std::size_t>(s.rank);
    const std::size_t mine = (offsets[r + 1] - offsets[r]) * size_of(type);
    return {send_and_recv(check, sendbuf, recvbuf, total, mine), std::move(offsets)};
  }
  ReduceScatterArgs args(CommState& s, Blocks& b, DeviceCall* device) const {
    return {bytes_of(sendbuf),
            bytes_of(recvbuf),
            std::move(b.offsets),
            Reduction::make(type, op, s.size, device),
            {}};
  }
};

// gather and scatter differ only in which of sendbuf and recvbuf is the root's full buffer.
template <Collective C>
struct RootedCall : Buffers {
  static_assert(C == Collective::gather || C == Collective::scatter);
  static constexpr Collective kCollective = C;
  static constexpr bool kGather = C == Collective::gather;
  int root;
  bool operator==(const RootedCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check(C, s.rank);
    check.type(type);
    check.rank_in_range(root, s.size, "root");
    const std::size_t block = check.bytes(count, type);
    const std::size_t total = check.bytes(count, type, s.size);
    // The root's full buffer holds every rank's block (rank r's at r * block); the rank's own block
    // at the root may be null or its place in the full one: in place. Off the root only its own
    // is used.
    const void* own = kGather ? sendbuf : recvbuf;
    if (s.rank != root) {
      check.buffer(own, block, kGather ? "sendbuf" : "recvbuf");
      return {block, total, false};
    }
    const void* full = kGather ? recvbuf : sendbuf;
    check.buffer(full, total, kGather ? "recvbuf" : "sendbuf");
    if (own == nullptr || own == bytes_of(full) + static_cast<std::size_t>(root) * block)
      return {block, total, true};
    check.no_partial_overlap(sendbuf, kGather ? block : total, "sendbuf", recvbuf,
                             kGather ? total : block, "recvbuf");
    return {block, total, false};
  }
  int library(const CommState& s, const Checked& b) const {
    return library_collective<kCollective>(
        s.comm, {kGather && b.in_place ? MPI_IN_PLACE : sendbuf,
                 !kGather && b.in_place ? MPI_IN_PLACE : recvbuf, static_cast<int>(b.block), root});
  }
  // The buffers this rank uses: the full one at the root, its own unless in place; gather's own
  // block in and full buffer out (downloaded too in place: the root's own block is in it),
  // scatter's the other way round.
  CallBuffers buffers(const CommState& s, const Checked& b) const {
    const void* full = s.rank != root ? nullptr : kGather ? recvbuf : sendbuf;
    const void* own = b.in_place ? nullptr : kGather ? sendbuf : recvbuf;
    return kGather ? send_recv(own, b.block, full, b.total, b.in_place)
                   : send_recv(full, b.total, own, b.block);
  }
  RootedArgs args(CommState& s, const Checked& b, DeviceCall*) const {
    return {kGather && b.in_place ? nullptr : bytes_of(sendbuf),
            !kGather && b.in_place ? nullptr : bytes_of(recvbuf),
            s.lend_equal_offsets(count),
            size_of(type),
            root,
            {}};
  }
};
using GatherCall = RootedCall<Collective::gather>;
using ScatterCall = RootedCall<Collective::scatter>;

struct AlltoallCall : Buffers {
  static constexpr Collective kCollective = Collective::alltoall;
  bool operator==(const AlltoallCall&) const = default;
  Checked checks(const CommState& s) const {
    const ArgCheck check(kCollective, s.rank);
    check.type(type);
    const std::size_t total = check.bytes(count, type, s.size);
    return send_and_recv(check, sendbuf, recvbuf, total, total);
  }
  int library(const CommState& s, const Checked&) const {
    return library_collective<kCollective>(
        s.comm, {in_place_or(sendbuf, recvbuf), recvbuf, static_cast<int>(count * size_of(type))});
  }
  AlltoallArgs args(CommState&, const Checked&, DeviceCall*) const {
    return {bytes_of(sendbuf), bytes_of(recvbuf), count, size_of(type), {}};
  }
};

struct BarrierCall {
  static constexpr Collective kCollective = Collective::barrier;
  bool operator==(const BarrierCall&) const = default;
  Checked checks(const CommState&) const { return {0, 0, false}; }
  int library(const CommState& s, const Checked&) const {
    return library_collective<kCollective>(s.comm, {});
  }
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

// A call's buffers on this rank: its own `buffers`, else the whole input (sendbuf) and this
// rank's block of output (recvbuf).
template <class Call>
CallBuffers buffers_of(const CommState& s, const Call& c, const Checked& b) {
  if constexpr (requires { c.buffers(s, b); })
    return c.buffers(s, b);
  else
    return send_recv(c.sendbuf, b.total, c.recvbuf, b.block);
}

// What COLLX_CHECK compares and COLLX_DEBUG shows of a call; for reduce_scatter(_v), whose blocks
// may differ, the count is a hash of every rank's block length, so that differing counts are
// caught.
template <class Call, class Args>
CallSignature signature_of(const Call& c, const Args& args) {
  CallSignature signature{Call::kCollective, 0, static_cast<int>(c.type)};
  if constexpr (requires { c.op; }) signature.op = static_cast<int>(c.op);
  if constexpr (requires { c.root; }) signature.root = c.root;
  if constexpr (std::is_same_v<Args, ReduceScatterArgs>) {
    for (std::size_t j = 0; j + 1 < args.offsets.size(); ++j)
      signature.count = signature.count * 1000003u + (args.offsets[j + 1] - args.offsets[j]);
  } else {
    signature.count = c.count;
  }
  return signature;
}

// A call's normal path: its checks and memory, then its schedule through run_collective, with
// c.library as its MPI library call where it has one. On host copies of device buffers, its
// arguments point at the copies (and a reduction reduces on the host).
template <class Call>
Request run_call(const std::shared_ptr<CommState>& s, const Call& c, const Options& options,
                 bool blocking) {
  constexpr Collective C = Call::kCollective;
  auto checked = c.checks(*s);
  if (nothing_to_move(C, checked.total)) return {};
  const CallBuffers buffers = buffers_of(*s, c, checked);
  std::unique_ptr<DeviceCall> device =
      call_memory(*s, C, options, {buffers[0].arg, buffers[1].arg}, blocking);
  ArgsOf<C> args = c.args(*s, checked, device.get());
  const auto library = [&] {
    if constexpr (requires { c.library(*s, checked); })
      return [&] { return c.library(*s, checked); };
    else
      return nullptr;  // reduce_scatter_v: its MPI library row runs on collx's path
  }();
  Request done = run_collective(
      s, C, checked.total, options, signature_of(c, args), blocking,
      [&](Operation& op, Algorithm a) {
        if constexpr (C == Collective::reduce) {
          // Rabenseifner's reduce-scatter half: the selector's choice for a reduce_scatter_v.
          if (a == Algorithm::rabenseifner) {
            args.scatter_algorithm =
                resolve_algorithm(Collective::reduce_scatter_v, Algorithm::automatic, checked.total,
                                  s->size, s->rank);
          }
        }
        constexpr Collective kSchedules =
            C == Collective::reduce_scatter_v ? Collective::reduce_scatter : C;
        return run_schedule<kSchedules>(op, args, a);
      },
      std::move(device),
      [&](StagedCall& staged) {
        std::byte* copies[2] = {};
        for (std::size_t i = 0; i < buffers.size(); ++i) {
          const CallBuffer& b = buffers[i];
          if (b.arg.pointer != nullptr)
            copies[i] = staged.copy_of(b.arg.pointer, b.arg.bytes, b.input, b.output);
        }
        if constexpr (requires { args.buffer; }) {
          args.buffer = copies[0];
        } else {
          if (copies[0] != nullptr) args.send = copies[0];
          if (copies[1] != nullptr) args.recv = copies[1];
        }
        if constexpr (requires { args.reduction; })
          args.reduction = Reduction::make(c.type, c.op, s->size);
      },
      library,
      [&] {
        if constexpr (runs_at_once(C)) {
          return [&](SharedArena& arena) {
            return shared_memory_at_once<C>(arena, s->rank, s->size, args);
          };
        } else {
          return nullptr;
        }
      }());
  // Kept for their storage, and for the next call of the same count where the blocks are equal.
  if constexpr (requires { args.offsets; }) {
    std::size_t equal = CommState::kNoSpareOffsets;
    if constexpr (requires { c.count; }) equal = c.count;
    s->give_back_offsets(equal, std::move(args.offsets));
  }
  return done;
}

Request run_call(const std::shared_ptr<CommState>& s, const BarrierCall& c, const Options& options,
                 bool blocking) {
  const auto library = [&] { return c.library(*s, {}); };
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
  std::unique_ptr<DeviceCall> device = call_memory(
      *s, Collective::sendrecv, Options{},
      {{sendbuf, send_bytes, "sendbuf"}, {recvbuf, recv_bytes, "recvbuf"}}, blocking, /*p2p=*/true);
  const OpInfo info{
      .collective = Collective::sendrecv, .algorithm = Algorithm::direct, .segment_bytes = 1};
  return launch(
      s, info, nullptr, blocking, [&](Operation& op) { return point_to_point_task(op, args); },
      std::move(device));
}

// ---- the delegated path's entry ----
// A blocking call whose size class settled on the MPI library (CommState::delegates) makes its
// PMPI_ call from the public entry, ahead of entry(), whose bookkeeping, error paths and dispatch
// would cost as much as the MPI library's call.

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
//
// The call is then remembered (CommState::remembered_calls): the collective's next call with the
// same descriptor, options and configuration skips the checks and the decision (a delegated
// call's own cost, docs/AUTO.md, "What a small call costs"), as the drop-in's remembered call
// does. Memory is asked again: a device API set later may see device memory.
template <class Call>
struct RememberedCall {
  Call call;
  Checked checked;
  Algorithm algorithm;
  MemoryKind memory;
  int pipeline_depth;
  const Config* config;
  [[gnu::always_inline]] bool matches(const Call& c, const Options& options) const {
    return call == c && algorithm == options.algorithm && memory == options.memory &&
           pipeline_depth == options.pipeline_depth && options.stream == nullptr &&
           config == &detail::config() &&
           (Call::kCollective == Collective::barrier || surely_host_memory(options));
  }
};
template <class Call>
[[gnu::always_inline]] inline std::byte* remembered_slot_bytes(CommState& s) {
  using Remembered = RememberedCall<Call>;
  static_assert(std::is_trivially_copyable_v<Remembered>);
  static_assert(sizeof(Remembered) <= sizeof(CommState::RememberedCallSlot::bytes));
  static_assert(alignof(Remembered) <= alignof(CommState::RememberedCallSlot));
  return s.remembered_calls[static_cast<std::size_t>(Call::kCollective)].bytes.data();
}
// The remembered call's path, inline in the public entry (fast's frame would cost as much).
template <class Call>
[[gnu::always_inline]] inline bool remembered(const std::shared_ptr<CommState>& state,
                                              const Call& call, const Options& options) {
  CommState* s = state.get();
  if (s == nullptr || !s->remembered_calls[static_cast<std::size_t>(Call::kCollective)].held)
    return false;
  const auto* r =
      std::launder(reinterpret_cast<const RememberedCall<Call>*>(remembered_slot_bytes<Call>(*s)));
  if (!r->matches(call, options) || !s->notices->quiet()) return false;
  run_delegated(*s, Call::kCollective, [&] { return call.library(*s, r->checked); });
  return true;
}
bool remembered(const std::shared_ptr<CommState>&, const ReduceScatterVCall&, const Options&) {
  return false;
}
// Out of line: the public entry's frame then holds the remembered call's path alone.
template <class Call>
[[gnu::noinline]] bool fast(const std::shared_ptr<CommState>& state, const Call& call,
                            const Options& options) {
  CommState* s = state.get();
  const bool nothing = moves_nothing(call);
  if (s == nullptr || !(s->delegating() || nothing)) return false;
  // A rank still awaiting the other ranks' notices of a call they all rejected
  // (failure_notices.hpp) settles them first, as the normal path's entry would: they reach each
  // rank in its own time, and a path chosen before they did would differ between ranks (a hang).
  // Throws where revoked.
  if (!s->notices->quiet()) [[unlikely]] {
    s->notices->before_call(Call::kCollective);
    if (!s->notices->quiet()) return false;
  }
  decltype(call.checks(*s)) checked{};
  try {
    checked = call.checks(*s);
    if (nothing) return nothing_to_move(Call::kCollective, 0);
    if (!delegated(*s, call, options)) return false;
  } catch (const Error&) {
    return false;  // the normal path reports it
  }
  new (remembered_slot_bytes<Call>(*s)) RememberedCall<Call>{
      call, checked, options.algorithm, options.memory, options.pipeline_depth, &config()};
  s->remembered_calls[static_cast<std::size_t>(Call::kCollective)].held = true;
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
std::uint64_t* Communicator::calls_started() noexcept {
  return state_ != nullptr ? &state_->next_sequence : nullptr;
}
void Communicator::entering_call() noexcept {
  if (state_ != nullptr && state_->trials_running()) state_->note_caller_entry();
}

// A collective's blocking call `name` and its nonblocking i`name`: one entry, told apart by its
// last argument. `params`: the public signature; then the fields of its descriptor `Call`.
#define COLLX_BLOCKING_AND_NONBLOCKING(name, Call, params, ...)              \
  void Communicator::name params {                                           \
    const detail::Call call{__VA_ARGS__};                                    \
    if (detail::remembered(state_, call, options)) return;                   \
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
  for (int r : ranks) {
    if (r < 0 || r >= size())
      fail("ranks: " + std::to_string(r) + " is not a rank of a communicator of " +
           std::to_string(size()));
  }
  // Checked on every rank that calls, before anything collective: a list with a rank twice
  // is an error wherever it is seen (MPI_Group_incl would leave the listed ranks waiting).
  std::vector<int> sorted(ranks.begin(), ranks.end());
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    fail("ranks: " + std::to_string(*twice) + " is listed twice");
  if (!std::binary_search(sorted.begin(), sorted.end(), rank()))
    fail("ranks: this rank is not listed (only the listed ranks call create_group)");
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
