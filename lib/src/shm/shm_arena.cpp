#include "shm_arena.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>

#include "collx/build_config.hpp"
#include "collx/info.hpp"
#include "config.hpp"
#include "host_reduce.hpp"
#include "scratch.hpp"
#include "transport_mpi.hpp"

namespace collx::detail {

namespace {

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// Maps `bytes` of the shared-memory object `name`; nullptr on failure.
std::byte* map_arena(const char* name, std::size_t bytes, bool create) {
  const int fd =
      create ? shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600) : shm_open(name, O_RDWR, 0);
  if (fd < 0) return nullptr;
  // Reserve the pages now: a tmpfs too small fails here, not with SIGBUS later.
  const bool ok = !create || posix_fallocate(fd, 0, static_cast<off_t>(bytes)) == 0;
  // MAP_POPULATE: page faults at the first touch would make auto's first trials look slow.
  void* base = ok ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)
                  : MAP_FAILED;
  close(fd);
  return base == MAP_FAILED ? nullptr : static_cast<std::byte*>(base);
}

// The futex word is the counter's low half, which changes whenever the counter grows.
static_assert(std::endian::native == std::endian::little);
std::uint32_t* futex_word(const SharedArena::Counter& c) {
  return const_cast<std::uint32_t*>(reinterpret_cast<const std::uint32_t*>(&c));
}

