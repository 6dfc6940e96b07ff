// The intercepted MPI collectives, blocking and nonblocking: each decides whether collx takes
// the call (from what MPI requires to agree across ranks, so every rank decides alike:
// interpose.hpp), then runs it on collx, packing what is not contiguous (call_buffers.hpp), or
// passes it to the PMPI_ function unchanged.
#include <initializer_list>
#include <optional>
#include <tuple>
#include <vector>

#include <collx/mpi_types.hpp>

#include "interpose.hpp"

using collx_mpi::Blocking;
using collx_mpi::Call;
using collx_mpi::CallBuffers;
using collx_mpi::delegated_call;
using collx_mpi::intercept;
using collx_mpi::layout_of;
using collx_mpi::library_result;
using collx_mpi::LibraryCall;
using collx_mpi::Nonblocking;
using collx_mpi::PassReason;
using collx_mpi::reduction_of;
using collx_mpi::Signature;
using collx_mpi::TypeLayout;

namespace {

constexpr collx::DataType kBytes = collx::DataType::uint8;
// A call collx's path always takes (goes_to_library is false for counts per rank).
constexpr Signature kNeverToLibrary{collx::Collective::reduce_scatter_v, 0, kBytes};

int comm_size(MPI_Comm comm) {
  return collx_mpi::communicator_size(comm);
}

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  return rank;
}

std::size_t to_size(int count) {
  return static_cast<std::size_t>(count);
}

// Erroneous arguments go to MPI, which reports them with its own error class: a negative count,
// a root out of range, a datatype that is not one, a null buffer holding elements of a type
// whose bytes start at the buffer (with MPI_BOTTOM, a derived type's absolute addresses are
// legal), send and receive blocks of different lengths (their type signatures differ).
const char* const kNotReducible =
    "datatype or op collx does not reduce as MPI defines (user-defined, MINLOC/MAXLOC, logical, "
    "bitwise, or a type collx lacks)";
const char* const kNotADatatype = "not a datatype";
const char* const kBlocksDiffer = "send and receive blocks of different lengths";

PassReason count_reason(int count) {
  return count < 0 ? "negative count" : nullptr;
}

PassReason buffer_reason(const void* buffer, int count, const TypeLayout& layout) {
  return count > 0 && layout.size > 0 && buffer == nullptr && layout.offset == 0 ? "null buffer"
                                                                                 : nullptr;
}

PassReason root_reason(int root, MPI_Comm comm) {
  return root < 0 || root >= comm_size(comm) ? "root out of range" : nullptr;
}

// The first reason of several.
PassReason first(std::initializer_list<PassReason> reasons) {
  for (PassReason r : reasons)
    if (r) return r;
  return nullptr;
}

// A datatype's layout, and the reason to pass where it has none.
struct Typed {
  const TypeLayout* layout;
  PassReason reason;
};
Typed typed(MPI_Datatype type, int count, const void* buffer) {
  const TypeLayout* layout = layout_of(type);
  if (!layout) return {nullptr, kNotADatatype};
  return {layout, first({count_reason(count), buffer_reason(buffer, count, *layout)})};
}

// The bytes of `count` elements of a datatype.
std::size_t bytes_of(int count, const TypeLayout& layout) {
  return to_size(count) * layout.size;
}

// The delegated call of a collective that is not a reduction: the program's own arguments (the
// MPI library takes any datatype there).
template <class Pass>
auto as_given(const Pass& pass) {
  return [&pass](CallBuffers&, MPI_Comm on) { return pass(nullptr, on); };
}

// The PMPI_ call of a pass-through: blocking where `request` is null, nonblocking otherwise.
// `on`: the program's communicator, or collx's duplicate of it for a delegated call.
#define COLLX_PASS(blocking_call, nonblocking_call, ...)                                  \
  [&](MPI_Request* request, MPI_Comm on) {                                                \
    return request ? nonblocking_call(__VA_ARGS__, request) : blocking_call(__VA_ARGS__); \
  }

