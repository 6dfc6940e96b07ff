#include "scratch.hpp"

#include <mpi.h>  // under SMPI: smpi_shared_malloc

#include <cstdlib>
#include <new>
#include <utility>

#include "collx/build_config.hpp"
#include "config.hpp"

namespace collx::detail {

namespace {
// Under SimGrid's SMPI, buffers from COLLX_SMPI_SHARED_BYTES up are one block every simulated
// rank maps (config.hpp); smpi_shared_free frees both kinds.
void free_scratch(void* p) {
#if COLLX_SMPI
  smpi_shared_free(p);
#else
  std::free(p);
#endif
}
}  // namespace

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

ScratchBuffer ScratchPool::acquire(std::size_t bytes) {
  if (bytes == 0) return {};
  const std::size_t capacity = SizeClassCache<std::byte*>::capacity_for(bytes);
  if (std::vector<std::byte*>* kept = cache_.entries(capacity)) {
    std::lock_guard lock(mutex_);
    if (!kept->empty()) {
      std::byte* p = kept->back();
      kept->pop_back();
      return ScratchBuffer(this, p, capacity);
    }
  }
  const std::size_t alignment = capacity >= (std::size_t{64} << 10) ? 4096 : 64;
#if COLLX_SMPI
  if (const std::size_t shared = config().smpi_shared_bytes; shared > 0 && capacity >= shared) {
    void* p = SMPI_SHARED_MALLOC(capacity);  // page-aligned
    if (p == nullptr) throw std::bad_alloc();
    return ScratchBuffer(this, static_cast<std::byte*>(p), capacity);
  }
#endif
  void* p = std::aligned_alloc(alignment, capacity);
  if (p == nullptr) throw std::bad_alloc();
  return ScratchBuffer(this, static_cast<std::byte*>(p), capacity);
}

void ScratchPool::give_back(std::byte* data, std::size_t capacity) {
  {
    std::lock_guard lock(mutex_);
    if (cache_.keep(capacity, std::move(data))) return;
  }
  free_scratch(data);
}

}  // namespace collx::detail
