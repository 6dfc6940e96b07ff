// Gradient communication of a step: the flat gradient buffer cut into buckets, each reduced
// across the ranks (allreduce, or reduce_scatter for the sharded optimizer) in a fixed order,
// launched during the backward pass as soon as the bucket is complete (overlap) or all at the
// end (--no-overlap), and the time this costs the step.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "collx/collx.hpp"
#include "model.hpp"

namespace collx::train {

struct Bucket {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};

// Buckets over `count` elements: the first holds first_bytes (small, so communication starts
// early), the others bucket_bytes; every boundary is a multiple of `align` and the last bucket
// ends at `count` rounded up to a multiple of `align` (the sharded optimizer gives each rank
// one equal block of every bucket). Each bucket has at least `align` elements.
std::vector<Bucket> make_buckets(std::size_t count, std::size_t element_bytes,
                                 std::size_t first_bytes, std::size_t bucket_bytes,
                                 std::size_t align);

// Sums seconds spent inside a scope.
class CommClock {
 public:
  class Scope {
   public:
    explicit Scope(CommClock& clock) : clock_(clock), start_(std::chrono::steady_clock::now()) {}
    ~Scope() {
      clock_.seconds_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CommClock& clock_;
    std::chrono::steady_clock::time_point start_;
  };
  double seconds() const { return seconds_; }
  void reset() { seconds_ = 0; }

 private:
  double seconds_ = 0;
};

// Device memory: orders each bucket's collective with the computation's stream. The collectives
// run in the stream-ordered form on a stream of their own, so the backward pass goes on while
// they wait for their inputs or their messages (the CPU path has none).
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  // Before bucket b's collective is launched: it reads what the computation enqueued so far.
  // (Its result needs no ordering: a nonblocking collective on device memory completes once its
  // device work has, so what is enqueued after wait() sees it.)
  virtual void before_launch(std::size_t bucket) = 0;
};

class GradientSync final : public GradientHooks {
 public:
  enum class Mode { allreduce, reduce_scatter };

  // Every call into collx is timed on `clock`: that time is the communication the step could
  // not hide behind compute.
  // order (may be null: host memory) orders each bucket with the computation's stream; it
  // must outlive this object.
  GradientSync(Communicator& comm, DataType type, std::vector<Bucket> buckets, Mode mode,
               bool overlap, Options options, CommClock& clock, StreamOrder* order = nullptr);

  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Starts a step. grads: the whole (padded) buffer; shard (reduce_scatter only) receives this
  // rank's block of every bucket, bucket b's at shard + buckets[b].begin / size.
  void begin(void* grads, void* shard);
  // Launches the buckets that [0, end) covers (with overlap; without, launch_all() does).
  void gradients_ready(std::size_t end) override;
  // Progresses what is in flight; the time counts as communication.
  void poll() override;
  // The same, not timed: while the device computes, progressing is overlap, not exposed time.
  void drive();
  // Every bucket launched and known to be reduced (as far as poll() has seen).
  bool all_complete() const { return completed_ == buckets_.size(); }
  // After the backward pass: launches the buckets not launched yet.
  void launch_all();
  // Blocks until bucket b is reduced (launch_all() first); on a device, the computation
  // enqueued afterwards runs after the result is complete.
  void wait(std::size_t bucket);
  // launch_all(), then waits for every bucket.
  void finish();

 private:
  void launch_through(std::size_t end);

  Communicator& comm_;
  DataType type_;
  std::size_t element_bytes_;
  std::vector<Bucket> buckets_;
  Mode mode_;
  bool overlap_;
  Options options_;
  CommClock& clock_;
  StreamOrder* order_;
  std::byte* grads_ = nullptr;
  std::byte* shard_ = nullptr;
  std::size_t launched_ = 0;       // buckets launched this step, in order
  std::size_t completed_ = 0;      // the buckets before this one are known to be complete
  std::vector<Request> requests_;  // one per bucket; empty once complete
};

}  // namespace collx::train