// The root of a reduce as its remembered call holds it: the root decides nothing (a program
// that moves the root, as IMB does, keeps its call remembered) but where such an MPICH's defect
// makes a nonzero root take collx's path.
constexpr int decisive_reduce_root([[maybe_unused]] int root) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
  return root;
#else
  return -1;
#endif
}

// The remembered-call keys (LibraryCall): what each collective's decision reads, built alike by
// its MPI_ function's check (delegated_call) and by its full function, which remembers it.
// A reduction: its communicator, datatype, count, op (and root where it decides).
LibraryCall reduction_key(MPI_Comm comm, MPI_Datatype type, int count, MPI_Op op, int root = -1) {
  return {comm, type, count, MPI_DATATYPE_NULL, 0, op, root};
}
// Allgather, alltoall, broadcast: the side every rank's call shares.
LibraryCall shared_side_key(MPI_Comm comm, MPI_Datatype type, int count) {
  return {comm, type, count};
}
// Gather and scatter: the root's decision reads one side, the others' the other: both.
LibraryCall rooted_key(MPI_Comm comm, MPI_Datatype sendtype, int sendcount, MPI_Datatype recvtype,
                       int recvcount, int root) {
  return {comm, sendtype, sendcount, recvtype, recvcount, MPI_OP_NULL, root};
}

// ---- one function per collective, for both forms (Mode: Blocking or Nonblocking) ----
// Out of line: a blocking call's MPI_ function first checks whether it is the remembered
// delegated call (delegated_call) and makes it without entering these frames.

