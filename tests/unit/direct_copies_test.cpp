// Copies between processes (SharedArena::read_direct, write_direct), here within this process:
// every byte arrives wherever the two buffers sit in their pages, the 4K-aliased offsets that go
// through a bounce buffer included (shm_arena.cpp), across several of its parts, with the bounce
// forced on and off (COLLX_SHM_BOUNCE); and what the probe of the kernel's copy decides.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "shm_arena.hpp"

namespace {

using collx::detail::AliasingProbe;
using collx::detail::Config;
using collx::detail::SharedArena;

// COLLX_SHM_BOUNCE set to `setting` while it lives (every arena made meanwhile takes it).
class BounceSetting {
 public:
  explicit BounceSetting(std::optional<bool> setting) : saved_(collx::detail::config()) {
    Config c = saved_;
    c.shm_bounce = setting;
    collx::detail::set_config(c);
  }
  ~BounceSetting() { collx::detail::set_config(saved_); }

 private:
  Config saved_;
};

struct PageAligned {
  explicit PageAligned(std::size_t bytes)
      : data(static_cast<std::byte*>(std::aligned_alloc(4096, bytes))) {}
  ~PageAligned() { std::free(data); }
  std::byte* data;
};

class DirectCopies : public testing::TestWithParam<bool> {};

TEST_P(DirectCopies, EveryByteArrivesWhereverTheBuffersSit) {
  const BounceSetting bounce(GetParam());
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  if (!arena->direct_reads()) GTEST_FAIL() << "process_vm_readv refused within this process";
  // The bounce is taken where forced (shm_arena.cpp), whatever this machine's kernel copy does.
  EXPECT_EQ(arena->bounced_shifts(), GetParam() ? collx::detail::kAliasedShiftsWide : 0u);
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

INSTANTIATE_TEST_SUITE_P(Bounce, DirectCopies, testing::Values(true, false),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Bounced") : std::string("Direct");
                         });

TEST(KernelCopyProbe, BouncesTheShiftsThatTookHalfAsLongAgainAsTheAlignedCopy) {
  using collx::detail::bounced_shifts;
  // Zen 3's kind of figures: 4-6x at 16 bytes, as fast at 48.
  EXPECT_EQ(bounced_shifts(AliasingProbe{20e-6, 90e-6, 21e-6}), 32u);
  EXPECT_EQ(bounced_shifts(AliasingProbe{20e-6, 90e-6, 80e-6}), 64u);
  // A CPU with 64-byte stores slow at 48 only would still take the wide window.
  EXPECT_EQ(bounced_shifts(AliasingProbe{20e-6, 21e-6, 31e-6}), 64u);
  // Zen 5's kind: the shifted copies within noise of the aligned one.
  EXPECT_EQ(bounced_shifts(AliasingProbe{10e-6, 11e-6, 10.5e-6}), 0u);
  EXPECT_EQ(bounced_shifts(AliasingProbe{10e-6, 14.9e-6, 14.9e-6}), 0u);
  // The kernel refused: nothing to bounce (direct copies are off anyway).
  EXPECT_EQ(bounced_shifts(AliasingProbe{}), 0u);
}

TEST(KernelCopyProbe, TimesEveryShiftAndTheArenaTakesItsAnswerWhenUnset) {
  const AliasingProbe probe = collx::detail::probe_kernel_copy();
  // This process may read itself (DirectCopies needs it too): every copy was timed.
  EXPECT_GT(probe.aligned_seconds, 0);
  EXPECT_GT(probe.shift_16_seconds, 0);
  EXPECT_GT(probe.shift_48_seconds, 0);
  // 128 KiB in under a second, even on a loaded machine.
  EXPECT_LT(probe.aligned_seconds, 1.0);
  const BounceSetting unset(std::nullopt);
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  EXPECT_EQ(arena->bounced_shifts(), collx::detail::measured_bounced_shifts());
  std::printf(
      "[ probe ] kernel copy of 128 KiB: %.1f us aligned, %.1f us 16 B past, %.1f us "
      "48 B past; this process bounces shifts below %llu\n",
      probe.aligned_seconds * 1e6, probe.shift_16_seconds * 1e6, probe.shift_48_seconds * 1e6,
      static_cast<unsigned long long>(collx::detail::measured_bounced_shifts()));
}

}  // namespace
