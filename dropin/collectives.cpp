// The intercepted MPI collectives, blocking and nonblocking: each decides whether collx takes
// the call as it is (from arguments MPI requires to agree across ranks, so every rank decides
// alike), then runs it on collx or passes it to the PMPI_ function unchanged.
#include <optional>
#include <vector>

#include "interpose.hpp"

using collx_mpi::Blocking;
using collx_mpi::Call;
using collx_mpi::contiguous_bytes;
using collx_mpi::intercept;
using collx_mpi::Nonblocking;
using collx_mpi::PassReason;
using collx_mpi::reduction_of;

namespace {

constexpr collx::DataType kBytes = collx::DataType::uint8;

int comm_size(MPI_Comm comm) {
  int size = 0;
  if (comm == MPI_COMM_NULL || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return 0;
  return size;
}

int comm_rank(MPI_Comm comm) {
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  return rank;
}

// Arguments MPI rejects itself (with its own error class) go to MPI: a bad count or root, a
// null buffer that has elements.
PassReason argument_reason(int count, const void* buffer) {
  if (count < 0) return "negative count";
  if (count > 0 && buffer == nullptr) return "null buffer";
  return nullptr;
}

PassReason root_reason(int root, MPI_Comm comm) {
  return root < 0 || root >= comm_size(comm) ? "root out of range" : nullptr;
}

const char* const kNotReducible =
    "datatype or op collx does not reduce as MPI defines (user-defined, MINLOC/MAXLOC, logical, "
    "bitwise, or a type collx lacks)";
const char* const kNotContiguous = "not a predefined datatype without gaps";
const char* const kBlocksDiffer = "send and receive blocks of different lengths";

const void* source(const void* sendbuf, void* recvbuf) {
  return sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
}

std::size_t to_size(int count) {
  return static_cast<std::size_t>(count);
}

// The block length of a data-movement call in which every rank sends and receives (allgather,
// alltoall), or nothing with the reason.
struct Blocks {
  std::optional<std::size_t> block;
  PassReason reason = nullptr;
};
Blocks every_rank_blocks(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         int recvcount, MPI_Datatype recvtype) {
  Blocks b{contiguous_bytes(recvtype, recvcount), nullptr};
  b.reason = b.block ? argument_reason(recvcount, recvbuf) : kNotContiguous;
  if (!b.reason && sendbuf != MPI_IN_PLACE && contiguous_bytes(sendtype, sendcount) != b.block)
    b.reason = kBlocksDiffer;
  return b;
}

// The same for a rooted call (gather, scatter): `local` is the side every rank has (gather's
// send, scatter's receive), the root side is significant at the root only and alone says the
// length at a root that passes MPI_IN_PLACE for its local side.
struct RootedBlocks : Blocks {
  bool in_place = false;
};
RootedBlocks rooted_blocks(int root, MPI_Comm comm, const void* local_buffer, int local_count,
                           MPI_Datatype local_type, const void* root_buffer, int root_count,
                           MPI_Datatype root_type) {
  RootedBlocks b;
  b.reason = root_reason(root, comm);
  const bool at_root = !b.reason && comm_rank(comm) == root;
  b.in_place = at_root && local_buffer == MPI_IN_PLACE;
  b.block =
      at_root ? contiguous_bytes(root_type, root_count) : contiguous_bytes(local_type, local_count);
  if (!b.reason && !b.block) b.reason = kNotContiguous;
  if (!b.reason && at_root && !b.in_place && contiguous_bytes(local_type, local_count) != b.block)
    b.reason = kBlocksDiffer;
  if (!b.reason && at_root) b.reason = argument_reason(root_count, root_buffer);
  return b;
}

// ---- one function per collective, for both forms (Mode: Blocking or Nonblocking) ----

template <class Mode>
int allreduce(Mode mode, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
              MPI_Op op, MPI_Comm comm) {
  const auto reduction = reduction_of(datatype, op);
  PassReason reason = reduction ? argument_reason(count, recvbuf) : kNotReducible;
  return intercept(
      mode, Call::allreduce, comm, reason,
      [&](collx::Communicator& c) {
        const void* in = source(sendbuf, recvbuf);
        if constexpr (Mode::blocking)
          c.allreduce(in, recvbuf, to_size(count), reduction->type, reduction->op);
        else
          return c.iallreduce(in, recvbuf, to_size(count), reduction->type, reduction->op);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
        else
          return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, mode.request);
      });
}

template <class Mode>
int reduce(Mode mode, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
           MPI_Op op, int root, MPI_Comm comm) {
  const auto reduction = reduction_of(datatype, op);
  PassReason reason = reduction ? argument_reason(count, source(sendbuf, recvbuf)) : kNotReducible;
  if (!reason) reason = root_reason(root, comm);
  return intercept(
      mode, Call::reduce, comm, reason,
      [&](collx::Communicator& c) {
        const void* in = source(sendbuf, recvbuf);
        if constexpr (Mode::blocking)
          c.reduce(in, recvbuf, to_size(count), reduction->type, reduction->op, root);
        else
          return c.ireduce(in, recvbuf, to_size(count), reduction->type, reduction->op, root);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
        else
          return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, mode.request);
      });
}

