// TEMPORARY: broadcast / allgather / reduce_scatter through the MPI library until collx's own
// land on main (same signatures as the collx::Communicator members). Removed before merging.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <stdexcept>

#include "collx/collx.hpp"

namespace collx::train::shim {

inline MPI_Datatype mpi_type(DataType type) {
  switch (type) {
    case DataType::float32:
      return MPI_FLOAT;
    case DataType::float64:
      return MPI_DOUBLE;
    case DataType::uint64:
      return MPI_UINT64_T;
    case DataType::int64:
      return MPI_INT64_T;
    case DataType::uint8:
      return MPI_UINT8_T;
    case DataType::int32:
      return MPI_INT32_T;
    default:
      throw std::invalid_argument("shim: unsupported type");
  }
}

inline int as_int(std::size_t count) {
  if (count > INT_MAX) throw std::length_error("shim: count above INT_MAX");
  return static_cast<int>(count);
}

inline void broadcast(Communicator& comm, void* buffer, std::size_t count, DataType type, int root,
                      const Options& = {}) {
  MPI_Bcast(buffer, as_int(count), mpi_type(type), root, comm.mpi_comm());
}

inline void allgather(Communicator& comm, const void* sendbuf, void* recvbuf, std::size_t count,
                      DataType type, const Options& = {}) {
  MPI_Allgather(sendbuf, as_int(count), mpi_type(type), recvbuf, as_int(count), mpi_type(type),
                comm.mpi_comm());
}

inline void allgather(Communicator& comm, InPlace, void* recvbuf, std::size_t count, DataType type,
                      const Options& = {}) {
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recvbuf, as_int(count), mpi_type(type),
                comm.mpi_comm());
}

inline Request ireduce_scatter(Communicator& comm, const void* sendbuf, void* recvbuf,
                               std::size_t count, DataType type, ReduceOp, const Options& = {}) {
  MPI_Reduce_scatter_block(sendbuf, recvbuf, as_int(count), mpi_type(type), MPI_SUM,
                           comm.mpi_comm());
  return Request();
}

}  // namespace collx::train::shim
