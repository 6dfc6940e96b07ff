#include "collx/error.hpp"

#include <string>

namespace collx {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument:
      return "invalid argument";
    case ErrorCode::unsupported:
      return "unsupported";
    case ErrorCode::communicator_freed:
      return "communicator freed";
    case ErrorCode::mismatch:
      return "mismatched call";
    case ErrorCode::timeout:
      return "timeout";
    case ErrorCode::mpi:
      return "MPI error";
    case ErrorCode::transport:
      return "transport error";
    case ErrorCode::cuda:
      return "CUDA error";
    case ErrorCode::config:
      return "configuration error";
    case ErrorCode::internal:
      return "internal error";
    case ErrorCode::revoked:
      return "communicator revoked";
  }
  return "error";
}

namespace {
std::string format_error(ErrorCode code, std::string_view collective, int rank,
                         std::string_view message) {
  std::string out = "collx";
  if (!collective.empty()) {
    out += ' ';
    out += collective;
  }
  if (rank >= 0) out += " (rank " + std::to_string(rank) + ")";
  out += ": ";
  out += to_string(code);
  out += ": ";
  out += message;
  return out;
}
}  // namespace

Error::Error(ErrorCode code, std::string_view collective, int rank, std::string_view message)
    : std::runtime_error(format_error(code, collective, rank, message)),
      code_(code),
      collective_(collective),
      rank_(rank),
      detail_(message) {}

}  // namespace collx
