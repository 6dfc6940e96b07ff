// RingStores: whether a producer writes its ring slots with plain or streaming (non-temporal)
// stores, chosen from the copy times it measures. Plain stores are usually fastest (the reader
// finds the slot in cache), but on some machines taking a line back from the reader's cache at
// times becomes many times slower for seconds, while streaming stores stay fast. So the producer
// keeps the best of each kind's last few times, prefers plain unless it takes twice as long,
// and now and then tries the other kind, less often the longer the choice holds.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "config.hpp"

namespace collx::detail {

class RingStores {
 public:
  enum class Kind { plain, streaming };

  // Slots smaller than this are too short to time; they take the larger slots' choice.
  static constexpr std::size_t kTimedBytes = std::size_t{64} << 10;
  // Plain stores are kept unless they take this many times as long as streaming ones. Twice: on
  // a VM whose two CPUs sit far apart, plain copies into lines the reader held take a few times
  // streaming's and the reader's copies slow as much, so the call is faster streamed; near, plain
  // copies are the faster (docs/AUTO.md, "Two states of the VM"). A new buffer's slow first
  // copies switch it for a few slots at most: the next trial of plain brings it back.
  static constexpr double kPlainPreference = 2;
  // The other kind is tried at the second timed slot, then this many slots after a change of
  // kind, twice as many each time the choice holds, up to the maximum.
  static constexpr std::uint64_t kFirstTrial = 1;
  static constexpr std::uint64_t kTrialInterval = 8;
  static constexpr std::uint64_t kLongestTrialInterval = 1024;

  explicit RingStores(RingStorePolicy policy = RingStorePolicy::automatic) : policy_(policy) {}

  // The kind for the next slot of `bytes`.
  Kind next(std::size_t bytes) const {
    if (policy_ == RingStorePolicy::plain) return Kind::plain;
    if (policy_ == RingStorePolicy::streaming) return Kind::streaming;
    if (bytes >= kTimedBytes && timed_ >= next_trial_) return other(current_);
    return current_;
  }

  // Whether a slot of `bytes` is to be timed (and given to record()).
  bool timed(std::size_t bytes) const {
    return policy_ == RingStorePolicy::automatic && bytes >= kTimedBytes;
  }

  // What writing `bytes` with `kind` took; true when that changed the choice.
  bool record(Kind kind, std::size_t bytes, std::chrono::nanoseconds took) {
    if (!timed(bytes)) return false;
    const bool trial = kind != current_;
    times(kind).add(static_cast<double>(took.count()) / static_cast<double>(bytes));
    ++timed_;
    const Kind before = current_;
    current_ = faster();
    if (current_ != before) {
      trial_interval_ = kTrialInterval;
    } else if (trial) {
      trial_interval_ = std::min(trial_interval_ * 2, kLongestTrialInterval);
    }
    if (trial || current_ != before) next_trial_ = timed_ + trial_interval_;
    return current_ != before;
  }

  // The best recent time of `kind` per KiB (infinity before its first timed slot).
  double best_ns_per_kib(Kind kind) const { return times(kind).best() * 1024; }

  // A timed-size slot that went as a direct read while streaming was chosen: it counts toward
  // the next trial.
  void count_untimed() {
    if (policy_ == RingStorePolicy::automatic) ++timed_;
  }

  Kind current() const { return current_; }

 private:
  // The last few times per byte of one kind; their minimum is its estimate.
  struct Times {
    static constexpr std::size_t kKept = 4;
    std::array<double, kKept> ns_per_byte{};
    std::size_t count = 0;
    void add(double t) { ns_per_byte[count++ % kKept] = t; }
    double best() const {
      if (count == 0) return std::numeric_limits<double>::infinity();
      return *std::min_element(ns_per_byte.begin(),
                               ns_per_byte.begin() + static_cast<long>(std::min(count, kKept)));
    }
  };

  static Kind other(Kind k) { return k == Kind::plain ? Kind::streaming : Kind::plain; }
  Times& times(Kind k) { return k == Kind::plain ? plain_ : streaming_; }
  const Times& times(Kind k) const { return k == Kind::plain ? plain_ : streaming_; }
  Kind faster() const {
    return plain_.best() > kPlainPreference * streaming_.best() ? Kind::streaming : Kind::plain;
  }

  RingStorePolicy policy_;
  Kind current_ = Kind::plain;
  Times plain_;
  Times streaming_;
  std::uint64_t timed_ = 0;
  std::uint64_t trial_interval_ = kTrialInterval;
  std::uint64_t next_trial_ = kFirstTrial;
};

}  // namespace collx::detail
