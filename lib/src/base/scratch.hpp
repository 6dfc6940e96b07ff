// Reusable aligned scratch buffers: allocating fresh on every call would cost page faults.
#pragma once

#include <cstddef>
#include <memory>

#include "size_class_cache.hpp"

namespace collx::detail {

// Where a scratch buffer goes back to: the host pool below, or a device pool (device_engine).
class ScratchSource {
 public:
  virtual void give_back(std::byte* data, std::size_t capacity) = 0;

 protected:
  ~ScratchSource() = default;
};

// A buffer from a ScratchSource, given back when it goes.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(ScratchSource* pool, std::byte* data, std::size_t capacity)
      : data_(data, GiveBack{pool, capacity}) {}

  std::byte* data() const { return data_.get(); }

 private:
  struct GiveBack {
    ScratchSource* pool;
    std::size_t capacity;
    void operator()(std::byte* data) const {
      if (pool != nullptr) pool->give_back(data, capacity);
    }
  };
  std::unique_ptr<std::byte, GiveBack> data_;
};

class ScratchPool final : public ScratchSource {
 public:
  static ScratchPool& global();
  ~ScratchPool() = delete;  // global() lives as long as the process

  // At least `bytes` bytes, 64-byte aligned (page-aligned from 64 KiB on).
  ScratchBuffer acquire(std::size_t bytes);
  void give_back(std::byte* data, std::size_t capacity) override;

 private:
  SizeClassCache<std::byte*> cache_;
};

}  // namespace collx::detail
