// The default transport: nonblocking MPI point-to-point on the communicator's duplicate.
#pragma once

#include <mpi.h>

#include "cuda_aware.hpp"
#include "transport.hpp"

namespace collx::detail {

class MpiTransport final : public Transport {
 public:
  // `comm` is used, not owned. Its error handler must be MPI_ERRORS_RETURN.
  explicit MpiTransport(MPI_Comm comm) : Transport(comm), comm_(comm) {}

  std::string_view name() const override { return "mpi"; }
  // An error names each failed request.
  bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) override;
  // One pass of MPI's progress engine: a rank waiting on shared memory must still answer its
  // peers' messages in flight.
  void progress() override;
  // MPI_Iprobe.
  bool message_arrived(int tag) override;
  void abandon(Transfer& t) noexcept override;
  // A CUDA-aware MPI library (or COLLX_CUDA_AWARE=1): MPI takes device buffers itself.
  bool supports_device_memory() const override { return cuda_awareness().mpi_direct(); }

 private:
  void post(Transfer& t, void* buf, int tag, bool device) override;
  MPI_Comm comm_;
};

// Throws collx::Error(ErrorCode::mpi): "<what> failed: <MPI's error string>".
[[noreturn]] void throw_mpi_error(int rc, const char* what, int rank,
                                  std::string_view collective = {});
// Throws collx::Error(ErrorCode::mpi) with MPI's error string when rc != MPI_SUCCESS.
inline void check_mpi(int rc, const char* what, int rank = -1) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw_mpi_error(rc, what, rank);
}
// Whether `mine` holds on every rank of `comm` (collective).
bool on_every_rank(bool mine, MPI_Comm comm, int rank);
inline bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace collx::detail
