// collx-kernel-bench: the host reduction kernels' bandwidth against a plain c = a + b loop
// compiled with -O3 -march=native, in the same run, on arrays far larger than the caches; with
// --copies, glibc's memcpy against collx's copy at aligned and unaligned destinations; with
// --across, the kernel's copy between processes against collx's at shifted destinations.
#include <sys/uio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "collx/types.hpp"
#include "host_reduce.hpp"
#include "shm_arena.hpp"

namespace collx::kernel_bench {
void plain_add(float* __restrict c, const float* __restrict a, const float* __restrict b,
               std::size_t n);
}

namespace {

using Clock = std::chrono::steady_clock;

struct Array {
  explicit Array(std::size_t bytes)
      : data(static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096))),
        size(bytes) {
    std::memset(data, 0, size);  // first touch outside the timed loops
  }
  ~Array() { std::free(data); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  std::byte* data;
  std::size_t size;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// --copies: glibc's memcpy against collx's copy (host_reduce.hpp) at sizes from 1 KiB to 16 MiB,
// the source on a page boundary and the destination on it or `offset` bytes past it, each case
// repeated until it has moved 256 MiB, `reps` times interleaved; the median counts. Sizes that
// fit in the caches are timed there, as the arena's copies of a call's pieces are. Each case's
// destination is cleared before it and compared with the source after it (untimed): false, with
// the case on stderr, where a copy differs.
bool copy_table(int reps, std::size_t offset) {
  constexpr std::size_t kMaxBytes = std::size_t{16} << 20;
  Array src(kMaxBytes), dst(kMaxBytes + 4096);
  for (std::size_t i = 0; i < kMaxBytes; ++i)
    src.data[i] = static_cast<std::byte>((i * 131 + i / 251) & 0xff);
  std::printf("# collx-kernel-bench --copies: GB/s copied (median of %d); kernels: %s\n", reps,
              std::string(collx::kernels::to_string(collx::kernels::active_isa())).c_str());
  std::printf("# %10s %14s %14s %18s %18s\n", "bytes", "memcpy", "collx copy",
              ("memcpy dst+" + std::to_string(offset)).c_str(),
              ("collx copy dst+" + std::to_string(offset)).c_str());
  for (std::size_t bytes = 1024; bytes <= kMaxBytes; bytes *= 4) {
    const std::size_t calls = std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes);
    std::vector<std::vector<double>> seconds(4);
    for (int r = 0; r < reps; ++r) {
      for (int c = 0; c < 4; ++c) {
        std::byte* d = dst.data + (c >= 2 ? offset : 0);
        const bool ours = c % 2 == 1;
        std::memset(dst.data, 0, bytes + offset);
        const auto t0 = Clock::now();
        for (std::size_t i = 0; i < calls; ++i) {
          if (ours) {
            collx::kernels::copy(d, src.data, bytes);
          } else {
            std::memcpy(d, src.data, bytes);
          }
          asm volatile("" : : "r"(d) : "memory");  // every copy happens
        }
        seconds[static_cast<std::size_t>(c)].push_back(
            std::chrono::duration<double>(Clock::now() - t0).count());
        if (std::memcmp(d, src.data, bytes) != 0) {
          std::fprintf(stderr, "collx-kernel-bench: %s of %zu bytes to dst+%zu differs\n",
                       ours ? "collx copy" : "memcpy", bytes, c >= 2 ? offset : std::size_t{0});
          return false;
        }
      }
    }
    std::printf("  %10zu", bytes);
    for (int c = 0; c < 4; ++c) {
      const double gbps =
          static_cast<double>(bytes * calls) / median(seconds[static_cast<std::size_t>(c)]) / 1e9;
      std::printf(" %*.1f", c < 2 ? 14 : 18, gbps);
    }
    std::printf("\n");
  }
  return true;
}

