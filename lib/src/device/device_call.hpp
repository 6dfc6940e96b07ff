// DeviceCall: the data path of an Operation whose buffers (and scratch) are device memory. The
// algorithms stay as they are; the call decides how the bytes move: `direct` (the transport takes
// device memory) or `staged` (through pinned host memory). Each step waits only for the earlier
// device work on the same bytes (device_engine.hpp).
#pragma once

#include <cstddef>

#include "collx/types.hpp"
#include "data_path.hpp"

namespace collx::detail {

// One buffer argument of a call, `name` as the caller's error messages say it.
struct BufferArg {
  const void* pointer = nullptr;
  std::size_t bytes = 0;
  const char* name = "";
};

class DeviceCall : public DataPath {
 public:
  // dst = a op b over n elements, then / divisor when divisor > 0, on the device.
  virtual void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                      ReduceOp op, double divisor) = 0;
  bool host_accessible() const override { return false; }
  // Whether the transport takes the device buffers themselves (else staged message by message).
  virtual bool direct() const = 0;
  std::string_view mode() const override { return direct() ? "direct" : "staged"; }

  // Whole-call staging (StagedCall, memory.hpp): a pinned host buffer of `bytes`, owned by the
  // call; with `download`, the device bytes are copied into it after the device work writing
  // them.
  virtual std::byte* host_copy(const void* device, std::size_t bytes, bool download) = 0;
  // The host waits until every download so far has landed; downloads_done() asks.
  virtual void wait_downloads() = 0;
  virtual bool downloads_done() = 0;
  // host -> device, after the device work still on those bytes; finish() covers it.
  virtual void upload(void* device, const void* host, std::size_t bytes) = 0;
};

}  // namespace collx::detail
