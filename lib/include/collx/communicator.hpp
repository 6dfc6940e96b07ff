// collx::Communicator: a group of ranks and the collectives that run over it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>

#include "collx/options.hpp"
#include "collx/request.hpp"
#include "collx/types.hpp"

namespace collx {

namespace detail {
struct CommState;
}

class Communicator {
 public:
  // Duplicates `comm` (so collx's messages never match the application's) and frees the
  // duplicate on destruction. MPI must be initialised.
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  // The duplicated MPI communicator that collx sends on.
  MPI_Comm mpi_comm() const;
  // Releases the communicator; any later call on it throws ErrorCode::communicator_freed.
  // Waits for its operations in flight first.
  void free();
  bool is_freed() const noexcept;

  // ---- allreduce: every rank gets op over all ranks' sendbuf, elementwise ----
  // In place when sendbuf == recvbuf.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 const Options& options = {});
  void allreduce(InPlace, void* buffer, std::size_t count, DataType type, ReduceOp op,
                 const Options& options = {});
  template <class T>
  void allreduce(std::span<const T> send, std::span<T> recv, ReduceOp op,
                 const Options& options = {}) {
    check_span_sizes("allreduce", send.size(), recv.size());
    allreduce(send.data(), recv.data(), send.size(), datatype_of_v<T>, op, options);
  }
  template <class T>
  void allreduce(std::span<T> buffer, ReduceOp op, const Options& options = {}) {
    allreduce(in_place, buffer.data(), buffer.size(), datatype_of_v<T>, op, options);
  }
  Request iallreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                     ReduceOp op, const Options& options = {});
  template <class T>
  Request iallreduce(std::span<T> buffer, ReduceOp op, const Options& options = {}) {
    return iallreduce(buffer.data(), buffer.data(), buffer.size(), datatype_of_v<T>, op, options);
  }

  detail::CommState& state() const;

 private:
  void check_span_sizes(const char* collective, std::size_t send, std::size_t recv) const;
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace collx