template <class Mode>
int bcast(Mode mode, void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  const auto bytes = contiguous_bytes(datatype, count);
  PassReason reason = bytes ? argument_reason(count, buffer) : kNotContiguous;
  if (!reason) reason = root_reason(root, comm);
  return intercept(
      mode, Call::bcast, comm, reason,
      [&](collx::Communicator& c) {
        if constexpr (Mode::blocking)
          c.broadcast(buffer, *bytes, kBytes, root);
        else
          return c.ibroadcast(buffer, *bytes, kBytes, root);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Bcast(buffer, count, datatype, root, comm);
        else
          return PMPI_Ibcast(buffer, count, datatype, root, comm, mode.request);
      });
}

template <class Mode>
int allgather(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
              int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const auto [block, reason] =
      every_rank_blocks(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  return intercept(
      mode, Call::allgather, comm, reason,
      [&](collx::Communicator& c) {
        // In place: this rank's block is already at recvbuf + rank * block.
        const void* in = sendbuf == MPI_IN_PLACE
                             ? static_cast<char*>(recvbuf) + *block * to_size(c.rank())
                             : sendbuf;
        if constexpr (Mode::blocking)
          c.allgather(in, recvbuf, *block, kBytes);
        else
          return c.iallgather(in, recvbuf, *block, kBytes);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
        else
          return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                 mode.request);
      });
}

template <class Mode>
int reduce_scatter_block(Mode mode, const void* sendbuf, void* recvbuf, int recvcount,
                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const auto reduction = reduction_of(datatype, op);
  PassReason reason = reduction ? argument_reason(recvcount, recvbuf) : kNotReducible;
  return intercept(
      mode, Call::reduce_scatter_block, comm, reason,
      [&](collx::Communicator& c) {
        // In place (MPI_IN_PLACE): the input is recvbuf and the result its first block, as
        // collx's sendbuf == recvbuf form.
        const void* in = source(sendbuf, recvbuf);
        if constexpr (Mode::blocking)
          c.reduce_scatter(in, recvbuf, to_size(recvcount), reduction->type, reduction->op);
        else
          return c.ireduce_scatter(in, recvbuf, to_size(recvcount), reduction->type, reduction->op);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
        else
          return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm,
                                            mode.request);
      });
}

