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

  // At least `bytes` bytes, 64-byte aligned (page-aligned from kMappedBytes on).
  ScratchBuffer acquire(std::size_t bytes);
  // From this size on a buffer is its own mapping (mmap), not malloc's: a library's large
  // buffers on the program's heap move the program's later heap blocks by amounts that differ
  // from rank to rank, and where two ranks' buffers then sit 1-31 bytes apart in their pages the
  // kernel's copies between them (the MPI library's too) run several times slower on some CPUs
  // (docs/PERFORMANCE.md, "Copies across processes"); glibc's malloc serves such sizes from the
  // heap once a program has freed a mapped block (its mmap threshold moves up).
  static constexpr std::size_t kMappedBytes = std::size_t{64} << 10;
  void give_back(std::byte* data, std::size_t capacity) override;

 private:
  SizeClassCache<std::byte*> cache_;
};

}  // namespace collx::detail
