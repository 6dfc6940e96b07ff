#include "collx/error.hpp"

#include <array>
#include <string>

namespace collx {

std::string_view to_string(ErrorCode code) {
  // In ErrorCode's order.
  static constexpr std::array<std::string_view, 11> kNames = {"invalid argument",
                                                              "unsupported",
                                                              "communicator freed",
                                                              "mismatched call",
                                                              "timeout",
                                                              "MPI error",
                                                              "transport error",
                                                              "CUDA error",
                                                              "configuration error",
                                                              "internal error",
                                                              "communicator revoked"};
  const auto i = static_cast<std::size_t>(code);
  return i < kNames.size() ? kNames[i] : "error";
}

namespace {
std::string format_error(ErrorCode code, std::string_view collective, int rank,
                         std::string_view message) {
  std::string out = "collx";
  if (!collective.empty()) out.append(" ").append(collective);
  if (rank >= 0) out += " (rank " + std::to_string(rank) + ")";
  return out.append(": ").append(to_string(code)).append(": ").append(message);
}
}  // namespace

Error::Error(ErrorCode code, std::string_view collective, int rank, std::string_view message)
    : std::runtime_error(format_error(code, collective, rank, message)),
      code_(code),
      collective_(collective),
      rank_(rank),
      detail_(message) {}

}  // namespace collx
