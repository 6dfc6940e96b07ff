#include "grad_sync.hpp"

#include <algorithm>

namespace collx::train {

std::vector<Bucket> make_buckets(std::size_t count, std::size_t element_bytes,
                                 std::size_t first_bytes, std::size_t bucket_bytes,
                                 std::size_t align) {
  const std::size_t padded = (count + align - 1) / align * align;
  auto elements = [&](std::size_t bytes) {
    const std::size_t n = bytes / element_bytes / align * align;
    return std::max(n, align);
  };
  std::vector<Bucket> buckets;
  std::size_t begin = 0;
  std::size_t capacity = elements(std::min(first_bytes, bucket_bytes));
  while (begin < padded) {
    const std::size_t end = std::min(padded, begin + capacity);
    buckets.push_back({begin, end});
    begin = end;
    capacity = elements(bucket_bytes);
  }
  return buckets;
}

GradientSync::GradientSync(Communicator& comm, DataType type, std::vector<Bucket> buckets,
                           Mode mode, bool overlap, Options options, CommClock& clock)
    : comm_(comm),
      type_(type),
      element_bytes_(size_of(type)),
      buckets_(std::move(buckets)),
      mode_(mode),
      overlap_(overlap),
      options_(options),
      clock_(clock) {}

void GradientSync::begin(void* grads, void* shard) {
  grads_ = static_cast<std::byte*>(grads);
  shard_ = static_cast<std::byte*>(shard);
  launched_ = 0;
  in_flight_.clear();
}

void GradientSync::launch_through(std::size_t end) {
  const auto nranks = static_cast<std::size_t>(comm_.size());
  while (launched_ < buckets_.size() && buckets_[launched_].end <= end) {
    const Bucket& b = buckets_[launched_];
    std::byte* data = grads_ + b.begin * element_bytes_;
    if (mode_ == Mode::allreduce) {
      in_flight_.push_back(comm_.iallreduce(data, data, b.size(), type_, ReduceOp::sum, options_));
    } else {
      std::byte* block = shard_ + b.begin / nranks * element_bytes_;
      in_flight_.push_back(
          comm_.ireduce_scatter(data, block, b.size() / nranks, type_, ReduceOp::sum, options_));
    }
    ++launched_;
  }
}

void GradientSync::gradients_ready(std::size_t end) {
  if (!overlap_) return;
  if (launched_ < buckets_.size() && buckets_[launched_].end <= end) {
    CommClock::Scope timed(clock_);
    launch_through(end);
  }
}

void GradientSync::poll() {
  if (in_flight_.empty()) return;
  CommClock::Scope timed(clock_);
  // One test drives every collx operation in flight; release the ones that are done, in order.
  while (!in_flight_.empty() && in_flight_.front().test())
    in_flight_.pop_front();
}

void GradientSync::finish() {
  CommClock::Scope timed(clock_);
  // The padding past the model (sharded mode) is complete too: it is never written.
  launch_through(buckets_.empty() ? 0 : buckets_.back().end);
  for (Request& r : in_flight_)
    r.wait();
  in_flight_.clear();
}

}  // namespace collx::train
