// Released buffers kept by power-of-two size class (at least 256 bytes) for the next call, for
// the host scratch pool and the device and pinned staging pools; a few per class, none above
// 256 MiB. Thread-safe.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace collx::detail {

// Entry: what is kept of a buffer (its pointer, and whatever must be checked before reuse).
template <class Entry>
class SizeClassCache {
 public:
  // The capacity a request of `bytes` is allocated with.
  static std::size_t capacity_for(std::size_t bytes) {
    return std::bit_ceil(std::max(bytes, kSmallest));
  }
  // A kept entry of a buffer of `capacity` bytes (a capacity_for() value) that `reusable`
  // accepts (the latest kept first), taken out of the cache; nullopt where none is.
  template <class Reusable>
  std::optional<Entry> take(std::size_t capacity, Reusable reusable) {
    std::vector<Entry>* kept = entries(capacity);
    if (kept == nullptr) return std::nullopt;
    std::lock_guard lock(mutex_);
    const auto found = std::find_if(kept->rbegin(), kept->rend(), reusable);
    if (found == kept->rend()) return std::nullopt;
    Entry entry = std::move(*found);
    if (found != kept->rbegin()) *found = std::move(kept->back());
    kept->pop_back();
    return entry;
  }
  // Keeps `entry`, a buffer of `capacity` bytes, for reuse. False (and `entry` untouched) where
  // its class is full or the buffer too large to keep: the caller frees it.
  bool keep(std::size_t capacity, Entry&& entry) {
    std::vector<Entry>* kept = capacity <= kLargestKept ? entries(capacity) : nullptr;
    std::lock_guard lock(mutex_);
    if (kept == nullptr || kept->size() >= kMaxPerClass) return false;
    kept->push_back(std::move(entry));
    return true;
  }
  // Every kept entry, handed over to be freed; the cache is empty afterwards.
  std::vector<Entry> take_all() {
    std::vector<Entry> all;
    std::lock_guard lock(mutex_);
    for (auto& kept : classes_) {
      for (Entry& entry : kept)
        all.push_back(std::move(entry));
      kept.clear();
    }
    return all;
  }

 private:
  // The kept entries of buffers of `capacity` bytes, or null where no class holds that capacity.
  std::vector<Entry>* entries(std::size_t capacity) {
    const int size_class = std::countr_zero(capacity);
    return size_class < kClasses ? &classes_[size_class] : nullptr;
  }
  static constexpr std::size_t kSmallest = 256;
  static constexpr int kClasses = 48;
  static constexpr std::size_t kMaxPerClass = 8;
  static constexpr std::size_t kLargestKept = std::size_t{256} << 20;
  std::mutex mutex_;
  std::vector<Entry> classes_[kClasses];
};

}  // namespace collx::detail
