#include "scratch.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <new>
#include <utility>

namespace collx::detail {

ScratchBuffer::ScratchBuffer(ScratchBuffer&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)) {}

ScratchBuffer& ScratchBuffer::operator=(ScratchBuffer&& other) noexcept {
  if (this != &other) {
    release();
    pool_ = std::exchange(other.pool_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

ScratchBuffer::~ScratchBuffer() {
  release();
}

void ScratchBuffer::release() {
  if (data_ != nullptr && pool_ != nullptr) pool_->give_back(data_, capacity_);
  data_ = nullptr;
  capacity_ = 0;
}

ScratchPool& ScratchPool::global() {
  // Never destroyed: operations may release buffers during static destruction.
  static ScratchPool* pool = new ScratchPool;
  return *pool;
}

ScratchPool::~ScratchPool() {
  for (auto& list : free_) {
    for (std::byte* p : list)
      std::free(p);
  }
}

namespace {
int size_class(std::size_t capacity) {
  return std::countr_zero(capacity);
}
}  // namespace

ScratchBuffer ScratchPool::acquire(std::size_t bytes) {
  if (bytes == 0) return {};
  const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(bytes, 256));
  const int cls = size_class(capacity);
  if (cls < kClasses) {
    std::lock_guard lock(mutex_);
    auto& list = free_[cls];
    if (!list.empty()) {
      std::byte* p = list.back();
      list.pop_back();
      return ScratchBuffer(this, p, capacity);
    }
  }
  const std::size_t alignment = capacity >= (std::size_t{64} << 10) ? 4096 : 64;
  void* p = std::aligned_alloc(alignment, capacity);
  if (p == nullptr) throw std::bad_alloc();
  return ScratchBuffer(this, static_cast<std::byte*>(p), capacity);
}

void ScratchPool::give_back(std::byte* data, std::size_t capacity) {
  const int cls = size_class(capacity);
  if (capacity <= kLargestCached && cls < kClasses) {
    std::lock_guard lock(mutex_);
    auto& list = free_[cls];
    if (list.size() < kMaxCachedPerClass) {
      list.push_back(data);
      return;
    }
  }
  std::free(data);
}

}  // namespace collx::detail
