// The pending point-to-point receives of a process group (process_group.hpp, Receives): each
// recv's header received first, then exactly the message it announces, in launch order per
// (source, tag).
#include "process_group.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/StringUtil.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "dtypes.hpp"
#include "enrolled.hpp"

namespace collx_torch {
using namespace detail;

std::atomic<int> Receives::awaiting_{0};

namespace {
Enrolled<Receives> enrolled_receives;
}  // namespace

void Receives::enroll(const std::shared_ptr<Receives>& receives) {
  enrolled_receives.add(receives);
}

void Receives::advance_all() {
  for (const auto& receives : enrolled_receives.alive()) {
    std::lock_guard lock(receives->mutex_);
    for (auto& [key, queue] : receives->queues_)
      receives->advance_locked(queue, nullptr);
  }
}

bool receives_awaiting() {
  return Receives::awaiting();
}

void advance_receives() {
  Receives::advance_all();
}

std::shared_ptr<Receives::Pending> Receives::add(const at::Tensor& buffer, int source, int tag) {
  auto p = std::make_shared<Pending>();
  p->source = source;
  p->tag = tag;
  p->buffer = buffer;
  std::lock_guard lock(mutex_);
  auto& queue = queues_[{source, tag}];
  queue.push_back(p);
  awaiting_.fetch_add(1, std::memory_order_acq_rel);
  advance_locked(queue, p.get());
  return p;
}

bool Receives::advance(const std::shared_ptr<Pending>& p, bool block) {
  // Blocking: tests back to back for a while (a header usually follows soon), then sleeps
  // between tests, up to a millisecond, so that a long wait for a sender leaves the core.
  auto sleep = std::chrono::microseconds(0);
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard lock(mutex_);
      if (p->data_posted) return true;
      auto it = queues_.find({p->source, p->tag});
      if (advance_locked(it->second, p.get())) return true;
    }
    if (!block) return false;
    // A peer may need this rank's collectives posted before it sends the header.
    if (Sequence::waiting()) Sequence::advance_all();
    if (tries < 1000) {
      std::this_thread::yield();
    } else {
      sleep = std::min(std::max(sleep * 2, std::chrono::microseconds(10)),
                       std::chrono::microseconds(1000));
      std::this_thread::sleep_for(sleep);
    }
  }
}

bool Receives::advance_locked(std::deque<std::shared_ptr<Pending>>& queue, const Pending* p) {
  while (!queue.empty()) {
    Pending& head = *queue.front();
    if (!head.header_posted) {
      std::lock_guard post(*post_mutex_);
      head.header_request =
          comm_->irecv(head.header, 2, collx::DataType::int64, head.source, head.tag);
      head.header_posted = true;
    }
    bool arrived = false;
    try {
      arrived = head.header_request.test();
    } catch (const collx::Error& e) {
      // Out of step with the sender (its data where a header was expected): no data receive.
      head.error =
          std::make_exception_ptr(std::runtime_error(c10::str("collx backend: recv: ", e.what())));
      head.data_posted = true;
      awaiting_.fetch_sub(1, std::memory_order_acq_rel);
      queue.pop_front();
      continue;
    }
    if (!arrived) break;
    const int64_t elements = head.header[0];
    const auto dtype = static_cast<at::ScalarType>(head.header[1]);
    {
      std::lock_guard post(*post_mutex_);
      if (elements == head.buffer.numel() && dtype == head.buffer.scalar_type()) {
        head.data_request = comm_->irecv(head.buffer.data_ptr(), count_of(head.buffer, elements),
                                         data_type_of(head.buffer, "recv"), head.source, head.tag);
      } else {
        // Received whole, where no one reads it, then refused (no receive for a header that
        // cannot be one of ours).
        const bool known = dtype >= at::ScalarType::Byte && dtype < at::ScalarType::NumOptions &&
                           elements >= 0 && elements <= (int64_t{1} << 40);
        if (known && elements > 0) {
          const int64_t bytes = elements * static_cast<int64_t>(c10::elementSize(dtype));
          head.scratch = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
          head.data_request = comm_->irecv(head.scratch.data_ptr(), bytes, collx::DataType::uint8,
                                           head.source, head.tag);
        }
        head.error = std::make_exception_ptr(std::runtime_error(
            c10::str("collx backend: recv: the message from rank ", head.source, " (tag ", head.tag,
                     ") holds ", elements, " elements of ", dtype, ", this recv's tensor ",
                     head.buffer.numel(), " elements of ", head.buffer.scalar_type(),
                     ": send and recv must use tensors of the same size and dtype (the message was "
                     "received and dropped)")));
      }
    }
    head.data_posted = true;
    awaiting_.fetch_sub(1, std::memory_order_acq_rel);
    queue.pop_front();
  }
  return p != nullptr && p->data_posted;
}

}  // namespace collx_torch
