// collx::Request: a nonblocking collective or point-to-point operation in flight.
#pragma once

#include <memory>

namespace collx {

namespace detail {
class Operation;
}

class Request {
 public:
  Request() = default;
  explicit Request(std::shared_ptr<detail::Operation> operation);
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  // Waits for an operation that was never waited on, so its buffers are never released while
  // messages still target them; an error found there is lost, so call wait() yourself.
  ~Request();

  // Blocks until the operation is complete and releases it (valid() becomes false); throws
  // collx::Error if it failed. Drives the progress of every collx operation in flight, on any
  // communicator. Waiting on an empty request returns at once.
  void wait();
  // Drives progress once; true when the operation is complete, which also releases it (and
  // throws its error, like wait()).
  bool test();
  // True until the operation has been waited on (or tested complete), or moved from.
  bool valid() const noexcept { return operation_ != nullptr; }

 private:
  std::shared_ptr<detail::Operation> operation_;
};

}  // namespace collx