// Not FUTEX_PRIVATE: the waiters and the waker are different processes mapping one page.
void futex_sleep(const SharedArena::Counter& c, std::uint32_t seen, const timespec* limit) {
  syscall(SYS_futex, futex_word(c), FUTEX_WAIT, seen, limit, nullptr, 0);
}
void futex_wake_all(const SharedArena::Counter& c) {
  syscall(SYS_futex, futex_word(c), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

void SharedArena::advance(Counter& c, std::uint64_t value) {
  c.store(value, std::memory_order_seq_cst);
  // Seq_cst on both sides: either a sleeper's re-check sees the new value, or this load sees
  // the sleeper.
  if (sleepers(c).load(std::memory_order_seq_cst) != 0) futex_wake_all(c);
}

bool SharedArena::wait_for(const Counter& c, std::uint64_t target,
                           std::chrono::microseconds limit) const {
  if (spin_until(c, target)) return true;
  const timespec sleep_limit{static_cast<time_t>(limit.count() / 1000000),
                             static_cast<long>(limit.count() % 1000000) * 1000};
  std::atomic<std::uint32_t>& asleep = sleepers(c);
  asleep.fetch_add(1, std::memory_order_seq_cst);
  const std::uint64_t seen = c.load(std::memory_order_seq_cst);
  if (seen < target) futex_sleep(c, static_cast<std::uint32_t>(seen), &sleep_limit);
  asleep.fetch_sub(1, std::memory_order_seq_cst);
  return c.load(std::memory_order_acquire) >= target;
}

void SharedArena::initialize_header(std::byte* base, int nranks, int slots) {
  std::memset(base, 0, header_bytes(nranks, slots));
  for (int i = 0; i < nranks + nranks * nranks; ++i) {
    std::byte* line = base + static_cast<std::size_t>(i) * kLine;
    new (line) Counter(0);
    new (line + sizeof(Counter)) std::atomic<std::uint32_t>(0);
  }
}

namespace {
// Copies `bytes` between `local` in this process and `remote` in process `pid`, reading them
// from there (process_vm_readv) or writing them there (process_vm_writev); 0, or the errno.
int copy_across_directly(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes,
                         bool write) {
  std::size_t done = 0;
  while (done < bytes) {
    iovec here{local + done, bytes - done};
    iovec there{reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t n = write ? process_vm_writev(pid, &here, 1, &there, 1, 0)
                            : process_vm_readv(pid, &here, 1, &there, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EFAULT;  // nothing more could be copied: part of the range is not mapped
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// The kernel copies between processes with `rep movsb` on x86, and on some CPUs (AMD Zen 3) that
// instruction runs several times slower where the destination sits 1-31 bytes past the source in
// their page offsets (4K aliasing; docs/PERFORMANCE.md, "Copies across processes"), while on
// others (AMD Zen 5) it runs as fast there as anywhere. A program's malloc'd buffers sit 16 bytes
// past a page where a page-aligned one meets them. Where the machine's copy is slow so, such a
// copy goes through a bounce buffer at the remote side's page offset, a part that stays in the
// second-level cache at a time, with the vector copy on the local side; where it is not, the
// bounce only adds a copy. Which shifts are slow is measured once per process
// (measured_bounced_shifts) unless COLLX_SHM_BOUNCE says.
constexpr std::size_t kBounceBytes = std::size_t{256} << 10;

bool four_k_aliased(std::uint64_t destination, std::uint64_t source, std::uint64_t bounced) {
  const std::uint64_t shift = (destination - source) & (kPage - 1);
  return shift != 0 && shift < bounced;
}

// The probe's copy: `bytes` from this process's `source` to `destination` through the kernel's
// copy between processes; its time in seconds, or a negative number where the kernel refused.
double time_kernel_copy(std::byte* destination, std::byte* source, std::size_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  if (copy_across_directly(getpid(), destination, reinterpret_cast<std::uint64_t>(source), bytes,
                           false) != 0)
    return -1;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
int copy_across(pid_t pid, std::byte* local, std::uint64_t remote, std::size_t bytes, bool write,
                std::uint64_t bounced) {
  const auto here = reinterpret_cast<std::uint64_t>(local);
  const bool aliased =
      write ? four_k_aliased(remote, here, bounced) : four_k_aliased(here, remote, bounced);
  if (!aliased || bytes < kernels::kVectorCopyMinBytes) {
    return copy_across_directly(pid, local, remote, bytes, write);
  }
  ScratchBuffer scratch = ScratchPool::global().acquire(kBounceBytes + kPage);
  // At the remote side's page offset: the kernel's copy then moves whole pages alike.
  std::byte* const bounce = scratch.data() + (remote & (kPage - 1));
  for (std::size_t done = 0; done < bytes; done += kBounceBytes) {
    const std::size_t length = std::min(kBounceBytes, bytes - done);
    if (write) kernels::copy(bounce, local + done, length);
    if (const int error = copy_across_directly(pid, bounce, remote + done, length, write))
      return error;
    if (!write) kernels::copy(local + done, bounce, length);
  }
  return 0;
}
}  // namespace

std::uint64_t bounced_shifts(const AliasingProbe& probe) {
  // Zen 3 took 4-6x as long at the slow shifts; a preempted sample only adds time, and each
  // figure is the fastest of several.
  constexpr double kSlow = 1.5;
  if (probe.aligned_seconds <= 0) return 0;
  if (probe.shift_48_seconds > kSlow * probe.aligned_seconds) return kAliasedShiftsWide;
  if (probe.shift_16_seconds > kSlow * probe.aligned_seconds) return kAliasedShiftsNarrow;
  return 0;
}

AliasingProbe probe_kernel_copy() {
  // 128 KiB, a few times each shift in turn, the fastest of each: about 0.1 ms where the copy
  // runs 10 GB/s, 0.5 ms where the shifted copies are slow.
  constexpr std::size_t kProbeBytes = std::size_t{128} << 10;
  constexpr int kRounds = 5;
  constexpr std::size_t kSourceOffset = 16;
  const std::size_t mapped = kProbeBytes + 2 * kPage;
  void* source_map =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  void* destination_map =
      mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  AliasingProbe probe;
  if (source_map != MAP_FAILED && destination_map != MAP_FAILED) {
    auto* source = static_cast<std::byte*>(source_map);
    auto* destination = static_cast<std::byte*>(destination_map);
    // Touched first: page faults are not the copy's.
    std::memset(source, 1, mapped);
    std::memset(destination, 0, mapped);
    constexpr std::size_t kShifts[] = {0, 16, 48};
    double fastest[3] = {1e30, 1e30, 1e30};
    bool refused = false;
    for (int round = 0; round <= kRounds && !refused; ++round) {
      for (std::size_t k = 0; k < 3; ++k) {
        const double t = time_kernel_copy(destination + kSourceOffset + kShifts[k],
                                          source + kSourceOffset, kProbeBytes);
        if (t < 0) refused = true;
        // Round 0 warms the caches and the kernel's path up.
        if (round > 0) fastest[k] = std::min(fastest[k], t);
      }
    }
    if (!refused) probe = {fastest[0], fastest[1], fastest[2]};
  }
  if (source_map != MAP_FAILED) munmap(source_map, mapped);
  if (destination_map != MAP_FAILED) munmap(destination_map, mapped);
  return probe;
}

std::uint64_t measured_bounced_shifts() {
  static const std::uint64_t bounced = bounced_shifts(probe_kernel_copy());
  return bounced;
}

namespace {
// COLLX_SHM_BOUNCE=1: the wide window; =0: none; unset: measured.
std::uint64_t configured_bounced_shifts() {
  const std::optional<bool> forced = config().shm_bounce;
  if (forced.has_value()) return *forced ? kAliasedShiftsWide : 0;
  return measured_bounced_shifts();
}
}  // namespace

int SharedArena::read_direct(int producer, std::byte* target, std::uint64_t address,
                             std::size_t bytes) {
  return copy_across(static_cast<pid_t>(process_line(producer).pid), target, address, bytes, false,
                     bounced_shifts_);
}

int SharedArena::write_direct(int peer, std::uint64_t address, const std::byte* source,
                              std::size_t bytes) {
  // process_vm_writev only reads the local side.
  return copy_across(static_cast<pid_t>(process_line(peer).pid), const_cast<std::byte*>(source),
                     address, bytes, true, bounced_shifts_);
}

void SharedArena::describe_process(int rank) {
  process_line(rank) = {static_cast<std::int64_t>(getpid()),
                        reinterpret_cast<std::uint64_t>(base_)};
}

bool SharedArena::can_read_directly_from(int peer) {
  // The peer's process line as the peer's own mapping holds it must equal this mapping's.
  const ProcessLine& theirs = process_line(peer);
  ProcessLine read{};
  const std::uint64_t at =
      theirs.arena_address +
      static_cast<std::uint64_t>(reinterpret_cast<std::byte*>(&process_line(peer)) - base_);
  return read_direct(peer, reinterpret_cast<std::byte*>(&read), at, sizeof read) == 0 &&
         read.pid == theirs.pid && read.arena_address == theirs.arena_address;
}

std::size_t SharedArena::header_bytes(int nranks, int slots) {
  const int lines = first_descriptor_line(nranks) + nranks * slots;
  return round_up(static_cast<std::size_t>(lines) * kLine, kPage);
}

std::size_t SharedArena::arena_bytes(int nranks, std::size_t slot_bytes, int slots) {
  return header_bytes(nranks, slots) +
         static_cast<std::size_t>(nranks) * static_cast<std::size_t>(slots) * slot_bytes;
}

SharedArena::SharedArena(std::byte* base, std::size_t bytes, bool mapped, int nranks,
                         std::size_t slot_bytes, int slots, RingStorePolicy stores)
    : base_(base),
      bytes_(bytes),
      mapped_(mapped),
      nranks_(nranks),
      slot_bytes_(slot_bytes),
      slots_(slots),
      data_(base + header_bytes(nranks, slots)),
      direct_forced_(config().shm_direct),
      turns_(std::make_unique<Turn[]>(static_cast<std::size_t>(nranks))) {
  for (int r = 0; r < nranks; ++r)
    turns_[static_cast<std::size_t>(r)].stores = RingStores(stores);
}

SharedArena::~SharedArena() {
  if (mapped_) {
    munmap(base_, bytes_);
  } else {
    ::operator delete (base_, std::align_val_t{kPage});
  }
}

std::shared_ptr<SharedArena> SharedArena::create_local(int nranks, std::size_t slot_bytes,
                                                       int slots, RingStorePolicy stores) {
  const std::size_t bytes = arena_bytes(nranks, slot_bytes, slots);
  auto* base = static_cast<std::byte*>(::operator new (bytes, std::align_val_t{kPage}));
  std::shared_ptr<SharedArena> arena(
      new SharedArena(base, bytes, false, nranks, slot_bytes, slots, stores));
  initialize_header(base, nranks, slots);
  for (int r = 0; r < nranks; ++r)
    arena->describe_process(r);
  arena->direct_reads_ = config().shm_direct != false && arena->can_read_directly_from(0);
  if (arena->direct_reads_) arena->bounced_shifts_ = configured_bounced_shifts();
  return arena;
}

std::shared_ptr<SharedArena> SharedArena::create(MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // The node-local group is the whole communicator on every rank or on none.
  if (size < 2 || !config().shared_memory || node_placement(comm).size != size) return nullptr;
  // Under SimGrid's SMPI every rank is an actor of one thread (a futex wait would stop the
  // simulation) and copies through shared memory take no simulated time: messages instead.
  if (COLLX_SMPI) return nullptr;

  const std::size_t slot_bytes =
      config().shm_slot_bytes ? round_up(config().shm_slot_bytes, kPage) : kDefaultSlotBytes;
  const int slots = kDefaultSlots;
  const std::size_t bytes = arena_bytes(size, slot_bytes, slots);
  // Rank 0 creates the object under a name unique on the node, the others map it, and rank 0
  // unlinks it once all have: nothing is left in /dev/shm even if the job dies later.
  char name[64] = {};
  std::byte* base = nullptr;
  if (rank == 0) {
    static std::atomic<unsigned> created{0};
    std::snprintf(name, sizeof name, "/collx-%ld-%u", static_cast<long>(getpid()),
                  created.fetch_add(1));
    base = map_arena(name, bytes, true);
    if (base != nullptr) {
      initialize_header(base, size, slots);
    } else {
      shm_unlink(name);
      name[0] = '\0';
    }
  }
  // PMPI_ here and below: libcollx_mpi's MPI_Bcast would come back into collx.
  check_mpi(PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm), "MPI_Bcast", rank);
  if (rank != 0 && name[0] != '\0') base = map_arena(name, bytes, false);
  const bool everywhere = on_every_rank(base != nullptr, comm, rank);
  if (rank == 0 && name[0] != '\0') shm_unlink(name);
  if (!everywhere) {
    if (base != nullptr) munmap(base, bytes);
    return nullptr;
  }
  std::shared_ptr<SharedArena> arena(
      new SharedArena(base, bytes, true, size, slot_bytes, slots, config().shm_stores));
  arena->oversubscribed_ = Transport::processors_oversubscribed(size);
  if (config().shm_direct != false) {
    // Direct reads need every rank able to read every other's memory (same user, ptrace
    // allowed); trying one peer each is the same kernel check for all.
    arena->describe_process(rank);
    check_mpi(PMPI_Barrier(comm), "MPI_Barrier", rank);
    arena->direct_reads_ =
        on_every_rank(arena->can_read_directly_from((rank + 1) % size), comm, rank);
    // Each rank's own copies: the ranks need not agree.
    if (arena->direct_reads_) arena->bounced_shifts_ = configured_bounced_shifts();
  }
  if (rank == 0 && config().debug >= DebugLevel::info) {
    char bounce[128] = "";
    if (arena->direct_reads_) {
      const char* source = config().shm_bounce.has_value() ? "COLLX_SHM_BOUNCE" : "measured";
      if (arena->bounced_shifts_ == 0) {
        std::snprintf(bounce, sizeof bounce, ", no bounce buffer (%s)", source);
      } else {
        std::snprintf(bounce, sizeof bounce,
                      ", through a bounce buffer where the destination sits 1-%d bytes past the "
                      "source in its page (%s)",
                      static_cast<int>(arena->bounced_shifts_ - 1), source);
      }
    }
    std::fprintf(stderr,
                 "collx INFO: shared arena for %d ranks, %d x %zu B ring slots per rank, "
                 "direct reads %s%s\n",
                 size, slots, slot_bytes,
                 arena->direct_reads_ ? "possible"
                 : config().shm_direct == false
                     ? "off (COLLX_SHM_DIRECT=0)"
                     : "not possible (process_vm_readv refused between the ranks)",
                 bounce);
  }
  return arena;
}

}  // namespace collx::detail

namespace collx {

// Public (collx/info.hpp), here because the arena asks it first.
NodePlacement node_placement(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  detail::check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
                    "MPI_Comm_split_type");
  NodePlacement placement;
  const int rank_rc = MPI_Comm_rank(node, &placement.rank);
  const int size_rc = MPI_Comm_size(node, &placement.size);
  MPI_Comm_free(&node);
  detail::check_mpi(rank_rc, "MPI_Comm_rank");
  detail::check_mpi(size_rc, "MPI_Comm_size");
  return placement;
}

}  // namespace collx
