// SharedArena: memory that every rank of a communicator on one node maps, for the shared-memory
// algorithms: a producer copies each slot in once and every reader copies it out at once.
//
// Every rank owns a ring of slots() slots and a `published` counter (slots filled, ever); each
// (reader, producer) pair has a `consumed` counter. Every slot published is consumed by every
// other rank, so after each operation consumed[r][j] == published[j], and an operation's k-th
// fill of producer j goes to ring slot (base + k) % slots(). Counters only grow, each on its own
// cache line. A slot's descriptor may hold an address: its readers then copy the bytes straight
// from the producer's memory (process_vm_readv: direct_reads()).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <sched.h>

#include "ring_stores.hpp"
#include "wait_condition.hpp"

namespace collx::detail {

// One poll's pause in a spin: the CPU's spin-wait hint where it has one.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

class SharedArena {
 public:
  using Counter = std::atomic<std::uint64_t>;
  static_assert(Counter::is_always_lock_free, "counters in shared memory must be lock-free");

  // Ring geometry: 4 slots of 512 KiB per rank (COLLX_SHM_SLOT_BYTES overrides the slot size).
  static constexpr std::size_t kDefaultSlotBytes = std::size_t{512} << 10;
  static constexpr int kDefaultSlots = 4;

  // Collective over `comm`: maps one arena shared by every rank of `comm`. Null on every rank
  // where they span nodes, `comm` has one rank, COLLX_SHM=0, or some rank cannot map it.
  static std::shared_ptr<SharedArena> create(MPI_Comm comm);
  // An arena in this process's memory, for ranks simulated in one process (tests).
  static std::shared_ptr<SharedArena> create_local(
      int nranks, std::size_t slot_bytes = kDefaultSlotBytes, int slots = kDefaultSlots,
      RingStorePolicy stores = RingStorePolicy::automatic);

  ~SharedArena();
  SharedArena(const SharedArena&) = delete;
  SharedArena& operator=(const SharedArena&) = delete;