// --across: copies between processes, here from this process's own memory: one
// process_vm_readv (the kernel's copy, what an MPI library's single-copy transport makes) against
// collx's (SharedArena::read_direct, which goes through a bounce buffer where the two addresses
// are 4K-aliased and this machine's probe, or COLLX_SHM_BOUNCE, says so), the source
// `source_offset` bytes past a page and the destination `shift` bytes further in its page, 0-96
// bytes, at 256 KiB and 4 MiB; `reps` interleaved repetitions, the median counts. False, with the
// case on stderr, where a copy differs.
bool across_table(int reps, std::size_t source_offset) {
  constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
  Array src(kMaxBytes + 8192), dst(kMaxBytes + 8192);
  std::byte* const from = src.data + source_offset;
  for (std::size_t i = 0; i < kMaxBytes; ++i)
    from[i] = static_cast<std::byte>((i * 131 + i / 251) & 0xff);
  const std::shared_ptr<collx::detail::SharedArena> arena =
      collx::detail::SharedArena::create_local(2);
  std::printf(
      "# collx-kernel-bench --across: GB/s copied (median of %d), source at page + %zu, "
      "destination `shift` bytes further in its page\n",
      reps, source_offset);
  const collx::detail::AliasingProbe probe = collx::detail::probe_kernel_copy();
  char window[64] = "directly at every shift";
  if (arena->bounced_shifts() != 0)
    std::snprintf(window, sizeof window, "through a bounce buffer at shifts 1-%d",
                  static_cast<int>(arena->bounced_shifts() - 1));
  std::printf(
      "# collx's probe: 128 KiB copied in %.1f us aligned, %.1f us 16 B past, %.1f us 48 B past; "
      "collx copies %s (COLLX_SHM_BOUNCE=0|1 forces)\n",
      probe.aligned_seconds * 1e6, probe.shift_16_seconds * 1e6, probe.shift_48_seconds * 1e6,
      window);
  std::printf("# %10s %6s %14s %14s\n", "bytes", "shift", "kernel copy", "collx copy");
  for (const std::size_t bytes : {std::size_t{256} << 10, kMaxBytes}) {
    const std::size_t calls = std::max<std::size_t>(1, (std::size_t{64} << 20) / bytes);
    for (std::size_t shift = 0; shift <= 96; shift += 8) {
      std::byte* const to = dst.data + source_offset + shift;
      std::vector<std::vector<double>> seconds(2);
      for (int r = 0; r < reps; ++r) {
        for (int c = 0; c < 2; ++c) {
          std::memset(dst.data, 0, bytes + source_offset + shift);
          const auto t0 = Clock::now();
          for (std::size_t i = 0; i < calls; ++i) {
            if (c == 1) {
              if (arena->read_direct(1, to, reinterpret_cast<std::uint64_t>(from), bytes) != 0)
                return false;
            } else {
              iovec here{to, bytes}, there{from, bytes};
              if (process_vm_readv(getpid(), &here, 1, &there, 1, 0) !=
                  static_cast<ssize_t>(bytes)) {
                std::fprintf(stderr, "collx-kernel-bench: process_vm_readv failed\n");
                return false;
              }
            }
          }
          seconds[static_cast<std::size_t>(c)].push_back(
              std::chrono::duration<double>(Clock::now() - t0).count());
          if (std::memcmp(to, from, bytes) != 0) {
            std::fprintf(stderr, "collx-kernel-bench: %s of %zu bytes at shift %zu differs\n",
                         c == 1 ? "collx copy" : "kernel copy", bytes, shift);
            return false;
          }
        }
      }
      std::printf("  %10zu %6zu", bytes, shift);
      for (const std::vector<double>& s : seconds)
        std::printf(" %14.1f", static_cast<double>(bytes * calls) / median(s) / 1e9);
      std::printf("\n");
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"collx-kernel-bench: host reduction kernels vs a plain c = a + b loop"};
  std::size_t mib = 64;
  int reps = 21;
  app.add_option("--mib", mib, "size of each array in MiB")->capture_default_str();
  app.add_option("-n,--reps", reps, "repetitions; the median counts")->capture_default_str();
  bool copies = false;
  std::size_t offset = 16;
  app.add_flag("--copies", copies,
               "instead: glibc's memcpy against collx's copy, 1 KiB-16 MiB, the destination on a "
               "page boundary and --offset bytes past it");
  app.add_option("--offset", offset,
                 "--copies: the unaligned destination's offset in bytes; --across: the source's")
      ->capture_default_str()
      ->check(CLI::Range(0, 4095));
  bool across = false;
  app.add_flag("--across", across,
               "instead: copies between processes (process_vm_readv) against collx's, 256 KiB and "
               "4 MiB, the destination 0-96 bytes further than the source (--offset past a page) "
               "in its page");
  CLI11_PARSE(app, argc, argv);
  if (copies) return copy_table(reps, offset) ? 0 : 1;
  if (across) return across_table(reps, offset) ? 0 : 1;

  const std::size_t bytes = mib << 20;
  Array a(bytes), b(bytes), c(bytes);
  // Values that stay finite and normal in every type.
  for (std::size_t i = 0; i < bytes / 4; ++i) {
    reinterpret_cast<float*>(a.data)[i] = 1.0f + static_cast<float>(i % 7);
    reinterpret_cast<float*>(b.data)[i] = 2.0f + static_cast<float>(i % 5);
  }

  struct Case {
    std::string name;
    std::function<void()> run;
  };
  const auto& k = collx::kernels::active_kernels();
  auto kernel = [&](collx::DataType t) {
    return k.reduce[static_cast<int>(t)][static_cast<int>(collx::ReduceOp::sum)];
  };
  // float16/bfloat16 inputs: valid finite values of the type.
  Array ha(bytes), hb(bytes), ba(bytes), bb(bytes);
  for (std::size_t i = 0; i < bytes / 2; ++i) {
    reinterpret_cast<collx::float16*>(ha.data)[i] =
        collx::float16(1.0f + static_cast<float>(i % 7));
    reinterpret_cast<collx::float16*>(hb.data)[i] =
        collx::float16(2.0f + static_cast<float>(i % 5));
    reinterpret_cast<collx::bfloat16*>(ba.data)[i] =
        collx::bfloat16(1.0f + static_cast<float>(i % 7));
    reinterpret_cast<collx::bfloat16*>(bb.data)[i] =
        collx::bfloat16(2.0f + static_cast<float>(i % 5));
  }
  std::vector<Case> cases = {
      {"plain c=a+b float32 (-O3 -march=native)",
       [&] {
         collx::kernel_bench::plain_add(reinterpret_cast<float*>(c.data),
                                        reinterpret_cast<const float*>(a.data),
                                        reinterpret_cast<const float*>(b.data), bytes / 4);
       }},
      {"collx sum float32",
       [&] { kernel(collx::DataType::float32)(c.data, a.data, b.data, bytes / 4, 0.0); }},
      {"collx sum float16",
       [&] { kernel(collx::DataType::float16)(c.data, ha.data, hb.data, bytes / 2, 0.0); }},
      {"collx sum bfloat16",
       [&] { kernel(collx::DataType::bfloat16)(c.data, ba.data, bb.data, bytes / 2, 0.0); }},
      {"collx avg float32 (fused divide)",
       [&] {
         k.reduce[static_cast<int>(collx::DataType::float32)]
                 [static_cast<int>(collx::ReduceOp::avg)](c.data, a.data, b.data, bytes / 4, 2.0);
       }},
      {"memcpy (2 arrays moved)", [&] { std::memcpy(c.data, a.data, bytes); }},
  };
  // Interleave the cases repetition by repetition so drift on a shared machine hits all alike.
  std::vector<std::vector<double>> seconds(cases.size());
  for (auto& cs : cases)
    cs.run();  // warm-up
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto t0 = Clock::now();
      cases[i].run();
      seconds[i].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  std::printf("# collx-kernel-bench: 3 arrays of %zu MiB (2 read, 1 written); kernels: %s\n", mib,
              std::string(collx::kernels::to_string(collx::kernels::active_isa())).c_str());
  std::printf("# %-42s %10s %12s %10s\n", "case", "time(ms)", "GB/s", "vs plain");
  double plain = 0;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const double t = median(seconds[i]);
    const double moved = static_cast<double>(bytes) * (i + 1 == cases.size() ? 2 : 3);
    const double gbps = moved / t / 1e9;
    if (i == 0) plain = gbps;
    std::printf("  %-42s %10.3f %12.2f %9.1f%%\n", cases[i].name.c_str(), t * 1e3, gbps,
                100 * gbps / plain);
  }
  return 0;
}
