// Reusable aligned scratch buffers: allocating fresh on every call would cost page faults.
#pragma once

#include <cstddef>
#include <mutex>

#include "size_class_cache.hpp"

namespace collx::detail {

// Where a scratch buffer goes back to: the host pool below, or a device pool (device_engine).
class ScratchSource {
 public:
  virtual void give_back(std::byte* data, std::size_t capacity) = 0;

 protected:
  ~ScratchSource() = default;
};

class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(ScratchSource* pool, std::byte* data, std::size_t capacity)
      : pool_(pool), data_(data), capacity_(capacity) {}
  ScratchBuffer(ScratchBuffer&& other) noexcept;
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept;
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer();

  std::byte* data() const { return data_; }

 private:
  void release();
  ScratchSource* pool_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t capacity_ = 0;
};

class ScratchPool final : public ScratchSource {
 public:
  static ScratchPool& global();
  ~ScratchPool() = delete;  // global() lives as long as the process

  // At least `bytes` bytes, 64-byte aligned (page-aligned from 64 KiB on).
  ScratchBuffer acquire(std::size_t bytes);
  void give_back(std::byte* data, std::size_t capacity) override;

 private:
  std::mutex mutex_;
  SizeClassCache<std::byte*> cache_;
};

}  // namespace collx::detail