  int size() const { return nranks_; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  int slots() const { return slots_; }

  // A counter moves forward only through advance(), which wakes a rank asleep in wait_for().
  void advance(Counter& c, std::uint64_t value);
  // Waits for `c` >= target for about `limit` at most; true once it is. Spins briefly, then
  // sleeps on a futex until advance() wakes it.
  bool wait_for(const Counter& c, std::uint64_t target, std::chrono::microseconds limit) const;
  // wait_for's spinning alone: true once `c` >= target, false after as many polls.
  bool spin_until(const Counter& c, std::uint64_t target) const {
    return spin([&] { return c.load(std::memory_order_acquire) >= target; });
  }
  // spin()'s time where every rank has its core, before a wait sleeps or a call run at once
  // falls back to its operation: a time, not a count of polls, since what a PAUSE costs differs
  // tenfold across CPUs (docs/AUTO.md, "The spin's budget").
  static constexpr std::chrono::nanoseconds kSpinBudget{100'000};
  // Polls `met()` as wait_for spins; true once it is.
  template <class Met>
  bool spin(Met met) const {
    // On an oversubscribed node the rank waited for may be the one waiting for this core: every
    // poll that finds nothing gives the core away at once, as Open MPI's yield_when_idle does.
    // Pauses between yields cost what the CPU's PAUSE costs, tenfold more on some CPUs than on
    // others (docs/AUTO.md, the oversubscribed arena).
    if (oversubscribed_) return yield_polls(met, kOversubscribedPolls);
    // Every rank has its core: spinning gives the fastest handoff, for kSpinBudget. The clock is
    // read every 128 polls, not before: a condition met within them costs no clock read.
    std::chrono::steady_clock::time_point deadline{};
    for (unsigned polls = 1;; ++polls) {
      if (met()) return true;
      if ((polls & 127) != 0) {
        spin_pause();
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (polls == 128) {
        deadline = now + kSpinBudget;
      } else if (now >= deadline) {
        return false;
      }
      sched_yield();
    }
  }
  // On an oversubscribed node, yields this core until `c` >= target (cheaper per handoff than a
  // futex wake-up), kYieldUntilPolls times at most; true once reached, false at once where every
  // rank has its core.
  bool yield_until(const Counter& c, std::uint64_t target) const {
    return oversubscribed_ &&
           yield_polls([&] { return c.load(std::memory_order_acquire) >= target; },
                       kYieldUntilPolls);
  }

  // Operations take turns on the arena in call order (the same on every rank): each takes a
  // ticket when started, waits until turn(rank) reaches it, and calls end_turn(rank) when done.
  std::uint64_t take_ticket(int rank) { return turns_[rank].tickets++; }
  const Counter& turn(int rank) const { return turns_[rank].value; }
  // Whether no operation of `rank` holds or awaits a turn on the arena.
  bool idle(int rank) const {
    return turns_[rank].value.load(std::memory_order_acquire) == turns_[rank].tickets;
  }
  void end_turn(int rank) {
    advance(turns_[rank].value, turns_[rank].value.load(std::memory_order_relaxed) + 1);
  }

  // How `rank` writes into its ring (kept in this process, per rank).
  RingStores& ring_stores(int rank) { return turns_[rank].stores; }

  // A ring slot's line beside its counters: where its bytes are when not in the slot (an
  // address in the producer's memory, 0: in the slot) and their length, written before the slot
  // is published; the slot's stamp, its fill number + 1 once published (stored before
  // `published` advances, so that a reader polls this one line rather than the counter's and
  // then the slot's); and up to kInlineBytes of a small slot's bytes, which its readers copy
  // from this line (bytes: kInlineTag | their length; the slot holds them too).
  static constexpr std::size_t kInlineBytes = 40;
  static constexpr std::uint64_t kInlineTag = std::uint64_t{1} << 63;
  struct SlotDescriptor {
    std::atomic<std::uint64_t> address;
    std::atomic<std::uint64_t> bytes;
    std::atomic<std::uint64_t> stamp;
    std::byte inline_bytes[kInlineBytes];
  };
  static_assert(sizeof(SlotDescriptor) <= 64, "a slot's descriptor is one cache line");
  SlotDescriptor& descriptor(int producer, std::uint64_t sequence) {
    return *reinterpret_cast<SlotDescriptor*>(
        line(first_descriptor_line(nranks_) + producer * slots_ +
             static_cast<int>(sequence % static_cast<std::uint64_t>(slots_))));
  }
  // Whether every rank may read the others' memory with process_vm_readv (tried at creation).
  bool direct_reads() const { return direct_reads_; }
  // COLLX_SHM_DIRECT when the arena was made (unset: the schedules decide).
  std::optional<bool> direct_reads_forced() const { return direct_forced_; }
  // Marks slot `sequence` of `producer`'s ring published: its stamp, then `published` (waking
  // a rank asleep on it).
  void mark_published(int producer, std::uint64_t sequence) {
    descriptor(producer, sequence).stamp.store(sequence + 1, std::memory_order_release);
    advance(published(producer), sequence + 1);
  }
  // Copies `bytes` at `address` in `producer`'s memory to `target`; 0, or the errno.
  int read_direct(int producer, std::byte* target, std::uint64_t address, std::size_t bytes);
  // Copies `bytes` from `source` to `address` in `peer`'s memory (process_vm_writev, which the
  // kernel allows wherever it allows process_vm_readv); 0, or the errno.
  int write_direct(int peer, std::uint64_t address, const std::byte* source, std::size_t bytes);
  // The direct copies whose destination sits 1 to this many bytes less one past the source in
  // their page offsets go through a bounce buffer (0: none; set at creation, from
  // COLLX_SHM_BOUNCE or measured_bounced_shifts()).
  std::uint64_t bounced_shifts() const { return bounced_shifts_; }

  Counter& published(int producer) { return *counter(producer); }
  Counter& consumed(int reader, int producer) {
    return *counter(nranks_ + reader * nranks_ + producer);
  }
  // The ring slot that `producer`'s fill number `sequence` (counted over all time) goes to.
  std::byte* slot(int producer, std::uint64_t sequence) {
    return data_ + (static_cast<std::size_t>(producer) * static_cast<std::size_t>(slots_) +
                    static_cast<std::size_t>(sequence % static_cast<std::uint64_t>(slots_))) *
                       slot_bytes_;
  }

 private:
  // Bytes of the whole arena for `nranks` ranks.
  static std::size_t arena_bytes(int nranks, std::size_t slot_bytes, int slots);
  SharedArena(std::byte* base, std::size_t bytes, bool mapped, int nranks, std::size_t slot_bytes,
              int slots, RingStorePolicy stores);
  // Each counter's cache line: the counter, then how many ranks sleep on it.
  static constexpr std::size_t kLine = 64;
  std::byte* line(int index) { return base_ + static_cast<std::size_t>(index) * kLine; }
  Counter* counter(int index) { return reinterpret_cast<Counter*>(line(index)); }
  // After the counters: one line per rank saying where it is, then the descriptors.
  struct ProcessLine {
    std::int64_t pid;
    std::uint64_t arena_address;
  };
  ProcessLine& process_line(int rank) {
    return *reinterpret_cast<ProcessLine*>(line(first_process_line(nranks_) + rank));
  }
  // The lines before the rings: p published and p*p consumed counters, p process lines, p *
  // slots descriptors; header_bytes() rounds them up to whole pages.
  static int first_process_line(int p) { return p + p * p; }
  static int first_descriptor_line(int p) { return first_process_line(p) + p; }
  static std::size_t header_bytes(int nranks, int slots);
  // Says where this rank is, for the others' direct reads.
  void describe_process(int rank);
  // Whether this rank can read `peer`'s memory: reads peer's view of a line of the arena.
  bool can_read_directly_from(int peer);
  static std::atomic<std::uint32_t>& sleepers(const Counter& c) {
    return *reinterpret_cast<std::atomic<std::uint32_t>*>(
        const_cast<std::byte*>(reinterpret_cast<const std::byte*>(&c)) + sizeof(Counter));
  }
  // Zeroes the lines before the rings and makes their counters.
  static void initialize_header(std::byte* base, int nranks, int slots);

  std::byte* base_;
  std::size_t bytes_;
  bool mapped_;  // munmap on destruction (else operator delete)
  int nranks_;
  std::size_t slot_bytes_;
  int slots_;
  std::byte* data_;
  // Polls `met()`, yielding the core after each that finds it unmet, `polls` times at most.
  template <class Met>
  static bool yield_polls(Met met, int polls) {
    for (int i = 0; i < polls; ++i) {
      if (met()) return true;
      sched_yield();
    }
    return met();
  }
  static constexpr int kOversubscribedPolls = 32;  // spin()'s, each followed by a yield
  static constexpr int kYieldUntilPolls = 2048;    // yield_until()'s
  bool oversubscribed_ = false;  // Transport::processors_oversubscribed (set at creation)
  bool direct_reads_ = false;    // set at creation
  std::optional<bool> direct_forced_;
  std::uint64_t bounced_shifts_ = 0;  // set at creation
  // Laid out like an arena counter (its sleepers beside it), so wait() and advance() serve it.
  struct alignas(64) Turn {
    Counter value{0};
    std::atomic<std::uint32_t> sleepers{0};
    std::uint64_t tickets = 0;
    RingStores stores;
  };
  std::unique_ptr<Turn[]> turns_;
};

// The kernel's copy between processes (process_vm_readv), timed in this process: the fastest of
// a few 128 KiB copies with the destination 0, 16 and 48 bytes past the source in their page
// offsets (seconds; all 0 where the kernel refused).
struct AliasingProbe {
  double aligned_seconds = 0;
  double shift_16_seconds = 0;
  double shift_48_seconds = 0;
};
AliasingProbe probe_kernel_copy();
// What a probe says to bounce (SharedArena::bounced_shifts): kAliasedShiftsWide where the copy
// 48 bytes past took 1.5 times the aligned one's time or more, kAliasedShiftsNarrow where only
// the one 16 bytes past did, else 0.
inline constexpr std::uint64_t kAliasedShiftsNarrow = 32;
inline constexpr std::uint64_t kAliasedShiftsWide = 64;
std::uint64_t bounced_shifts(const AliasingProbe& probe);
// bounced_shifts(probe_kernel_copy()), probed at the first call in this process.
std::uint64_t measured_bounced_shifts();

// "<what> rank <peer's rank in `ranks`, if given> (shared memory)", for a timeout message.
inline std::string describe_wait(const char* what, std::span<const int> ranks, int peer) {
  const int rank = ranks.empty() ? peer : ranks[static_cast<std::size_t>(peer)];
  return std::string(what) + " rank " + std::to_string(rank) + " (shared memory)";
}

// What a shared-memory algorithm waits for: `counter`, which another rank advances, has
// reached `target`. `peer` and `what` ("a slot from") name it in a timeout message.
class CounterReached final : public WaitCondition {
 public:
  // `peers_silent`: a wait inside the arena row's data movement, not a wait for a turn (during
  // which peers may already run a part of the same operation on messages).
  CounterReached(const SharedArena& arena, const SharedArena::Counter& counter,
                 std::uint64_t target, int peer, const char* what, bool peers_silent = true)
      : arena_(arena),
        counter_(counter),
        target_(target),
        peer_(peer),
        what_(what),
        peers_silent_(peers_silent) {}
  bool met() const override { return counter_.load(std::memory_order_acquire) >= target_; }
  bool wait_for(std::chrono::microseconds limit) const override {
    return arena_.wait_for(counter_, target_, limit);
  }
  std::string describe(std::span<const int> ranks) const override {
    return describe_wait(what_, ranks, peer_);
  }
  bool peers_silent() const override { return peers_silent_; }
  bool yield_until_met() const override { return arena_.yield_until(counter_, target_); }

 private:
  const SharedArena& arena_;
  const SharedArena::Counter& counter_;
  std::uint64_t target_;
  int peer_;
  const char* what_;
  bool peers_silent_;
};

// What a reader of a slot waits for: slot `sequence` of `producer`'s ring published. It polls
// the slot's descriptor line (its stamp), which holds a small slot's bytes as well: one line
// from the producer's core where the counter and then the slot would be two; asleep, it waits
// on the `published` counter, which moves after the stamp.
class SlotPublished final : public WaitCondition {
 public:
  SlotPublished(SharedArena& arena, int producer, std::uint64_t sequence, const char* what)
      : arena_(arena),
        stamp_(arena.descriptor(producer, sequence).stamp),
        producer_(producer),
        target_(sequence + 1),
        what_(what) {}
  bool met() const override { return stamp_.load(std::memory_order_acquire) >= target_; }
  bool wait_for(std::chrono::microseconds limit) const override {
    return arena_.spin_until(stamp_, target_) ||
           arena_.wait_for(arena_.published(producer_), target_, limit);
  }
  std::string describe(std::span<const int> ranks) const override {
    return describe_wait(what_, ranks, producer_);
  }
  bool peers_silent() const override { return true; }
  bool yield_until_met() const override {
    return arena_.yield_until(arena_.published(producer_), target_);
  }
  // Polls the stamp as wait_for does before it sleeps; true once met.
  bool spin() const { return arena_.spin_until(stamp_, target_); }

 private:
  SharedArena& arena_;
  const SharedArena::Counter& stamp_;
  int producer_;
  std::uint64_t target_;
  const char* what_;
};

// What a producer waits for before it reuses or releases a slot of its ring: every other rank
// has consumed `producer`'s ring up to `target`.
class ConsumedByAll final : public WaitCondition {
 public:
  ConsumedByAll(SharedArena& arena, int producer, std::uint64_t target, const char* what)
      : arena_(arena), producer_(producer), target_(target), what_(what) {}
  bool met() const override { return behind() < 0; }
  bool wait_for(std::chrono::microseconds limit) const override {
    const int reader = behind();
    return reader < 0 ||
           (arena_.wait_for(arena_.consumed(reader, producer_), target_, limit) && behind() < 0);
  }
  std::string describe(std::span<const int> ranks) const override {
    return describe_wait(what_, ranks, std::max(behind(), 0));
  }
  bool peers_silent() const override { return true; }
  bool yield_until_met() const override {
    for (int reader = behind(); reader >= 0; reader = behind()) {
      if (!arena_.yield_until(arena_.consumed(reader, producer_), target_)) return false;
    }
    return true;
  }

 private:
  // The first reader that has not consumed up to the target, or -1.
  int behind() const {
    for (int reader = 0; reader < arena_.size(); ++reader) {
      if (reader != producer_ &&
          arena_.consumed(reader, producer_).load(std::memory_order_acquire) < target_) {
        return reader;
      }
    }
    return -1;
  }
  SharedArena& arena_;
  int producer_;
  std::uint64_t target_;
  const char* what_;
};

}  // namespace collx::detail
