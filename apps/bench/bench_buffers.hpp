// Page-aligned, pre-touched benchmark buffers (with a device copy for -m device) and small
// helpers shared by the collectives.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>

#include <mpi.h>  // under SimGrid's SMPI: SMPI_SHARED_MALLOC

#include "bench_device.hpp"
#include "collx/build_config.hpp"

namespace collx::bench {

// Host memory, where inputs are made and results checked, and with -m device a device copy of
// it, which the collectives are given (arg()).
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    release(data_);
    device_free(device_);
  }

  // -m device: every buffer gets a device copy (set once, before the first resize).
  static void use_device_memory(bool on) { device_memory() = on; }
  static bool on_device() { return device_memory(); }
  // --smpi-shared (SimGrid SMPI builds): buffers of at least `bytes` (0: none) are one block of
  // memory that every simulated rank maps, so large sizes at many ranks fit in the machine; what
  // they hold is then meaningless (all ranks write it), so such sizes are not checked.
  static void share_from(std::size_t bytes) { shared_from() = bytes; }
  static bool shared_at(std::size_t bytes) { return shared_from() > 0 && bytes >= shared_from(); }
  // --offset: host buffers start `bytes` past a page boundary (set once, before the first
  // resize); device copies stay where cudaMalloc puts them.
  static void offset_by(std::size_t bytes) { offset() = bytes; }

  // Grows (never shrinks) to `bytes`; new memory is written once so the timed loop never
  // takes a first-touch page fault. Back to one slot (see make_slots).
  void resize(std::size_t bytes) {
    size_ = bytes;
    slot_ = 0;
    slots_ = 1;
    stride_ = 0;
    if (offset() + bytes <= capacity_) return;
    allocate(offset() + bytes);
  }
  // --cold: `slots` copies of the buffer side by side in one allocation, each stride_for() bytes
  // (the size rounded up to a cache line, or to a page from 4 KiB up), every one holding what
  // slot 0 holds now; select() picks the one data() and arg() return. Host memory only.
  static std::size_t stride_for(std::size_t bytes) {
    const std::size_t unit = bytes >= 4096 ? 4096 : 64;
    return std::max<std::size_t>(unit, (bytes + unit - 1) / unit * unit);
  }
  void make_slots(std::size_t slots) {
    if (device_ != nullptr) throw std::runtime_error("--cold takes host buffers only");
    const std::size_t stride = stride_for(size_);
    std::byte* old = data_;
    data_ = nullptr;
    capacity_ = 0;
    allocate(offset() + stride * slots, /*zero=*/false);
    for (std::size_t i = 0; i < slots; ++i) {
      if (size_ > 0) std::memcpy(data_ + offset() + i * stride, old + offset(), size_);
    }
    release(old);
    slots_ = slots;
    stride_ = stride;
    slot_ = 0;
  }
  void select(std::size_t slot) { slot_ = slot % slots_; }
  std::size_t slots() const { return slots_; }
  // What the slots of this buffer take (its allocation).
  std::size_t capacity() const { return capacity_; }

  std::byte* data() { return data_ + offset() + slot_ * stride_; }
  std::size_t size() const { return size_; }
  // What the collectives work on: the device copy with -m device, else the host memory.
  std::byte* arg() { return device_ != nullptr ? device_ : data(); }
  // Host -> device and back (no-ops without a device copy).
  void to_device() {
    if (device_ != nullptr && size_ > 0) copy_to_device(device_, data_ + offset(), size_);
  }
  void to_host() {
    if (device_ != nullptr && size_ > 0) copy_to_host(data_ + offset(), device_, size_);
  }

 private:
  void allocate(std::size_t bytes, bool zero = true) {
    release(data_);
    data_ = nullptr;
    capacity_ = (bytes + 4095) / 4096 * 4096;
#if COLLX_SMPI
    if (shared_at(capacity_)) {
      data_ = static_cast<std::byte*>(SMPI_SHARED_MALLOC(capacity_));  // page-aligned
    } else
#endif
      data_ = static_cast<std::byte*>(std::aligned_alloc(4096, capacity_));
    if (data_ == nullptr) throw std::bad_alloc();
    if (zero) std::memset(data_, 0, capacity_);
    if (on_device()) {
      device_free(device_);
      device_ = static_cast<std::byte*>(device_allocate(capacity_));
    }
  }
  static bool& device_memory() {
    static bool on = false;
    return on;
  }
  static std::size_t& offset() {
    static std::size_t bytes = 0;
    return bytes;
  }
  static std::size_t& shared_from() {
    static std::size_t bytes = 0;
    return bytes;
  }
  static void release(std::byte* p) {
#if COLLX_SMPI
    smpi_shared_free(p);  // either kind
#else
    std::free(p);
#endif
  }
  std::byte* data_ = nullptr;
  std::byte* device_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::size_t slots_ = 1;
  std::size_t slot_ = 0;
  std::size_t stride_ = 0;
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
