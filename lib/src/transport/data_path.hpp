// DataPath: how the bytes of one collective call move. An Operation posts every message, copy
// and scratch buffer through it without asking what memory that is: host memory (HostPath)
// goes straight to the transport and memcpy, device memory through device_call.hpp.
#pragma once

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>

#include "scratch.hpp"
#include "transport.hpp"

namespace collx::detail {

class DataPath {
 public:
  virtual ~DataPath() = default;

  // The transport verbs for this memory. A receive with exact_length == false (point-to-point)
  // may get a shorter message; the bytes after it keep their contents.
  virtual void send(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag) = 0;
  virtual void recv(Transfer& t, void* buf, std::size_t bytes, int peer, int tag,
                    bool exact_length) = 0;
  // As Transport::test_all / wait_all; host transfers on the call's transport may be among them.
  virtual bool test_all(std::span<Transfer* const> ts) = 0;
  virtual void wait_all(std::span<Transfer* const> ts) = 0;

  // Memory of this kind for the algorithm's temporaries.
  virtual ScratchBuffer scratch(std::size_t bytes) = 0;
  // dst <- src, non-overlapping (copy) or possibly overlapping (move).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void move(void* dst, const void* src, std::size_t bytes) = 0;

  // After the algorithm: true once the call's results are complete (a blocking call waits here).
  virtual bool finish() = 0;
  // Whether the host may touch the call's buffers and scratch (memcpy, stack buffers).
  virtual bool host_accessible() const = 0;
  // "host", or the device call's "direct" / "staged" (COLLX_DEBUG).
  virtual std::string_view mode() const = 0;
};

// Host memory: the transport's verbs and the host's copies (HostPath is final, so that calls
// through it need no indirection; StagedCall, memory.hpp, runs on HostVerbs too).
class HostVerbs : public DataPath {
 public:
  explicit HostVerbs(Transport& transport) : transport_(transport) {}
  void send(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag) override {
    transport_.isend(t, buf, bytes, peer, tag);
  }
  void recv(Transfer& t, void* buf, std::size_t bytes, int peer, int tag, bool) override {
    transport_.irecv(t, buf, bytes, peer, tag);
  }
  bool test_all(std::span<Transfer* const> ts) override { return transport_.test_all(ts); }
  void wait_all(std::span<Transfer* const> ts) override { transport_.wait_all(ts); }
  ScratchBuffer scratch(std::size_t bytes) override { return ScratchPool::global().acquire(bytes); }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void move(void* dst, const void* src, std::size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  bool finish() override { return true; }
  bool host_accessible() const override { return true; }
  std::string_view mode() const override { return "host"; }

 private:
  Transport& transport_;
};
class HostPath final : public HostVerbs {
 public:
  using HostVerbs::HostVerbs;
};

}  // namespace collx::detail
