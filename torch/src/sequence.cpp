// The order in which a process group posts its collectives (process_group.hpp, Sequence): the
// calls that wait (behind the ranks' agreement on a block, or behind one that waits) posted in
// launch order by whoever drives progress.
#include "process_group.hpp"

#include <c10/util/StringUtil.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "enrolled.hpp"

namespace collx_torch {
using namespace detail;

std::atomic<int> Sequence::waiting_{0};

namespace {
Enrolled<Sequence> enrolled_sequences;

// One key per (elements, dtype), ordered by elements; the MAX of {key, -key} is the group's
// largest and (negated) smallest key, the same on every rank.
constexpr int64_t kTypes = 64;
static_assert(static_cast<int64_t>(at::ScalarType::NumOptions) <= kTypes);
int64_t key_of(const Block& block) {
  return block.elements * kTypes + static_cast<int64_t>(block.dtype);
}

std::exception_ptr as_torch_error(const Sequence::Call& call, const char* what) {
  return std::make_exception_ptr(
      std::runtime_error(c10::str("collx backend: ", call.op, ": ", what)));
}
}  // namespace

void Sequence::enroll(const std::shared_ptr<Sequence>& sequence) {
  enrolled_sequences.add(sequence);
}

void Sequence::advance_all() {
  for (const auto& sequence : enrolled_sequences.alive()) {
    // Never waits for a sequence another thread is moving on (it may be this thread's launch).
    std::unique_lock lock(sequence->mutex_, std::try_to_lock);
    if (lock.owns_lock()) sequence->advance_locked(nullptr);
  }
}

bool sequences_waiting() {
  return Sequence::waiting();
}

void advance_sequences() {
  Sequence::advance_all();
}

void Sequence::queue_locked(const std::shared_ptr<Call>& call) {
  if (call->agree) {
    const int64_t key = key_of(call->block);
    call->range[0] = key;
    call->range[1] = -key;
  }
  queue_.push_back(call);
  waiting_.fetch_add(1, std::memory_order_acq_rel);
  advance_locked(nullptr);
}

void Sequence::pop_locked() {
  Call& head = *queue_.front();
  head.done = true;
  head.start = nullptr;  // what it held (the caller's tensors) is the work's to release
  waiting_.fetch_sub(1, std::memory_order_acq_rel);
  queue_.pop_front();
}

bool Sequence::advance_locked(const Call* call) {
  while (!queue_.empty()) {
    Call& head = *queue_.front();
    if (head.agree) {
      try {
        if (!head.agreement_posted) {
          std::lock_guard post(*post_mutex_);
          head.agreement = comm_->iallreduce(head.range, head.range, 2, collx::DataType::int64,
                                             collx::ReduceOp::max, host_);
          head.agreement_posted = true;
        }
        if (!head.agreement.test()) break;
      } catch (const collx::Error& e) {
        head.error = as_torch_error(head, e.what());
        pop_locked();
        continue;
      }
      const int64_t key = key_of(head.block);
      const int64_t largest = head.range[0];
      const int64_t smallest = -head.range[1];
      if (smallest != key || largest != key) {
        const int64_t other = largest != key ? largest : smallest;
        head.error = as_torch_error(
            head,
            c10::str("the ranks' ", head.block.what, "s differ in size or dtype (rank ",
                     comm_->rank(), " has ", head.block.elements, " elements of ", head.block.dtype,
                     ", another rank ", other / kTypes, " elements of ",
                     static_cast<at::ScalarType>(other % kTypes),
                     "): every rank of the group must pass tensors of the same size and dtype; "
                     "nothing was sent, on any rank")
                .c_str());
        pop_locked();
        continue;
      }
    }
    try {
      std::lock_guard post(*post_mutex_);
      head.requests = head.start();
    } catch (const collx::Error& e) {
      head.error = as_torch_error(head, e.what());
    } catch (...) {
      head.error = std::current_exception();
    }
    pop_locked();
  }
  return call != nullptr && call->done;
}

bool Sequence::advance(const std::shared_ptr<Call>& call, bool block) {
  if (!block) {
    // The completion thread, or a poll: never waits for a thread that holds the sequence.
    std::unique_lock lock(mutex_, std::try_to_lock);
    return lock.owns_lock() && (call->done || advance_locked(call.get()));
  }
  // Blocking. Where nothing else in the process waits to be posted (the usual blocking call),
  // the head's agreement is waited on in collx (Request::wait(): the engine's own waits). Else
  // the sequence is tested back to back for a while, then with yields and at last with sleeps
  // (up to a millisecond, so that a long wait for a peer leaves the core), and every other
  // receive and sequence moves on meanwhile: a peer may need them first.
  auto sleep = std::chrono::microseconds(0);
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard lock(mutex_);
      if (call->done || advance_locked(call.get())) return true;
      Call& head = *queue_.front();
      if (head.agree && head.agreement.valid() && !receives_awaiting() &&
          waiting_.load(std::memory_order_acquire) == static_cast<int>(queue_.size())) {
        try {
          head.agreement.wait();  // then test() finds it complete
        } catch (const collx::Error& e) {
          head.error = as_torch_error(head, e.what());
          pop_locked();
        }
        continue;
      }
    }
    advance_receives();
    advance_all();
    if (tries < 100) continue;
    if (tries < 2000) {
      std::this_thread::yield();
    } else {
      sleep = std::min(std::max(sleep * 2, std::chrono::microseconds(10)),
                       std::chrono::microseconds(1000));
      std::this_thread::sleep_for(sleep);
    }
  }
}

}  // namespace collx_torch
