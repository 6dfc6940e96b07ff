// The live objects of one kind (Receives, Sequence) that a waiting thread moves on: every
// process group's, shared by receives.cpp and sequence.cpp.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace collx_torch::detail {

// The live objects of one kind that a waiting thread moves on (Receives, Sequence): held
// weakly, so a destroyed group's leave the list at the next enrolment.
template <class T>
class Enrolled {
 public:
  void add(const std::shared_ptr<T>& object) {
    std::lock_guard lock(mutex_);
    std::erase_if(objects_, [](const auto& o) { return o.expired(); });
    objects_.push_back(object);
  }
  // The ones alive now, taken out of the lock (moving them on takes their own locks).
  std::vector<std::shared_ptr<T>> alive() {
    std::vector<std::shared_ptr<T>> all;
    std::lock_guard lock(mutex_);
    for (const auto& o : objects_) {
      if (auto object = o.lock()) all.push_back(std::move(object));
    }
    return all;
  }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<T>> objects_;
};

}  // namespace collx_torch::detail
