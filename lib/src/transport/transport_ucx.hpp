// The UCX transport: UCP tag messages between the ranks of a communicator.
//
// One UCP context, worker and set of endpoints serve the whole process (UcxRuntime), as in MPI
// libraries and UCC: one ucp_worker_progress drives every communicator (a rank blocked in one
// still completes its peers' rendezvous in another). Communicators are told apart in the tag
// (make_ucx_tag). The worker is UCS_THREAD_MODE_SERIALIZED, as collx's calls are.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport.hpp"

// UCX's opaque handles, declared here so that this header does not need UCX's.
struct ucp_worker;
struct ucp_ep;

namespace collx::detail {

class UcxRuntime;

// The UCX tag of a message: context id, source rank and collx tag, received with a full mask,
// so UCX's in-order matching per (endpoint, tag) is MPI's per (source, tag).
inline constexpr int kUcxTagBits = 15;      // collx tags are below 32767
inline constexpr int kUcxRankBits = 24;     // communicators of up to 16,777,216 ranks
inline constexpr int kUcxContextBits = 25;  // 33,554,431 communicators per process lifetime
static_assert(kUcxTagBits + kUcxRankBits + kUcxContextBits == 64);
inline constexpr std::uint64_t make_ucx_tag(std::uint64_t context_id, std::uint64_t source,
                                            std::uint64_t tag) {
  return (context_id << (kUcxRankBits + kUcxTagBits)) | (source << kUcxTagBits) | tag;
}

class UcxTransport final : public Transport {
 public:
  // Some UCX transports keep 32-bit lengths in places: a larger message goes as consecutive
  // fragments with the same tag (matched in order; both ends post the same length).
  static constexpr std::size_t kDefaultMaxFragmentBytes = std::size_t{1} << 30;

  // Collective over `comm` (used, not owned; its error handler must be MPI_ERRORS_RETURN):
  // agrees on a context id and exchanges worker addresses. `max_fragment_bytes` is for tests.
  explicit UcxTransport(MPI_Comm comm, std::size_t max_fragment_bytes = kDefaultMaxFragmentBytes);
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  std::string_view name() const override { return "ucx"; }
  // Testing, a pass of progress, then the transfers.
  bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) override;
  void progress() override;
  // ucp_tag_probe_nb, from any source.
  bool message_arrived(int tag) override;
  void abandon(Transfer& t) noexcept override { settle(t, /*abandoning=*/true); }
  // UCX built with CUDA, unless COLLX_CUDA_AWARE says otherwise: device buffers then go to UCX
  // with the CUDA memory-type hint.
  bool supports_device_memory() const override;

  // The id every rank of the communicator agreed on (the high bits of its UCX tags).
  std::uint64_t context_id() const { return context_id_; }

 private:
  // Releases the UCX requests of `t` that are complete and, when none is left, marks it done;
  // throws collx::Error(ErrorCode::transport) when one failed. Abandoning, a receive's requests
  // are cancelled and driven to completion, a send's released to finish inside UCX, and nothing
  // throws.
  bool settle(Transfer& t, bool abandoning = false);
  void post(Transfer& t, void* buf, int tag, bool device) override;

  std::shared_ptr<UcxRuntime> runtime_;
  ucp_worker* worker_ = nullptr;
  std::vector<ucp_ep*> endpoints_;  // by rank in the communicator, owned by runtime_
  std::uint64_t context_id_ = 0;
  std::size_t max_fragment_bytes_;
};

// "1.13.1": the version of the UCX library loaded in this process.
const char* ucx_version();
// The memory types UCX supports in this process ("host", "cuda", "cuda-managed", ...), from its
// context (the running one, or one made for the question).
std::vector<std::string> ucx_memory_types();

}  // namespace collx::detail
