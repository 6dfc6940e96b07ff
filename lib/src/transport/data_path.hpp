// DataPath: how the bytes of one collective call move. An Operation posts every message, copy
// and scratch buffer through it without asking what memory that is: host memory (HostVerbs)
// goes straight to the transport and memcpy, device memory through device_call.hpp.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "host_reduce.hpp"
#include "scratch.hpp"
#include "transport.hpp"

namespace collx::detail {

class DataPath {
 public:
  virtual ~DataPath() = default;

  // Posts a send or a receive in this memory (Transport::post_message). A receive with
  // exact_length == false (point-to-point) may get a shorter message; the bytes after it keep
  // their contents.
  virtual void post(Transfer& t, bool is_send, void* buf, std::size_t bytes, int peer, int tag,
                    bool exact_length) = 0;
  // As Transport::test_or_wait_all; host transfers on the call's transport may be among them.
  virtual bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) = 0;

  // Memory of this kind for the algorithm's temporaries.
  virtual ScratchBuffer scratch(std::size_t bytes) = 0;
  // dst <- src, the two regions possibly overlapping where `may_overlap` says so.
  virtual void copy(void* dst, const void* src, std::size_t bytes, bool may_overlap) = 0;

  // After the algorithm: true once the call's results are complete (a blocking call waits here).
  virtual bool finish() = 0;
  // Whether the host may touch the call's buffers and scratch (memcpy, stack buffers).
  virtual bool host_accessible() const = 0;
  // "host", or the device call's "direct" / "staged" (COLLX_DEBUG).
  virtual std::string_view mode() const = 0;
};

// Host memory: the transport's verbs and the host's copies, `final` so that calls through the
// host path need no indirection (StagedCall, memory.hpp, runs on HostVerbs too).
class HostVerbs : public DataPath {
 public:
  explicit HostVerbs(Transport& transport) : transport_(transport) {}
  void post(Transfer& t, bool is_send, void* buf, std::size_t bytes, int peer, int tag,
            bool) final {
    transport_.post_message(t, is_send, buf, bytes, peer, tag);
  }
  bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) final {
    return transport_.test_or_wait_all(ts, wait);
  }
  ScratchBuffer scratch(std::size_t bytes) override { return ScratchPool::global().acquire(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes, bool may_overlap) final {
    if (may_overlap) {
      std::memmove(dst, src, bytes);
    } else {
      kernels::copy(dst, src, bytes);
    }
  }
  bool finish() override { return true; }
  bool host_accessible() const override { return true; }
  std::string_view mode() const override { return "host"; }

 private:
  Transport& transport_;
};

}  // namespace collx::detail
