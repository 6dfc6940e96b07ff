#include "scratch.hpp"

#include <mpi.h>  // under SMPI: smpi_shared_malloc

#include <sys/mman.h>

#include <cstdlib>
#include <new>
#include <utility>

#include "collx/build_config.hpp"
#include "config.hpp"

namespace collx::detail {

ScratchPool& ScratchPool::global() {
  // Never destroyed: operations may release buffers during static destruction.
  static ScratchPool* pool = new ScratchPool;
  return *pool;
}

ScratchBuffer ScratchPool::acquire(std::size_t bytes) {
  if (bytes == 0) return {};
  const std::size_t capacity = SizeClassCache<std::byte*>::capacity_for(bytes);
  if (const auto kept = cache_.take(capacity, [](std::byte*) { return true; }))
    return ScratchBuffer(this, *kept, capacity);
  void* p = nullptr;
#if COLLX_SMPI
  // Under SimGrid's SMPI, buffers from COLLX_SMPI_SHARED_BYTES up are one block every simulated
  // rank maps (config.hpp), page-aligned.
  if (const std::size_t shared = config().smpi_shared_bytes; shared > 0 && capacity >= shared)
    p = SMPI_SHARED_MALLOC(capacity);
  if (p == nullptr) p = std::aligned_alloc(capacity >= kMappedBytes ? 4096 : 64, capacity);
#else
  if (capacity >= kMappedBytes) {
    // Mapped, not malloc'd: see kMappedBytes.
    p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
  } else {
    p = std::aligned_alloc(64, capacity);
  }
#endif
  if (p == nullptr) throw std::bad_alloc();
  return ScratchBuffer(this, static_cast<std::byte*>(p), capacity);
}

void ScratchPool::give_back(std::byte* data, std::size_t capacity) {
  if (cache_.keep(capacity, std::move(data))) return;
#if COLLX_SMPI
  smpi_shared_free(data);  // either kind (acquire)
#else
  if (capacity >= kMappedBytes) {
    munmap(data, capacity);
  } else {
    std::free(data);
  }
#endif
}

}  // namespace collx::detail