template <class Mode>
[[gnu::noinline]] int allreduce(Mode mode, const void* sendbuf, void* recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const auto pass =
      COLLX_PASS(PMPI_Allreduce, PMPI_Iallreduce, sendbuf, recvbuf, count, datatype, op, on);
  LibraryCall key = reduction_key(comm, datatype, count, op);
  const TypeLayout* layout = layout_of(datatype);
  key.predefined = layout && layout->predefined;
  const auto reduction = layout ? reduction_of(*layout, op) : std::nullopt;
  const PassReason reason =
      reduction ? first({count_reason(count), buffer_reason(recvbuf, count, *layout)})
                : kNotReducible;
  return intercept(
      mode, Call::allreduce, comm, reason, key,
      [&](const collx::Communicator&) {
        return Signature{collx::Collective::allreduce, to_size(count) * reduction->elements,
                         reduction->type, reduction->op};
      },
      [&](CallBuffers& b, MPI_Comm on) {
        const std::size_t n = to_size(count);
        const bool in_place = sendbuf == MPI_IN_PLACE;
        const std::byte* in = in_place ? nullptr : b.in(sendbuf, n, datatype, *layout);
        std::byte* out = b.out(recvbuf, n, datatype, *layout, in_place ? n : 0);
        return PMPI_Allreduce(in_place ? MPI_IN_PLACE : in, out,
                              static_cast<int>(n * reduction->elements),
                              collx::mpi_datatype(reduction->type), op, on);
      },
      [&](collx::Communicator& c, CallBuffers& b) {
        const std::size_t n = to_size(count);
        const bool in_place = sendbuf == MPI_IN_PLACE;
        const std::byte* in = in_place ? nullptr : b.in(sendbuf, n, datatype, *layout);
        std::byte* out = b.out(recvbuf, n, datatype, *layout, in_place ? n : 0);
        if (in_place) in = out;
        const std::size_t elements = n * reduction->elements;
        if constexpr (Mode::blocking)
          c.allreduce(in, out, elements, reduction->type, reduction->op);
        else
          return c.iallreduce(in, out, elements, reduction->type, reduction->op);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int reduce(Mode mode, const void* sendbuf, void* recvbuf, int count,
                             MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm) {
  const auto pass =
      COLLX_PASS(PMPI_Reduce, PMPI_Ireduce, sendbuf, recvbuf, count, datatype, op, root, on);
  LibraryCall key = reduction_key(comm, datatype, count, op, decisive_reduce_root(root));
  const TypeLayout* layout = layout_of(datatype);
  key.predefined = layout && layout->predefined;
  const auto reduction = layout ? reduction_of(*layout, op) : std::nullopt;
  const PassReason reason =
      reduction
          ? first({count_reason(count), root_reason(root, comm),
                   buffer_reason(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, count, *layout)})
          : kNotReducible;
  return intercept(
      mode, Call::reduce, comm, reason, key,
      [&](const collx::Communicator&) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
        // Such an MPICH reads MPI_IN_PLACE as an address at a nonzero root
        // (pmodels/mpich#6540): collx's own path passes it a copy of the root's data.
        if (root != 0) return kNeverToLibrary;
#endif
        return Signature{collx::Collective::reduce, to_size(count) * reduction->elements,
                         reduction->type, reduction->op};
      },
      [&](CallBuffers& b, MPI_Comm on) {
        const std::size_t n = to_size(count);
        const bool is_root = comm_rank(comm) == root;
        const bool in_place = is_root && sendbuf == MPI_IN_PLACE;
        const std::byte* in = in_place ? nullptr : b.in(sendbuf, n, datatype, *layout);
        std::byte* out = is_root ? b.out(recvbuf, n, datatype, *layout, in_place ? n : 0) : nullptr;
        return PMPI_Reduce(in_place ? MPI_IN_PLACE : in, out,
                           static_cast<int>(n * reduction->elements),
                           collx::mpi_datatype(reduction->type), op, root, on);
      },
      [&](collx::Communicator& c, CallBuffers& b) {
        const std::size_t n = to_size(count);
        const bool is_root = c.rank() == root;
        const bool in_place = is_root && sendbuf == MPI_IN_PLACE;
        const std::byte* in = in_place ? nullptr : b.in(sendbuf, n, datatype, *layout);
        // recvbuf is significant at the root only.
        std::byte* out = is_root ? b.out(recvbuf, n, datatype, *layout, in_place ? n : 0) : nullptr;
        if (in_place) in = out;
        const std::size_t elements = n * reduction->elements;
        if constexpr (Mode::blocking)
          c.reduce(in, out, elements, reduction->type, reduction->op, root);
        else
          return c.ireduce(in, out, elements, reduction->type, reduction->op, root);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int bcast(Mode mode, void* buffer, int count, MPI_Datatype datatype, int root,
                            MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Bcast, PMPI_Ibcast, buffer, count, datatype, root, on);
  // The root decides nothing: a program that moves it (IMB does) keeps its call remembered.
  LibraryCall key = shared_side_key(comm, datatype, count);
  const auto [layout, reason] = typed(datatype, count, buffer);
  key.predefined = layout && layout->predefined;
  return intercept(
      mode, Call::bcast, comm, first({reason, root_reason(root, comm)}), key,
      [&](const collx::Communicator&) {
        return Signature{collx::Collective::broadcast, bytes_of(count, *layout), kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const std::size_t n = to_size(count);
        // The root's elements go out as they are packed; the others' come in packed.
        std::byte* bytes = c.rank() == root
                               ? const_cast<std::byte*>(b.in(buffer, n, datatype, *layout))
                               : b.out(buffer, n, datatype, *layout);
        if constexpr (Mode::blocking)
          c.broadcast(bytes, bytes_of(count, *layout), kBytes, root);
        else
          return c.ibroadcast(bytes, bytes_of(count, *layout), kBytes, root);
      },
      pass);
}

// The send side of a call in which every rank sends and receives blocks of `block` bytes
// (allgather, alltoall): the reason to pass where it is not the receive side's length.
PassReason send_side_reason(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            std::size_t block, const TypeLayout** layout) {
  if (sendbuf == MPI_IN_PLACE) return nullptr;
  const auto [l, reason] = typed(sendtype, sendcount, sendbuf);
  *layout = l;
  if (reason) return reason;
  return bytes_of(sendcount, *l) == block ? nullptr : kBlocksDiffer;
}

// Both sides of a call in which every rank sends and receives (allgather, alltoall): the
// receive side's layout says the block's length, the send side's must match it.
struct EveryRank {
  const TypeLayout* recv_layout = nullptr;
  const TypeLayout* send_layout = nullptr;
  PassReason reason = nullptr;
};
EveryRank every_rank(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype) {
  EveryRank e;
  const Typed recv = typed(recvtype, recvcount, recvbuf);
  e.recv_layout = recv.layout;
  e.reason = recv.reason ? recv.reason
                         : send_side_reason(sendbuf, sendcount, sendtype,
                                            bytes_of(recvcount, *recv.layout), &e.send_layout);
  return e;
}

template <class Mode>
[[gnu::noinline]] int allgather(Mode mode, const void* sendbuf, int sendcount,
                                MPI_Datatype sendtype, void* recvbuf, int recvcount,
                                MPI_Datatype recvtype, MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Allgather, PMPI_Iallgather, sendbuf, sendcount, sendtype,
                               recvbuf, recvcount, recvtype, on);
  // What every rank's call shares: the receive side.
  LibraryCall key = shared_side_key(comm, recvtype, recvcount);
  const auto [recv_layout, send_layout, reason] =
      every_rank(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  key.predefined = recv_layout && recv_layout->predefined;
  return intercept(
      mode, Call::allgather, comm, reason, key,
      [&](const collx::Communicator&) {
        return Signature{collx::Collective::allgather, bytes_of(recvcount, *recv_layout), kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const bool in_place = sendbuf == MPI_IN_PLACE;
        const std::size_t block = bytes_of(recvcount, *recv_layout);
        const std::size_t all = to_size(c.size()) * to_size(recvcount);
        std::byte* out = b.out(recvbuf, all, recvtype, *recv_layout, in_place ? all : 0);
        // In place: this rank's block is already in recvbuf, block `rank`.
        const std::byte* in = in_place ? out + block * to_size(c.rank())
                                       : b.in(sendbuf, to_size(sendcount), sendtype, *send_layout);
        if constexpr (Mode::blocking)
          c.allgather(in, out, block, kBytes);
        else
          return c.iallgather(in, out, block, kBytes);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int alltoall(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                               void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Alltoall, PMPI_Ialltoall, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, on);
  // What every rank's call shares: the receive side.
  LibraryCall key = shared_side_key(comm, recvtype, recvcount);
  const auto [recv_layout, send_layout, reason] =
      every_rank(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  key.predefined = recv_layout && recv_layout->predefined;
  return intercept(
      mode, Call::alltoall, comm, reason, key,
      [&](const collx::Communicator&) {
        return Signature{collx::Collective::alltoall, bytes_of(recvcount, *recv_layout), kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const bool in_place = sendbuf == MPI_IN_PLACE;
        const std::size_t p = to_size(c.size());
        const std::size_t all = p * to_size(recvcount);
        std::byte* out = b.out(recvbuf, all, recvtype, *recv_layout, in_place ? all : 0);
        const std::byte* in =
            in_place ? out : b.in(sendbuf, p * to_size(sendcount), sendtype, *send_layout);
        const std::size_t block = bytes_of(recvcount, *recv_layout);
        if constexpr (Mode::blocking)
          c.alltoall(in, out, block, kBytes);
        else
          return c.ialltoall(in, out, block, kBytes);
      },
      pass);
}

// Gather and scatter: every rank has a `local` side (gather's send, scatter's receive) but the
// root, where MPI_IN_PLACE may stand for it; the root's side (the whole buffer) is significant
// at the root only. The block length comes from the root's side at the root and from the
// local side elsewhere: MPI requires the two to match.
struct Rooted {
  const TypeLayout* local = nullptr;
  const TypeLayout* whole = nullptr;  // at the root
  PassReason reason = nullptr;
};
Rooted rooted(int root, MPI_Comm comm, const void* local_buffer, int local_count,
              MPI_Datatype local_type, const void* root_buffer, int root_count,
              MPI_Datatype root_type) {
  Rooted r;
  r.reason = root_reason(root, comm);
  if (r.reason) return r;
  const bool in_place = local_buffer == MPI_IN_PLACE;
  if (comm_rank(comm) != root) {
    const Typed local = typed(local_type, local_count, local_buffer);
    r.local = local.layout;
    r.reason = local.reason;
    return r;
  }
  const Typed whole = typed(root_type, root_count, root_buffer);
  r.whole = whole.layout;
  r.reason = whole.reason;
  if (!r.reason && !in_place)
    r.reason = send_side_reason(local_buffer, local_count, local_type,
                                bytes_of(root_count, *r.whole), &r.local);
  return r;
}

template <class Mode>
[[gnu::noinline]] int gather(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Gather, PMPI_Igather, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, on);
  // The root's decision reads the receive side, the others' the send side: the key holds both.
  LibraryCall key = rooted_key(comm, sendtype, sendcount, recvtype, recvcount, root);
  const Rooted r = rooted(root, comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  key.predefined = r.whole ? r.whole->predefined : r.local && r.local->predefined;
  return intercept(
      mode, Call::gather, comm, r.reason, key,
      [&](const collx::Communicator& c) {
        return Signature{
            collx::Collective::gather,
            c.rank() == root ? bytes_of(recvcount, *r.whole) : bytes_of(sendcount, *r.local),
            kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const bool is_root = c.rank() == root;
        const bool in_place = is_root && sendbuf == MPI_IN_PLACE;
        const std::size_t block =
            is_root ? bytes_of(recvcount, *r.whole) : bytes_of(sendcount, *r.local);
        const std::size_t all = to_size(c.size()) * to_size(recvcount);
        std::byte* out =
            is_root ? b.out(recvbuf, all, recvtype, *r.whole, in_place ? all : 0) : nullptr;
        const std::byte* in = in_place ? out + block * to_size(root)
                                       : b.in(sendbuf, to_size(sendcount), sendtype, *r.local);
        if constexpr (Mode::blocking)
          c.gather(in, out, block, kBytes, root);
        else
          return c.igather(in, out, block, kBytes, root);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int scatter(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                              MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Scatter, PMPI_Iscatter, sendbuf, sendcount, sendtype, recvbuf,
                               recvcount, recvtype, root, on);
  // The root's decision reads the send side, the others' the receive side: the key holds both.
  LibraryCall key = rooted_key(comm, sendtype, sendcount, recvtype, recvcount, root);
  const Rooted r = rooted(root, comm, recvbuf, recvcount, recvtype, sendbuf, sendcount, sendtype);
  key.predefined = r.whole ? r.whole->predefined : r.local && r.local->predefined;
  return intercept(
      mode, Call::scatter, comm, r.reason, key,
      [&](const collx::Communicator& c) {
        return Signature{
            collx::Collective::scatter,
            c.rank() == root ? bytes_of(sendcount, *r.whole) : bytes_of(recvcount, *r.local),
            kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const bool is_root = c.rank() == root;
        const bool in_place = is_root && recvbuf == MPI_IN_PLACE;
        const std::size_t block =
            is_root ? bytes_of(sendcount, *r.whole) : bytes_of(recvcount, *r.local);
        const std::byte* in =
            is_root ? b.in(sendbuf, to_size(c.size()) * to_size(sendcount), sendtype, *r.whole)
                    : nullptr;
        // In place the root's own block stays in sendbuf.
        std::byte* out =
            in_place ? nullptr : b.out(recvbuf, to_size(recvcount), recvtype, *r.local);
        if constexpr (Mode::blocking)
          c.scatter(in, out, block, kBytes, root);
        else
          return c.iscatter(in, out, block, kBytes, root);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int reduce_scatter_block(Mode mode, const void* sendbuf, void* recvbuf,
                                           int recvcount, MPI_Datatype datatype, MPI_Op op,
                                           MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Reduce_scatter_block, PMPI_Ireduce_scatter_block, sendbuf,
                               recvbuf, recvcount, datatype, op, on);
  LibraryCall key = reduction_key(comm, datatype, recvcount, op);
  const TypeLayout* layout = layout_of(datatype);
  key.predefined = layout && layout->predefined;
  const auto reduction = layout ? reduction_of(*layout, op) : std::nullopt;
  const PassReason reason =
      reduction ? first({count_reason(recvcount), buffer_reason(recvbuf, recvcount, *layout)})
                : kNotReducible;
  return intercept(
      mode, Call::reduce_scatter_block, comm, reason, key,
      [&](const collx::Communicator&) {
        return Signature{collx::Collective::reduce_scatter,
                         to_size(recvcount) * reduction->elements, reduction->type, reduction->op};
      },
      [&](CallBuffers& b, MPI_Comm on) {
        const std::size_t n = to_size(recvcount);
        const std::size_t all = to_size(comm_size(comm)) * n;
        const bool in_place = sendbuf == MPI_IN_PLACE;
        std::byte* out = b.out(recvbuf, n, datatype, *layout, in_place ? all : 0);
        const std::byte* in = in_place ? nullptr : b.in(sendbuf, all, datatype, *layout);
        return PMPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : in, out,
                                         static_cast<int>(n * reduction->elements),
                                         collx::mpi_datatype(reduction->type), op, on);
      },
      [&](collx::Communicator& c, CallBuffers& b) {
        const std::size_t n = to_size(recvcount);
        const std::size_t all = to_size(c.size()) * n;
        // In place (MPI_IN_PLACE): the input is recvbuf and the result its first block, as
        // collx's sendbuf == recvbuf form.
        const bool in_place = sendbuf == MPI_IN_PLACE;
        std::byte* out = b.out(recvbuf, n, datatype, *layout, in_place ? all : 0);
        const std::byte* in = in_place ? out : b.in(sendbuf, all, datatype, *layout);
        const std::size_t elements = n * reduction->elements;
        if constexpr (Mode::blocking)
          c.reduce_scatter(in, out, elements, reduction->type, reduction->op);
        else
          return c.ireduce_scatter(in, out, elements, reduction->type, reduction->op);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int reduce_scatter(Mode mode, const void* sendbuf, void* recvbuf,
                                     const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                                     MPI_Comm comm) {
  const auto pass = COLLX_PASS(PMPI_Reduce_scatter, PMPI_Ireduce_scatter, sendbuf, recvbuf,
                               recvcounts, datatype, op, on);
  const TypeLayout* layout = layout_of(datatype);
  const auto reduction = layout ? reduction_of(*layout, op) : std::nullopt;
  PassReason reason = reduction ? nullptr : kNotReducible;
  // collx's counts, in its elements (a nonblocking call copies them).
  std::vector<std::size_t> counts;
  std::size_t all = 0;
  if (!reason && !recvcounts) reason = "null recvcounts";
  if (!reason) {
    const int size = comm_size(comm);
    for (int r = 0; r < size && !reason; ++r) {
      reason = count_reason(recvcounts[r]);
      counts.push_back(to_size(recvcounts[r]) * reduction->elements);
      all += to_size(recvcounts[r]);
    }
    if (!reason && size > 0) {
      const int mine = recvcounts[comm_rank(comm)];
      reason = buffer_reason(recvbuf, mine, *layout);
    }
  }
  return intercept(
      mode, Call::reduce_scatter, comm, reason, LibraryCall{},
      [](const collx::Communicator&) { return kNeverToLibrary; }, as_given(pass),
      [&](collx::Communicator& c, CallBuffers& b) {
        const std::size_t mine = to_size(recvcounts[c.rank()]);
        const bool in_place = sendbuf == MPI_IN_PLACE;
        std::byte* out = b.out(recvbuf, mine, datatype, *layout, in_place ? all : 0);
        const std::byte* in = in_place ? out : b.in(sendbuf, all, datatype, *layout);
        if constexpr (Mode::blocking)
          c.reduce_scatter_v(in, out, counts, reduction->type, reduction->op);
        else
          return c.ireduce_scatter_v(in, out, counts, reduction->type, reduction->op);
      },
      pass);
}

template <class Mode>
[[gnu::noinline]] int barrier(Mode mode, MPI_Comm comm) {
  const auto pass = [](MPI_Request* request, MPI_Comm on) {
    return request ? PMPI_Ibarrier(on, request) : PMPI_Barrier(on);
  };
  LibraryCall key{comm};
  key.predefined = true;  // no datatype
  return intercept(
      mode, Call::barrier, comm, nullptr, key,
      [](const collx::Communicator&) {
        return Signature{collx::Collective::barrier, 0, kBytes};
      },
      as_given(pass),
      [&](collx::Communicator& c, CallBuffers&) {
        if constexpr (Mode::blocking)
          c.barrier();
        else
          return c.ibarrier();
      },
      pass);
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  if (const LibraryCall* r =
          delegated_call(Call::allreduce, reduction_key(comm, datatype, count, op)))
    return library_result(comm,
                          PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, r->library_comm));
  return allreduce(Blocking{}, sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return allreduce(Nonblocking{request}, sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  if (const LibraryCall* r = delegated_call(
          Call::reduce, reduction_key(comm, datatype, count, op, decisive_reduce_root(root))))
    return library_result(
        comm, PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, r->library_comm));
  return reduce(Blocking{}, sendbuf, recvbuf, count, datatype, op, root, comm);
}
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  return reduce(Nonblocking{request}, sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (const LibraryCall* r = delegated_call(Call::bcast, shared_side_key(comm, datatype, count)))
    return library_result(comm, PMPI_Bcast(buffer, count, datatype, root, r->library_comm));
  return bcast(Blocking{}, buffer, count, datatype, root, comm);
}
int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  return bcast(Nonblocking{request}, buffer, count, datatype, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (const LibraryCall* r =
          delegated_call(Call::allgather, shared_side_key(comm, recvtype, recvcount)))
    return library_result(comm, PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                               recvtype, r->library_comm));
  return allgather(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                   comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (const LibraryCall* r =
          delegated_call(Call::reduce_scatter_block, reduction_key(comm, datatype, recvcount, op)))
    return library_result(comm, PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op,
                                                          r->library_comm));
  return reduce_scatter_block(Blocking{}, sendbuf, recvbuf, recvcount, datatype, op, comm);
}
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  return reduce_scatter_block(Nonblocking{request}, sendbuf, recvbuf, recvcount, datatype, op,
                              comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(Blocking{}, sendbuf, recvbuf, recvcounts, datatype, op, comm);
}
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter(Nonblocking{request}, sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (const LibraryCall* r = delegated_call(
          Call::gather, rooted_key(comm, sendtype, sendcount, recvtype, recvcount, root)))
    return library_result(comm, PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                            recvtype, root, r->library_comm));
  return gather(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  return gather(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                root, comm);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  if (const LibraryCall* r = delegated_call(
          Call::scatter, rooted_key(comm, sendtype, sendcount, recvtype, recvcount, root)))
    return library_result(comm, PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                             recvtype, root, r->library_comm));
  return scatter(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                 comm);
}
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return scatter(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                 root, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (const LibraryCall* r =
          delegated_call(Call::alltoall, shared_side_key(comm, recvtype, recvcount)))
    return library_result(comm, PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                              recvtype, r->library_comm));
  return alltoall(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                  comm);
}

int MPI_Barrier(MPI_Comm comm) {
  if (const LibraryCall* r = delegated_call(Call::barrier, {comm}))
    return library_result(comm, PMPI_Barrier(r->library_comm));
  return barrier(Blocking{}, comm);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return barrier(Nonblocking{request}, comm);
}

}  // extern "C"
