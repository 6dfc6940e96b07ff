// Page-aligned, pre-touched benchmark buffers and small helpers shared by the collectives.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

namespace collx::bench {

class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { std::free(data_); }

  // Grows (never shrinks) to `bytes`; new memory is written once so the timed loop never
  // takes a first-touch page fault.
  void resize(std::size_t bytes) {
    size_ = bytes;
    if (bytes <= capacity_) return;
    std::free(data_);
    capacity_ = (bytes + 4095) / 4096 * 4096;
    data_ = static_cast<std::byte*>(std::aligned_alloc(4096, capacity_));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, capacity_);
  }
  std::byte* data() { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// MPI takes int counts; the mpi rows refuse sizes they cannot express rather than truncate.
inline int checked_int(std::size_t count) {
  if (count > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw std::runtime_error("count " + std::to_string(count) +
                             " exceeds MPI's int count for the mpi row");
  }
  return static_cast<int>(count);
}

// Elements (of `element_size` bytes) where `result` and `expected` differ bitwise.
inline std::size_t count_wrong(const std::byte* result, const std::byte* expected,
                               std::size_t bytes, std::size_t element_size) {
  if (std::memcmp(result, expected, bytes) == 0) return 0;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < bytes; i += element_size) {
    wrong += std::memcmp(result + i, expected + i, element_size) != 0;
  }
  return wrong;
}

}  // namespace collx::bench
