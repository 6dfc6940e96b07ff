// collx::Error: every failure of the library, with a code, the collective and the rank.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace collx {

enum class ErrorCode {
  invalid_argument,    // a bad argument (null buffer, bad root, overlapping buffers, ...)
  unsupported,         // a type/op pair or algorithm that the collective does not offer
  communicator_freed,  // the communicator was freed
  mismatch,            // ranks called different collectives or arguments (COLLX_CHECK=1)
  timeout,             // a wait exceeded COLLX_TIMEOUT
  mpi,                 // the MPI library returned an error
  transport,           // a transport (UCX, ...) failed
  cuda,                // a CUDA runtime call failed
  config,              // a malformed environment variable or tuning file
  internal,            // a broken invariant inside collx
  revoked,             // a rank failed (it or another): the communicator is unusable from now on
};

std::string_view to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  // rank < 0 means "not known" (for example before a communicator exists).
  Error(ErrorCode code, std::string_view collective, int rank, std::string_view message);

  ErrorCode code() const noexcept { return code_; }
  const std::string& collective() const noexcept { return collective_; }
  int rank() const noexcept { return rank_; }
  // The message without the "collx <collective> (rank N): <code>:" prefix.
  const std::string& detail() const noexcept { return detail_; }

 private:
  ErrorCode code_;
  std::string collective_;
  int rank_;
  std::string detail_;
};

}  // namespace collx
