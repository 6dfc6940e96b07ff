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
                           Mode mode, bool overlap, Options options, CommClock& clock,
                           StreamOrder* order)
    : comm_(comm),
      type_(type),
      element_bytes_(size_of(type)),
      buckets_(std::move(buckets)),
      mode_(mode),
      overlap_(overlap),
      options_(options),
      clock_(clock),
      order_(order),
      requests_(buckets_.size()) {}

void GradientSync::begin(void* grads, void* shard) {
  grads_ = static_cast<std::byte*>(grads);
  shard_ = static_cast<std::byte*>(shard);
  launched_ = 0;
  completed_ = 0;
}

void GradientSync::launch_through(std::size_t end) {
  const auto nranks = static_cast<std::size_t>(comm_.size());
  while (launched_ < buckets_.size() && buckets_[launched_].end <= end) {
    const Bucket& b = buckets_[launched_];
    std::byte* data = grads_ + b.begin * element_bytes_;
    if (order_) order_->before_launch(launched_);
    if (mode_ == Mode::allreduce) {
      requests_[launched_] = comm_.iallreduce(data, data, b.size(), type_, ReduceOp::sum, options_);
    } else {
      std::byte* block = shard_ + b.begin / nranks * element_bytes_;
      requests_[launched_] =
          comm_.ireduce_scatter(data, block, b.size() / nranks, type_, ReduceOp::sum, options_);
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
  if (completed_ == launched_) return;
  CommClock::Scope timed(clock_);
  drive();
}

void GradientSync::drive() {
  // One test drives every collx operation in flight; note the ones that are done, in order.
  while (completed_ < launched_ &&
         (!requests_[completed_].valid() || requests_[completed_].test())) {
    ++completed_;
  }
}

void GradientSync::launch_all() {
  if (launched_ == buckets_.size()) return;
  CommClock::Scope timed(clock_);
  // The padding past the model (sharded mode) is complete too: it is never written.
  launch_through(buckets_.back().end);
}

void GradientSync::wait(std::size_t bucket) {
  if (!requests_[bucket].valid()) return;
  CommClock::Scope timed(clock_);
  requests_[bucket].wait();
}

void GradientSync::finish() {
  launch_all();
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    wait(b);
}

}  // namespace collx::train