template <class Mode>
int reduce_scatter(Mode mode, const void* sendbuf, void* recvbuf, const int recvcounts[],
                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  const auto reduction = reduction_of(datatype, op);
  PassReason reason = reduction ? nullptr : kNotReducible;
  // Nonblocking: collx reads the counts when the call is made (they are copied).
  std::vector<std::size_t> counts;
  if (!reason && !recvcounts) reason = "null recvcounts";
  if (!reason) {
    const int size = comm_size(comm);
    for (int r = 0; r < size && !reason; ++r) {
      if (recvcounts[r] < 0) reason = "negative count";
      counts.push_back(to_size(recvcounts[r]));
    }
    if (!reason && size > 0) reason = argument_reason(recvcounts[comm_rank(comm)], recvbuf);
  }
  return intercept(
      mode, Call::reduce_scatter, comm, reason,
      [&](collx::Communicator& c) {
        const void* in = source(sendbuf, recvbuf);
        if constexpr (Mode::blocking)
          c.reduce_scatter_v(in, recvbuf, counts, reduction->type, reduction->op);
        else
          return c.ireduce_scatter_v(in, recvbuf, counts, reduction->type, reduction->op);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
        else
          return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                                      mode.request);
      });
}

template <class Mode>
int gather(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
           int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const auto b =
      rooted_blocks(root, comm, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  const auto block = b.block;
  const bool in_place = b.in_place;
  return intercept(
      mode, Call::gather, comm, b.reason,
      [&](collx::Communicator& c) {
        const void* in = in_place ? static_cast<char*>(recvbuf) + *block * to_size(root) : sendbuf;
        if constexpr (Mode::blocking)
          c.gather(in, recvbuf, *block, kBytes, root);
        else
          return c.igather(in, recvbuf, *block, kBytes, root);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                             comm);
        else
          return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                              comm, mode.request);
      });
}

template <class Mode>
int scatter(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
            int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const auto b =
      rooted_blocks(root, comm, recvbuf, recvcount, recvtype, sendbuf, sendcount, sendtype);
  const auto block = b.block;
  const bool in_place = b.in_place;
  return intercept(
      mode, Call::scatter, comm, b.reason,
      [&](collx::Communicator& c) {
        void* out = in_place ? nullptr : recvbuf;
        if constexpr (Mode::blocking)
          c.scatter(sendbuf, out, *block, kBytes, root);
        else
          return c.iscatter(sendbuf, out, *block, kBytes, root);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                              comm);
        else
          return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                               comm, mode.request);
      });
}

template <class Mode>
int alltoall(Mode mode, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const auto [block, reason] =
      every_rank_blocks(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  return intercept(
      mode, Call::alltoall, comm, reason,
      [&](collx::Communicator& c) {
        const void* in = source(sendbuf, recvbuf);
        if constexpr (Mode::blocking)
          c.alltoall(in, recvbuf, *block, kBytes);
        else
          return c.ialltoall(in, recvbuf, *block, kBytes);
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
        else
          return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                                mode.request);
      });
}

template <class Mode>
int barrier(Mode mode, MPI_Comm comm) {
  return intercept(
      mode, Call::barrier, comm, nullptr,
      [&](collx::Communicator& c) {
        if constexpr (Mode::blocking)
          c.barrier();
        else
          return c.ibarrier();
      },
      [&] {
        if constexpr (Mode::blocking)
          return PMPI_Barrier(comm);
        else
          return PMPI_Ibarrier(comm, mode.request);
      });
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  return allreduce(Blocking{}, sendbuf, recvbuf, count, datatype, op, comm);
}
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return allreduce(Nonblocking{request}, sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  return reduce(Blocking{}, sendbuf, recvbuf, count, datatype, op, root, comm);
}
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  return reduce(Nonblocking{request}, sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast(Blocking{}, buffer, count, datatype, root, comm);
}
int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  return bcast(Nonblocking{request}, buffer, count, datatype, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return allgather(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                   comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
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
  return alltoall(Blocking{}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return alltoall(Nonblocking{request}, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                  comm);
}

int MPI_Barrier(MPI_Comm comm) {
  return barrier(Blocking{}, comm);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return barrier(Nonblocking{request}, comm);
}

}  // extern "C"
