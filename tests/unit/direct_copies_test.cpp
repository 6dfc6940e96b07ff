// Copies between processes (SharedArena::read_direct, write_direct), here within this process:
// every byte arrives wherever the two buffers sit in their pages, the 4K-aliased offsets that go
// through a bounce buffer included (shm_arena.cpp), across several of its parts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "shm_arena.hpp"

namespace {

using collx::detail::SharedArena;

struct PageAligned {
  explicit PageAligned(std::size_t bytes)
      : data(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))) {}
  ~PageAligned() { std::free(data); }
  std::byte* data;
};

TEST(DirectCopies, EveryByteArrivesWhereverTheBuffersSit) {
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  // Sizes below the vector copy's smallest, one page, and more than two bounce parts with a
  // ragged end; offsets aligned alike, 16 and 1 bytes ahead (aliased), 16 behind, far apart.
  const std::size_t sizes[] = {100, 4096, (std::size_t{600} << 10) + 5};
  const std::size_t source_offsets[] = {0, 0, 16, 4000, 48};
  const std::size_t target_offsets[] = {0, 16, 17, 3000, 32};
  for (const std::size_t bytes : sizes) {
    // A page before each: the bytes around the target are checked too.
    PageAligned source(bytes + 12288), target(bytes + 12288);
    for (std::size_t k = 0; k < std::size(source_offsets); ++k) {
      std::byte* const from = source.data + 4096 + source_offsets[k];
      std::byte* const to = target.data + 4096 + target_offsets[k];
      for (std::size_t i = 0; i < bytes; ++i)
        from[i] = static_cast<std::byte>((i * 131 + k) % 251);
      for (const bool write : {false, true}) {
        std::fill(target.data, target.data + bytes + 12288, std::byte{0xEE});
        const int error =
            write ? arena->write_direct(1, reinterpret_cast<std::uint64_t>(to), from, bytes)
                  : arena->read_direct(1, to, reinterpret_cast<std::uint64_t>(from), bytes);
        ASSERT_EQ(error, 0) << bytes << " B, case " << k << (write ? " (write)" : " (read)");
        std::size_t wrong = 0;
        for (std::size_t i = 0; i < bytes; ++i)
          wrong += to[i] != from[i] ? 1 : 0;
        EXPECT_EQ(wrong, 0u) << bytes << " B, case " << k << (write ? " (write)" : " (read)");
        // Nothing written outside the target.
        EXPECT_EQ(to[-1], std::byte{0xEE}) << bytes << " B, case " << k;
        EXPECT_EQ(to[bytes], std::byte{0xEE}) << bytes << " B, case " << k;
      }
    }
  }
}

}  // namespace
