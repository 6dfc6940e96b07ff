// WaitCondition: something other than a posted message that an algorithm may wait for (a
// counter another rank advances in a shared arena, for example).
//
// The executor waits on it without knowing what it is: it asks whether it is met, lets it
// block for a while (the condition knows how to sleep until it may be met), and names it in a
// timeout message. The layer that owns the state provides the condition (shm/ for the shared
// arena's counters).
#pragma once

#include <chrono>
#include <span>
#include <string>

namespace collx::detail {

class WaitCondition {
 public:
  virtual bool met() const = 0;
  // Blocks up to `limit` or until the condition is met; true when it is.
  virtual bool wait_for(std::chrono::microseconds limit) const = 0;
  // "a slot from rank 3 (shared memory)", for the timeout message.
  // `ranks`: the communicator ranks of the peer indexes the condition names (the open Group's
  // members, Operation::Group), empty where they are the communicator's own.
  virtual std::string describe(std::span<const int> ranks) const = 0;
  // Whether no peer sends this operation a message while it waits here (a wait inside the
  // arena's data movement), so a message with its tags means the peers run another algorithm
  // (Operation::refuse_foreign_messages).
  virtual bool peers_silent() const { return false; }
  // Before an exclusive wait sleeps: gives this core away a while (sched_yield) where the rank
  // that meets the condition may need it; true once the condition is met.
  virtual bool yield_until_met() const { return false; }

 protected:
  ~WaitCondition() = default;
};

}  // namespace collx::detail
