// The default transport: nonblocking MPI point-to-point on the communicator's duplicate.
#pragma once

#include <mpi.h>

#include "transport.hpp"

namespace collx::detail {

class MpiTransport final : public Transport {
 public:
  // `comm` is used, not owned. Its error handler must be MPI_ERRORS_RETURN.
  explicit MpiTransport(MPI_Comm comm);

  std::string_view name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void isend(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag) override;
  void irecv(Transfer& t, void* buf, std::size_t bytes, int peer, int tag) override;
  bool test_all(std::span<Transfer* const> ts) override;
  void wait_all(std::span<Transfer* const> ts) override;
  void send_blocking(const void* buf, std::size_t bytes, int peer, int tag) override;
  void recv_blocking(void* buf, std::size_t bytes, int peer, int tag) override;
  void shift_blocking(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                      std::size_t recv_bytes, int source, int tag) override;
  // One pass of MPI's progress engine (an MPI_Iprobe): a rank waiting on shared memory must
  // still answer its peers' messages in flight (a rendezvous acknowledgment, say).
  void progress() override;
  // MPI_Iprobe of each tag.
  bool message_arrived(int first_tag, int tags) override;
  void abandon(Transfer& t) noexcept override;
  // A CUDA-aware MPI library (or COLLX_CUDA_AWARE=1): MPI takes device buffers itself.
  bool supports_device_memory() const override;

 private:
  // Whether waits must also watch the communicator's failure notices.
  bool watching() const { return failure_notices() != nullptr; }
  // Whether the latency path's receives do (COLLX_LATENCY_PATH_WATCH).
  bool watching_latency_path() const { return watch_latency_path_ && watching(); }
  // Whether this transport's test loops yield the processor after a pass that found nothing:
  // where the node is oversubscribed and MPI's progress engine does not yield by itself.
  bool yields_when_idle() const;
  // Tests one receive until it completes, and the failure notices now and then.
  void wait_watching(Transfer& t);
  MPI_Comm comm_;
  int rank_ = 0;
  int size_ = 1;
  bool watch_latency_path_ = true;
};

[[noreturn]] void throw_mpi_error(int rc, const char* what, int rank);
// Throws collx::Error(ErrorCode::mpi) with MPI's error string when rc != MPI_SUCCESS.
inline void check_mpi(int rc, const char* what, int rank = -1) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw_mpi_error(rc, what, rank);
}

}  // namespace collx::detail
