// WaitCondition: something other than a posted message that an algorithm may wait for (a
// counter another rank advances in a shared arena). The executor only asks whether it is met,
// lets it block a while and names it in a timeout message; shm/ provides the arena's.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <thread>

namespace collx::detail {

class WaitCondition {
 public:
  virtual bool met() const = 0;
  // Blocks up to `limit` or until the condition is met; true when it is. Here: polls, giving the
  // core away in between (a condition met within microseconds, such as a copy or a request).
  virtual bool wait_for(std::chrono::microseconds limit) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!met()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::yield();
    }
    return true;
  }
  // "a slot from rank 3 (shared memory)", for the timeout message; `ranks`: the communicator
  // ranks of the peer indexes it names (an open Group's), empty for the communicator's own.
  virtual std::string describe(std::span<const int> ranks) const = 0;
  // Whether no peer sends this operation a message while it waits here (inside the arena's
  // data movement): one with its tags means a mismatch (Operation::refuse_foreign_messages).
  virtual bool peers_silent() const { return false; }
  // Before an exclusive wait sleeps: yields this core a while where the rank that meets the
  // condition may need it; true once the condition is met.
  virtual bool yield_until_met() const { return false; }

 protected:
  ~WaitCondition() = default;
};

}  // namespace collx::detail
