// The shared-memory algorithms: broadcast and allgather through the communicator's
// SharedArena (shm_arena.hpp), for ranks on one node with host buffers.
//
// A producer cuts its bytes into slots, copies each into the next entry of its ring and
// publishes it (a release store of its count); every other rank waits for the count, copies the
// slot out and says so in its own counter, which frees the ring slot once every reader has.
// All copies are memcpy, the producer's and the readers' run at the same time, and no byte goes
// through the MPI library.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "collx/error.hpp"
#include "config.hpp"
#include "host_reduce.hpp"
#include "shm_arena.hpp"
#include "slices.hpp"

namespace collx::detail {

namespace {

// Slots are whole ring slots. Handing a slot to another core costs far more here than a
// counter store (the counter's line moves between the cores, the reader may have to wake up):
// a broadcast of 1 MiB in 32 KiB slots was several times slower than in 256-512 KiB slots
// (docs/results/arena-slot-size-broadcast.csv). So the fewer handoffs
// the better, as long as a few slots are in flight for the largest messages.
std::size_t slot_payload_bytes(const SharedArena& arena) {
  return arena.slot_bytes();
}

// Outputs of more than this many bytes are written with streaming stores (no read of each
// destination line first): they do not stay in the caches anyway, and the copy out of the ring
// is then bound by memory writes (docs/results/arena-streaming-stores.csv).
constexpr std::size_t kStreamingOutputBytes = std::size_t{8} << 20;

bool streams_output(std::size_t output_bytes) {
  return output_bytes > kStreamingOutputBytes;
}

// A copy with streaming or plain stores.
kernels::CopyFn copy_with(bool streaming) {
  return streaming ? kernels::active_kernels().copy_streaming
                   : [](void* dst, const void* src, std::size_t n) { std::memcpy(dst, src, n); };
}

// How slots are copied out of a ring into an output of `output_bytes`.
kernels::CopyFn copy_for_output(std::size_t output_bytes) {
  return copy_with(streams_output(output_bytes));
}

std::size_t pieces_of(std::size_t bytes, std::size_t slot) {
  return (bytes + slot - 1) / slot;
}

// Met once every other rank has copied out slot `sequence - slots` of `producer`'s ring, so
// that the entry slot `sequence` goes into is free.
ConsumedByAll room_for(SharedArena& arena, int producer, std::uint64_t sequence) {
  const auto ring = static_cast<std::uint64_t>(arena.slots());
  return {arena, producer, sequence < ring ? 0 : sequence + 1 - ring, "ring room from"};
}

// Hands the time of a timed copy into the ring (since `start`) to the rank's RingStores, and
// says so under COLLX_DEBUG=INFO where that changed its choice.
void record_stores(SharedArena& arena, int me, RingStores::Kind kind, std::size_t bytes,
                   std::chrono::steady_clock::time_point start) {
  RingStores& stores = arena.ring_stores(me);
  if (stores.record(kind, bytes, std::chrono::steady_clock::now() - start) &&
      arena.log_store_changes()) {
    std::fprintf(stderr,
                 "collx INFO rank %d: shared-memory ring stores now %s (plain %.0f ns/KiB, "
                 "streaming %.0f ns/KiB)\n",
                 me, stores.current() == RingStores::Kind::plain ? "plain" : "streaming",
                 stores.best_ns_per_kib(RingStores::Kind::plain),
                 stores.best_ns_per_kib(RingStores::Kind::streaming));
  }
}

// Marks slot `sequence` of this rank's ring filled (its bytes are in the entry). Clears a
// pointer an earlier publish_direct left in the entry's descriptor. Only then: an unchanged line
// stays in the readers' caches, where take() reads it.
void publish_filled(SharedArena& arena, int me, std::uint64_t sequence) {
  std::atomic<std::uint64_t>& address = arena.descriptor(me, sequence).address;
  if (address.load(std::memory_order_relaxed) != 0) address.store(0, std::memory_order_relaxed);
  arena.advance(arena.published(me), sequence + 1);
}

// Publishes slot `sequence` of this rank's ring: `bytes` from `source`, written with the kind
// of stores the rank's RingStores choose. With `also`, the slot goes to `also` as well (the
// allgather's own block; `also_streams`: with streaming stores). Where both copies use plain
// stores they go block by block, so that `source` is read once and the second copy reads what
// the first just brought into the L1 cache (faster than a second pass over `source`: the
// notebook in git, docs/PERFORMANCE.md at cc55b41, "The slow state: stores into lines the other
// core holds"); streaming stores are not cut up so, since each
// call ends with a fence that waits for them to reach memory.
void fill_slot(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* source,
               std::size_t bytes, std::byte* also, bool also_streams) {
  RingStores& stores = arena.ring_stores(me);
  const RingStores::Kind kind = stores.next(bytes);
  const bool streaming = kind == RingStores::Kind::streaming;
  const bool timed = stores.timed(bytes);
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::byte* entry = arena.slot(me, sequence);
  if (also != nullptr && !streaming && !also_streams) {
    constexpr std::size_t kBlock = std::size_t{8} << 10;
    for (std::size_t i = 0; i < bytes; i += kBlock) {
      const std::size_t n = std::min(kBlock, bytes - i);
      std::memcpy(entry + i, source + i, n);
      std::memcpy(also + i, entry + i, n);
    }
  } else {
    copy_with(streaming)(entry, source, bytes);
    if (also != nullptr) copy_with(also_streams)(also, source, bytes);
  }
  if (timed) record_stores(arena, me, kind, bytes, start);
  publish_filled(arena, me, sequence);
}

// co_await publish(...): fill_slot once the entry is free. An awaiter, not a coroutine: a small
// call publishes with no frame of its own.
auto publish(Operation& op, SharedArena& arena, std::uint64_t sequence, const std::byte* source,
             std::size_t bytes, std::byte* also = nullptr, bool also_streams = false) {
  const int me = op.rank();
  return op.until(room_for(arena, me, sequence),
                  [&arena, me, sequence, source, bytes, also, also_streams] {
                    fill_slot(arena, me, sequence, source, bytes, also, also_streams);
                  });
}

// Publishes slot `sequence` of this rank's ring as a pointer: its readers copy `bytes` at
// `source` straight from this process (SharedArena::read_direct). `source` must stay as it is
// until they all have (read_by_all).
auto publish_direct(Operation& op, SharedArena& arena, std::uint64_t sequence,
                    const std::byte* source, std::size_t bytes) {
  const int me = op.rank();
  return op.until(room_for(arena, me, sequence), [&arena, me, sequence, source, bytes] {
    SharedArena::SlotDescriptor& d = arena.descriptor(me, sequence);
    d.address.store(reinterpret_cast<std::uint64_t>(source), std::memory_order_relaxed);
    d.bytes.store(bytes, std::memory_order_relaxed);
    arena.advance(arena.published(me), sequence + 1);
  });
}

// Met once every other rank has taken slot `sequence` of this rank's ring.
ConsumedByAll read_by_all(Operation& op, SharedArena& arena, std::uint64_t sequence) {
  return {arena, op.rank(), sequence + 1, "a direct read by"};
}

// Copies `bytes` at `address` in `producer`'s memory to `target` (SharedArena::read_direct),
// or throws naming the producer.
void read_directly(Operation& op, SharedArena& arena, int producer, std::byte* target,
                   std::uint64_t address, std::size_t bytes) {
  const int error = arena.read_direct(producer, target, address, bytes);
  if (error != 0) {
    throw Error(ErrorCode::transport, "", op.rank(),
                "process_vm_readv from rank " + std::to_string(producer) +
                    " failed: " + std::strerror(error));
  }
}

// Copies slot `sequence` of `producer`'s ring to `target` once it is published: `bytes` from
// the ring slot, or, where the producer published a pointer (publish_direct), its bytes from
// the producer's memory; `direct` then says so.
void take_slot(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
               std::byte* target, std::size_t bytes, kernels::CopyFn copy, bool* direct) {
  const SharedArena::SlotDescriptor& d = arena.descriptor(producer, sequence);
  const std::uint64_t address = d.address.load(std::memory_order_relaxed);
  if (address == 0) {
    copy(target, arena.slot(producer, sequence), bytes);
  } else {
    if (direct == nullptr) {
      throw Error(ErrorCode::internal, "", op.rank(),
                  "rank " + std::to_string(producer) + " published a pointer where bytes were due");
    }
    read_directly(op, arena, producer, target, address,
                  static_cast<std::size_t>(d.bytes.load(std::memory_order_relaxed)));
    *direct = true;
  }
  arena.advance(arena.consumed(op.rank(), producer), sequence + 1);
}

// co_await take(...): take_slot once the slot is published (an awaiter, as publish).
auto take(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
          std::byte* target, std::size_t bytes, kernels::CopyFn copy, bool* direct = nullptr) {
  return op.until(
      CounterReached(arena, arena.published(producer), sequence + 1, producer, "a slot from"),
      [&op, &arena, producer, sequence, target, bytes, copy, direct] {
        take_slot(op, arena, producer, sequence, target, bytes, copy, direct);
      });
}

// Allgather blocks of at least this many bytes are read directly from their producer while its
// plain stores are slow, up to outputs of kDirectMaxOutputBytes: there the kernel's copy of
// the producer's buffer (what MPI's single-copy path does) beats streaming stores into the
// ring and a copy out of memory, while above it streaming wins (the sizes where each wins, on
// the machine they were measured on: docs/PERFORMANCE.md, "Why the arena, and the VM's slow
// state").
constexpr std::size_t kDirectMinBlockBytes = RingStores::kTimedBytes;
constexpr std::size_t kDirectMaxOutputBytes = std::size_t{4} << 20;

// At two ranks, blocks of 32-64 KiB are read directly from their producer's buffer (one kernel
// copy of lines the producer has not just written) whatever the ring's stores, where the ranks
// may read each other's memory: through the ring, alltoall and allgather blocks of this size were
// 1.1-1.4x slower (two copies, the second of lines the other core has just written), while from
// 128 KiB blocks the ring's two copies won again. At four ranks the same blocks were 1.3-1.7x
// slower read directly than through the ring (docs/results/alltoall-arena-vs-pairwise.csv).
constexpr std::size_t kDirectWindowMinBlockBytes = std::size_t{32} << 10;
constexpr std::size_t kDirectWindowMaxBlockBytes = std::size_t{64} << 10;

// Whether blocks of `block` bytes go as pointers whatever this rank's stores, where that is
// settled by what every rank sees alike: no direct reads possible (false), COLLX_SHM_DIRECT set
// (its value), the direct window (true); nullopt otherwise.
std::optional<bool> direct_by_setting(const SharedArena& arena, std::size_t block) {
  if (!arena.direct_reads()) return false;
  const std::optional<bool> forced = arena.direct_reads_forced();
  if (forced.has_value()) return forced;
  if (arena.size() == 2 && block >= kDirectWindowMinBlockBytes &&
      block <= kDirectWindowMaxBlockBytes) {
    return true;
  }
  return std::nullopt;
}

// Whether this rank hands its allgather block of `block` bytes (of `output` in all) to the
// readers as a pointer this time.
bool hand_over_directly(SharedArena& arena, int me, std::size_t block, std::size_t output) {
  if (block == 0) return false;
  if (const std::optional<bool> settled = direct_by_setting(arena, block)) return *settled;
  if (block < kDirectMinBlockBytes || output > kDirectMaxOutputBytes) return false;
  RingStores& stores = arena.ring_stores(me);
  // Only while streaming is the choice and no trial of either kind is due (a trial goes
  // through the ring, where it is timed).
  if (stores.current() != RingStores::Kind::streaming ||
      stores.next(std::min(block, arena.slot_bytes())) != RingStores::Kind::streaming) {
    return false;
  }
  stores.count_untimed();
  return true;
}

}  // namespace

namespace {
// `me`: this rank's place in `arena`.
Task wait_turn_then(Operation& op, SharedArena& arena, int me, std::uint64_t ticket, Task body) {
  const CounterReached turn(arena, arena.turn(me), ticket, me,
                            "an earlier shared-memory operation on", false);
  co_await op.until(turn);
  std::exception_ptr error;
  try {
    if (!op.schedule_skipped()) co_await std::move(body);
  } catch (...) {
    error = std::current_exception();
  }
  arena.end_turn(me);
  if (error) std::rethrow_exception(error);
}
}  // namespace

// Not a coroutine: the ticket is taken when the dispatcher builds the task, which is in call
// order on every rank (a coroutine's body would run later, after COLLX_CHECK's comparison).
// Inside a Group the turn of the group's arena is the composite's, held for its whole run.
Task in_turn(Operation& op, Task body) {
  if (op.in_group()) return body;
  return in_turn(op, *op.arena(), op.rank(), std::move(body));
}

Task in_turn(Operation& op, SharedArena& arena, int me, Task body) {
  op.set_holds_turn();
  const std::uint64_t ticket = arena.take_ticket(me);
  // The usual case, a schedule built before its operation starts with no earlier arena
  // operation of this rank unfinished: the turn is this one's now, and the operation ends it,
  // with no frame around the schedule. A part built while its operation runs holds its turn
  // for its own run only: the wrapper ends it.
  if (!op.started() && !op.ends_turn() &&
      arena.turn(me).load(std::memory_order_acquire) >= ticket) {
    op.ends_turn_of(arena, me);
    return body;
  }
  return wait_turn_then(op, arena, me, ticket, std::move(body));
}

bool shared_memory_usable(Operation& op) {
  const SharedArena* arena = op.arena();
  return arena != nullptr && arena->size() == op.size() && !op.device_memory();
}

SharedArena* node_arena_for(Operation& op, const patterns::NodeLayout& layout) {
  SharedArena* arena = op.transport().node_arena();
  if (arena == nullptr || op.in_group() || op.device_memory()) return nullptr;
  return arena->size() == layout.ranks_on(layout.node_of(op.rank())) ? arena : nullptr;
}

Task broadcast_shared_memory(Operation& op, BroadcastArgs a) {
  const std::size_t bytes = a.count * a.element_size;
  if (bytes == 0 || op.size() == 1) co_return;
  SharedArena& arena = *op.arena();
  const std::size_t slot = slot_payload_bytes(arena);
  const std::size_t n = pieces_of(bytes, slot);
  const int me = op.rank();
  const kernels::CopyFn copy = copy_for_output(bytes);
  // Every rank other than the root has consumed exactly what the root published so far.
  const std::uint64_t base = me == a.root
                                 ? arena.published(me).load(std::memory_order_relaxed)
                                 : arena.consumed(me, a.root).load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t offset = k * slot;
    const std::size_t length = std::min(slot, bytes - offset);
    if (me == a.root) {
      co_await publish(op, arena, base + k, a.buffer + offset, length);
    } else {
      co_await take(op, arena, a.root, base + k, a.buffer + offset, length, copy);
    }
  }
}

Task allgather_shared_memory(Operation& op, AllgatherArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.element_size;
  const auto block_bytes = [&](int r) {
    return (a.offsets[static_cast<std::size_t>(r) + 1] - a.offsets[static_cast<std::size_t>(r)]) *
           elem;
  };
  const auto block = [&](int r) { return a.recv + a.offsets[static_cast<std::size_t>(r)] * elem; };
  std::size_t largest = 0;
  for (int r = 0; r < p; ++r)
    largest = std::max(largest, block_bytes(r));
  if (largest == 0 || p == 1) {
    if (a.send != nullptr && a.send != block(me)) std::memcpy(block(me), a.send, block_bytes(me));
    co_return;
  }
  SharedArena& arena = *op.arena();
  const std::size_t slot = slot_payload_bytes(arena);
  const std::size_t rounds = pieces_of(largest, slot);
  const std::byte* own = a.send != nullptr ? a.send : block(me);
  const bool copy_own = own != block(me);
  const std::size_t total_bytes = a.offsets.back() * elem;
  const kernels::CopyFn copy = copy_for_output(total_bytes);
  // Where each producer's ring stood before this call (see shm_arena.hpp).
  std::vector<std::uint64_t> base(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    base[static_cast<std::size_t>(r)] = r == me
                                            ? arena.published(me).load(std::memory_order_relaxed)
                                            : arena.consumed(me, r).load(std::memory_order_relaxed);
  }
  // Round k: publish the own slot k, then take slot k of every other rank, starting with the
  // next rank so that the ranks do not all read one producer at once. A rank that hands its
  // block over directly publishes it whole in round 0; its readers take it whole then.
  const bool direct = hand_over_directly(arena, me, block_bytes(me), total_bytes);
  if (direct) {
    co_await publish_direct(op, arena, base[static_cast<std::size_t>(me)], own, block_bytes(me));
    if (copy_own) copy(block(me), own, block_bytes(me));
  }
  std::vector<char> taken_whole(static_cast<std::size_t>(p), 0);
  for (std::size_t k = 0; k < rounds; ++k) {
    const std::size_t offset = k * slot;
    if (!direct && offset < block_bytes(me)) {
      const std::size_t length = std::min(slot, block_bytes(me) - offset);
      co_await publish(op, arena, base[static_cast<std::size_t>(me)] + k, own + offset, length,
                       copy_own ? block(me) + offset : nullptr, streams_output(total_bytes));
    }
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      const auto ri = static_cast<std::size_t>(r);
      if (offset >= block_bytes(r) || taken_whole[ri] != 0) continue;
      const std::size_t length = std::min(slot, block_bytes(r) - offset);
      bool whole = false;
      co_await take(op, arena, r, base[ri] + k, block(r) + offset, length, copy, &whole);
      taken_whole[ri] = whole ? 1 : 0;
    }
  }
  if (direct) co_await op.until(read_by_all(op, arena, base[static_cast<std::size_t>(me)]));
}

Task reduce_shared_memory(Operation& op, ReduceArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.reduction.element_size;
  const std::size_t bytes = a.count * elem;
  if (bytes == 0) co_return;
  SharedArena& arena = *op.arena();
  // Whole elements per slot (every element size divides a ring slot of whole KiB).
  const std::size_t slot = slot_payload_bytes(arena) / elem * elem;
  const std::size_t n = pieces_of(bytes, slot);
  if (me != a.root) {
    // Only the root reads what the other ranks publish: this rank has nothing to take from
    // them, and says so up front, so that their rings never wait for it.
    for (int r = 0; r < p; ++r) {
      if (r == me || r == a.root) continue;
      SharedArena::Counter& consumed = arena.consumed(me, r);
      arena.advance(consumed, consumed.load(std::memory_order_relaxed) + n);
    }
    const std::uint64_t base = arena.published(me).load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t offset = k * slot;
      co_await publish(op, arena, base + k, a.send + offset, std::min(slot, bytes - offset));
    }
    co_return;
  }
  // The root combines slot k of every rank into its output, starting from its own (so an
  // in-place root reads its slot before overwriting it), then the others from root + 1 on;
  // the last step fuses the avg division. p-1 passes over a slot that stays in cache, each
  // ring slot handed back as soon as it is combined.
  std::vector<std::uint64_t> base(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    if (r != me) {
      base[static_cast<std::size_t>(r)] = arena.consumed(me, r).load(std::memory_order_relaxed);
    }
  }
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t offset = k * slot;
    const std::size_t elems = std::min(slot, bytes - offset) / elem;
    std::byte* out = a.recv + offset;
    const std::byte* accumulated = a.send + offset;
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      const std::uint64_t sequence = base[static_cast<std::size_t>(r)] + k;
      const CounterReached published(arena, arena.published(r), sequence + 1, r, "a slot from");
      co_await op.until(published);
      a.reduction.combine(out, accumulated, arena.slot(r, sequence), elems, step == p - 1);
      accumulated = out;
      arena.advance(arena.consumed(me, r), sequence + 1);
    }
  }
}

// ---- reductions that slice the buffer (allreduce, reduce_scatter) ----
//
// Every rank reduces its own block of the buffer (its 1/p of an allreduce, its block of a
// reduce_scatter) and nobody else's: each value is combined once, by one rank, in the order
// rank 0, 1, ..., p-1 (the avg division fused into the last step), so every rank gets the same
// bits. Round k handles piece k of every block (patterns::piece_of): each rank copies its
// input's pieces of the other ranks' blocks into one ring slot side by side (block j's at j
// pieces in), then reduces its own piece from its own input and the p-1 slots, a piece that
// stays in cache. An allreduce then publishes the reduced piece in a second slot and every
// rank copies the others' reduced pieces straight into its output: per rank, (p-1)/p n bytes
// in, n/p reduced, (p-1)/p n out, and no byte through the MPI library. Why through the arena
// and not process_vm_readv of the peers' buffers: docs/PERFORMANCE.md, "Why the arena, and the
// VM's slow state".

namespace {

// Bytes of one rank's piece per round (when the ring slot holds p of them): small enough that
// a piece is reduced while it is in the cache its producer just wrote it from (p pieces in a
// core's L2), large enough that the two counter handoffs per round stay cheap: 256 KiB pieces
// (128 KiB at four ranks, where the slot holds no more) took half the time of 64 KiB ones at
// two ranks from 512 KiB to 2 MiB (docs/results/arena-slice-piece.csv).
constexpr std::size_t kSlicePieceBytes = std::size_t{256} << 10;

// Where each rank's ring stood before this call: this rank's published count, and for every
// other producer what this rank has consumed of it (the same value, see shm_arena.hpp).
std::vector<std::uint64_t> ring_bases(Operation& op, SharedArena& arena) {
  std::vector<std::uint64_t> base(static_cast<std::size_t>(op.size()));
  for (int r = 0; r < op.size(); ++r) {
    base[static_cast<std::size_t>(r)] =
        r == op.rank() ? arena.published(r).load(std::memory_order_relaxed)
                       : arena.consumed(op.rank(), r).load(std::memory_order_relaxed);
  }
  return base;
}

// Copies this rank's pieces of round `round` of every other rank's block from `send` into its
// ring slot `sequence` (block j's piece at j * piece elements) and publishes it.
void fill_pieces(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* send,
                 std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                 std::size_t elem) {
  std::byte* entry = arena.slot(me, sequence);
  // The pieces are written, and timed, like publish()'s slots: the time tells the slow state
  // (RingStores), in which slices_directly() hands the inputs over as pointers instead.
  std::size_t bytes = 0;
  for (int j = 0; j < arena.size(); ++j) {
    if (j != me) bytes += patterns::piece_of(offsets, j, round, piece).length() * elem;
  }
  RingStores& stores = arena.ring_stores(me);
  const RingStores::Kind kind = stores.next(bytes);
  const kernels::CopyFn copy = copy_with(kind == RingStores::Kind::streaming);
  const bool timed = stores.timed(bytes);
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  for (int j = 0; j < arena.size(); ++j) {
    if (j == me) continue;
    const patterns::ElementRange r = patterns::piece_of(offsets, j, round, piece);
    if (r.length() == 0) continue;
    copy(entry + static_cast<std::size_t>(j) * piece * elem, send + r.begin * elem,
         r.length() * elem);
  }
  if (timed) record_stores(arena, me, kind, bytes, start);
  publish_filled(arena, me, sequence);
}

// co_await publish_pieces(...): fill_pieces once the entry is free (an awaiter, as publish).
auto publish_pieces(Operation& op, SharedArena& arena, std::uint64_t sequence,
                    const std::byte* send, std::span<const std::size_t> offsets, std::size_t round,
                    std::size_t piece, std::size_t elem) {
  const int me = op.rank();
  return op.until(room_for(arena, me, sequence),
                  [&arena, me, sequence, send, offsets, round, piece, elem] {
                    fill_pieces(arena, me, sequence, send, offsets, round, piece, elem);
                  });
}

// Whether a rank may hand over the pieces of a call of `bytes` (in all) as pointers
// (slices_directly): where COLLX_SHM_DIRECT=1, or where direct reads work and a slot of the call
// is of the sizes whose stores are timed. The same on every rank (the same bytes, the same
// settings), so a reader that needs room for pieces read directly knows it before any arrives.
bool may_slice_directly(const SharedArena& arena, std::size_t bytes) {
  if (!arena.direct_reads() || bytes == 0) return false;
  const std::optional<bool> forced = arena.direct_reads_forced();
  if (forced.has_value()) return *forced;
  return std::min(bytes, arena.slot_bytes()) >= RingStores::kTimedBytes;
}

// Whether this rank hands an allreduce's or reduce_scatter's pieces over as pointers this call
// (its input and its reduced pieces, publish_direct; the readers copy them with
// process_vm_readv): where COLLX_SHM_DIRECT says so, else while the ring's plain stores are
// slow (RingStores chose streaming) and no trial of plain stores is due. Each rank decides
// alone: a reader looks at each slot's descriptor.
bool slices_directly(SharedArena& arena, int me, std::size_t bytes) {
  if (!may_slice_directly(arena, bytes)) return false;
  if (arena.direct_reads_forced().has_value()) return true;
  RingStores& stores = arena.ring_stores(me);
  if (stores.current() != RingStores::Kind::streaming ||
      stores.next(std::min(bytes, arena.slot_bytes())) != RingStores::Kind::streaming) {
    return false;
  }
  stores.count_untimed();
  return true;
}

// Where this rank's piece of producer j's input is: in j's ring slot, or, where j published a
// pointer to its input (slices_directly), copied from j's memory into piece `at` of `scratch`.
const std::byte* piece_input(Operation& op, SharedArena& arena, int j, std::uint64_t sequence,
                             patterns::ElementRange r, std::size_t piece, std::size_t elem,
                             std::byte* scratch, std::size_t at) {
  const std::uint64_t address =
      arena.descriptor(j, sequence).address.load(std::memory_order_relaxed);
  if (address == 0) {
    return arena.slot(j, sequence) + static_cast<std::size_t>(op.rank()) * piece * elem;
  }
  std::byte* const into = scratch + at * piece * elem;
  read_directly(op, arena, j, into, address + r.begin * elem, r.length() * elem);
  return into;
}

// Reduces this rank's piece of round `round` into `target`: its own input's piece and the
// others' from their ring slots `base[j] + slot_step`, in rank order, each slot handed back
// once read. `scratch` (3 pieces) takes inputs handed over as pointers (piece_input) and, where
// `target` is this rank's own input (an allreduce in place), a copy of it.
Task reduce_own_piece(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                      std::uint64_t slot_step, const std::byte* send,
                      std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                      const Reduction& reduction, std::byte* target, std::byte* scratch) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = reduction.element_size;
  const patterns::ElementRange r = patterns::piece_of(offsets, me, round, piece);
  const auto slot = [&](int j) { return base[static_cast<std::size_t>(j)] + slot_step; };
  const std::byte* own = send + r.begin * elem;
  if (own == target && me >= 2 && r.length() > 0) {
    // The first step writes target before this rank's input is combined (step `me`).
    std::memcpy(scratch + 2 * piece * elem, own, r.length() * elem);
    own = scratch + 2 * piece * elem;
  }
  const auto input = [&](int j) -> const std::byte* {
    if (j == me) return own;
    // Inputs 0 and 1 are combined together; from input 2 on one at a time.
    return piece_input(op, arena, j, slot(j), r, piece, elem, scratch, j == 0 ? 0 : 1);
  };
  const auto hand_back = [&](int j) {
    if (j != me) arena.advance(arena.consumed(me, j), slot(j) + 1);
  };
  if (r.length() == 0) {
    // Nothing of this rank's block in this round: the slots hold nothing for it.
    for (int j = 0; j < p; ++j)
      hand_back(j);
    co_return;
  }
  for (int j = 0; j < p; ++j) {
    if (j != me) {
      const CounterReached arrived(arena, arena.published(j), slot(j) + 1, j, "a piece from");
      co_await op.until(arrived);
    }
    if (j == 0) continue;
    const std::byte* lower = j == 1 ? input(0) : target;
    reduction.combine(target, lower, input(j), r.length(), j == p - 1);
    if (j == 1) hand_back(0);
    hand_back(j);
  }
}

// Copies every other rank's reduced piece of round `round` (its ring slot `base[j] + slot_step`)
// into `recv`, starting with the next rank so that the ranks do not all read one producer at once.
Task take_reduced_pieces(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                         std::uint64_t slot_step, std::byte* recv,
                         std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                         std::size_t elem, kernels::CopyFn copy) {
  for (int step = 1; step < op.size(); ++step) {
    const int j = (op.rank() + step) % op.size();
    const patterns::ElementRange r = patterns::piece_of(offsets, j, round, piece);
    bool direct = false;  // a producer that sliced directly published a pointer
    co_await take(op, arena, j, base[static_cast<std::size_t>(j)] + slot_step,
                  recv + r.begin * elem, r.length() * elem, copy, &direct);
  }
}

}  // namespace

Task allreduce_shared_memory(Operation& op, AllreduceArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.reduction.element_size;
  const std::size_t bytes = a.count * elem;
  if (bytes == 0) co_return;
  if (p == 1) {
    if (a.send != a.recv) std::memcpy(a.recv, a.send, bytes);
    co_return;
  }
  SharedArena& arena = *op.arena();
  const std::size_t piece = patterns::piece_elements(kSlicePieceBytes, arena.slot_bytes(), p, elem);
  if (piece == 0) {
    // A ring slot too small for one element per rank (only a test's tiny arena): messages.
    co_await allreduce_task(op, a, Algorithm::ring);
    co_return;
  }
  const std::vector<std::size_t> offsets = patterns::line_aligned_offsets(a.count, elem, p);
  const std::size_t rounds = patterns::rounds_of(offsets, piece);
  const kernels::CopyFn copy = copy_for_output(bytes);
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  const std::uint64_t own_base = base[static_cast<std::size_t>(me)];
  // Round k's slots: its input pieces at base + 2k, its reduced piece at base + 2k + 1.
  const auto inputs = [](std::size_t k) { return std::uint64_t{2} * k; };
  const auto reduced = [](std::size_t k) { return std::uint64_t{2} * k + 1; };
  // Slicing directly, this rank publishes pointers: to its input each round, to its reduced
  // piece (written straight into recv) after it; it returns once every reader has taken them.
  const bool direct = slices_directly(arena, me, bytes);
  ScratchBuffer scratch = op.scratch(may_slice_directly(arena, bytes) ? 3 * piece * elem : 0);
  for (std::size_t k = 0; k < rounds; ++k) {
    if (direct) {
      co_await publish_direct(op, arena, own_base + inputs(k), a.send, bytes);
    } else {
      co_await publish_pieces(op, arena, own_base + inputs(k), a.send, offsets, k, piece, elem);
    }
    // The others' reduced pieces of the round before, now that this round's inputs are out
    // (in place, their regions of recv were copied into the slot of that round already).
    if (k > 0) {
      co_await take_reduced_pieces(op, arena, base, reduced(k - 1), a.recv, offsets, k - 1, piece,
                                   elem, copy);
    }
    const std::uint64_t own = own_base + reduced(k);
    const patterns::ElementRange mine = patterns::piece_of(offsets, me, k, piece);
    if (direct) {
      std::byte* target = a.recv + mine.begin * elem;
      co_await reduce_own_piece(op, arena, base, inputs(k), a.send, offsets, k, piece, a.reduction,
                                target, scratch.data());
      co_await publish_direct(op, arena, own, target, mine.length() * elem);
    } else {
      co_await op.until(room_for(arena, me, own));
      std::byte* entry = arena.slot(me, own);
      co_await reduce_own_piece(op, arena, base, inputs(k), a.send, offsets, k, piece, a.reduction,
                                entry, scratch.data());
      copy(a.recv + mine.begin * elem, entry, mine.length() * elem);
      publish_filled(arena, me, own);
    }
  }
  co_await take_reduced_pieces(op, arena, base, reduced(rounds - 1), a.recv, offsets, rounds - 1,
                               piece, elem, copy);
  // The readers take the slots in order: the last one taken, they have read all of this call's.
  if (direct) co_await op.until(read_by_all(op, arena, own_base + reduced(rounds - 1)));
}

Task reduce_scatter_shared_memory(Operation& op, ReduceScatterArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.reduction.element_size;
  const std::span<const std::size_t> offsets = a.offsets;
  const auto mine = static_cast<std::size_t>(me);
  const std::size_t own_bytes = (offsets[mine + 1] - offsets[mine]) * elem;
  if (p == 1) {
    if (own_bytes > 0 && a.send != a.recv) std::memmove(a.recv, a.send, own_bytes);
    co_return;
  }
  SharedArena& arena = *op.arena();
  const std::size_t piece = patterns::piece_elements(kSlicePieceBytes, arena.slot_bytes(), p, elem);
  if (piece == 0) {
    co_await reduce_scatter_task(op, a, Algorithm::ring);
    co_return;
  }
  const std::size_t rounds = patterns::rounds_of(offsets, piece);
  if (rounds == 0) co_return;
  // Where recv overlaps send, later rounds still read send: the block is built aside and
  // copied in at the end.
  const std::byte* send_end = a.send + offsets.back() * elem;
  const bool aliased = own_bytes > 0 && a.recv + own_bytes > a.send && a.recv < send_end;
  ScratchBuffer staging;
  std::byte* target = a.recv;
  if (aliased) {
    staging = op.scratch(own_bytes);
    target = staging.data();
  }
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  const std::size_t total_bytes = offsets.back() * elem;
  const bool direct = slices_directly(arena, me, total_bytes);
  ScratchBuffer scratch = op.scratch(may_slice_directly(arena, total_bytes) ? 3 * piece * elem : 0);
  for (std::size_t k = 0; k < rounds; ++k) {
    if (direct) {
      co_await publish_direct(op, arena, base[mine] + k, a.send, total_bytes);
    } else {
      co_await publish_pieces(op, arena, base[mine] + k, a.send, offsets, k, piece, elem);
    }
    const patterns::ElementRange r = patterns::piece_of(offsets, me, k, piece);
    co_await reduce_own_piece(op, arena, base, k, a.send, offsets, k, piece, a.reduction,
                              target + (r.begin - offsets[mine]) * elem, scratch.data());
  }
  if (direct) co_await op.until(read_by_all(op, arena, base[mine] + rounds - 1));
  if (aliased) std::memcpy(a.recv, target, own_bytes);
}

// ---- gather and scatter: one producer per block ----
//
// Gather: every other rank publishes its block, slot by slot, in its ring; the root takes them
// rank by rank from root + 1. Scatter: the root publishes every other rank's block in its ring,
// in the same order; each rank takes its own slots and steps its counter over the others'. The
// ranks that take nothing from a producer say so up front (as reduce_shared_memory's), so
// every slot published is consumed by every other rank and the rings never wait for them.

namespace {
std::size_t block_bytes_of(std::span<const std::size_t> offsets, std::size_t elem, int r) {
  const auto i = static_cast<std::size_t>(r);
  return (offsets[i + 1] - offsets[i]) * elem;
}
std::size_t block_offset_of(std::span<const std::size_t> offsets, std::size_t elem, int r) {
  return offsets[static_cast<std::size_t>(r)] * elem;
}
}  // namespace

Task gather_shared_memory(Operation& op, GatherArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.element_size;
  SharedArena& arena = *op.arena();
  const std::size_t slot = slot_payload_bytes(arena);
  const auto pieces = [&](int r) { return pieces_of(block_bytes_of(a.offsets, elem, r), slot); };
  if (me != a.root) {
    for (int r = 0; r < p; ++r) {
      if (r == me || r == a.root) continue;
      SharedArena::Counter& consumed = arena.consumed(me, r);
      arena.advance(consumed, consumed.load(std::memory_order_relaxed) + pieces(r));
    }
    const std::size_t bytes = block_bytes_of(a.offsets, elem, me);
    const std::uint64_t base = arena.published(me).load(std::memory_order_relaxed);
    for (std::size_t k = 0; k < pieces(me); ++k) {
      const std::size_t offset = k * slot;
      co_await publish(op, arena, base + k, a.send + offset, std::min(slot, bytes - offset));
    }
    co_return;
  }
  std::byte* own = a.recv + block_offset_of(a.offsets, elem, me);
  if (a.send != nullptr && a.send != own) {
    std::memcpy(own, a.send, block_bytes_of(a.offsets, elem, me));
  }
  const kernels::CopyFn copy = copy_for_output(a.offsets.back() * elem);
  for (int step = 1; step < p; ++step) {
    const int r = (me + step) % p;
    const std::size_t bytes = block_bytes_of(a.offsets, elem, r);
    const std::uint64_t base = arena.consumed(me, r).load(std::memory_order_relaxed);
    std::byte* into = a.recv + block_offset_of(a.offsets, elem, r);
    for (std::size_t k = 0; k < pieces(r); ++k) {
      const std::size_t offset = k * slot;
      co_await take(op, arena, r, base + k, into + offset, std::min(slot, bytes - offset), copy);
    }
  }
}

Task scatter_shared_memory(Operation& op, ScatterArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.element_size;
  SharedArena& arena = *op.arena();
  const std::size_t slot = slot_payload_bytes(arena);
  const auto pieces = [&](int r) { return pieces_of(block_bytes_of(a.offsets, elem, r), slot); };
  if (me == a.root) {
    std::uint64_t sequence = arena.published(me).load(std::memory_order_relaxed);
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      const std::size_t bytes = block_bytes_of(a.offsets, elem, r);
      const std::byte* from = a.send + block_offset_of(a.offsets, elem, r);
      for (std::size_t k = 0; k < pieces(r); ++k) {
        const std::size_t offset = k * slot;
        co_await publish(op, arena, sequence++, from + offset, std::min(slot, bytes - offset));
      }
    }
    const std::byte* own = a.send + block_offset_of(a.offsets, elem, me);
    if (a.recv != nullptr && a.recv != own) {
      std::memcpy(a.recv, own, block_bytes_of(a.offsets, elem, me));
    }
    co_return;
  }
  // This rank's slots follow those of the ranks before it in the order root + 1, root + 2, ...
  const std::uint64_t base = arena.consumed(me, a.root).load(std::memory_order_relaxed);
  std::uint64_t first = base;
  std::uint64_t total = 0;
  for (int step = 1; step < p; ++step) {
    const int r = (a.root + step) % p;
    if (r == me) first = base + total;
    total += pieces(r);
  }
  SharedArena::Counter& consumed = arena.consumed(me, a.root);
  arena.advance(consumed, first);
  const std::size_t bytes = block_bytes_of(a.offsets, elem, me);
  const kernels::CopyFn copy = copy_for_output(bytes);
  for (std::size_t k = 0; k < pieces(me); ++k) {
    const std::size_t offset = k * slot;
    co_await take(op, arena, a.root, first + k, a.recv + offset, std::min(slot, bytes - offset),
                  copy);
  }
  arena.advance(consumed, base + total);
}

// Alltoall: the steps of pairwise's exchange through the rings. In step s this rank fills its
// ring, slot by slot, with its block for rank + s, and takes the slots of the block rank - s
// fills for it in the same step, one slot of each in turn (so no ring waits on a reader that
// waits on it). A producer's ring holds its blocks in step order; each reader steps its counter
// over the slots of the blocks meant for others, up front for those before its own and once
// its own are taken for the rest (as scatter's readers do), so every slot published is consumed
// by every other rank. Two copies per byte, as MPI's shared-memory messages take, but plain
// memcpy on both sides and one handoff per slot; or, where direct_by_setting says so, one
// kernel copy per block straight from the producer's input.
Task alltoall_shared_memory(Operation& op, AlltoallArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t block = a.count * a.element_size;
  const auto at = [block](auto* base, int r) { return base + static_cast<std::size_t>(r) * block; };
  const std::size_t total_bytes = block * static_cast<std::size_t>(p);
  SharedArena* arena_here = op.arena();
  // Direct: each block is one slot holding a pointer. Decided from what every rank sees alike
  // (not from whether this rank's call is in place), so all count the same slots.
  const bool direct = block > 0 && p > 1 && arena_here != nullptr &&
                      direct_by_setting(*arena_here, block).value_or(false);
  // In place, send from a copy: from three ranks on a block is overwritten (step s) before it
  // is sent (step p - s), and a block read directly would be read while it is overwritten. At
  // two ranks through the ring the one block sent is the one received, and each slot is
  // published before the slot it receives overwrites it.
  ScratchBuffer input_copy;
  const std::byte* input = a.send;
  if (a.send == a.recv && (p > 2 || direct)) {
    input_copy = op.scratch(total_bytes);
    op.copy(input_copy.data(), a.recv, total_bytes);
    input = input_copy.data();
  }
  const kernels::CopyFn copy = copy_for_output(total_bytes);
  if (input != a.recv) copy(at(a.recv, me), at(input, me), block);
  if (block == 0 || p == 1) co_return;
  SharedArena& arena = *arena_here;
  const std::size_t slot = slot_payload_bytes(arena);
  const auto pieces =
      direct ? std::uint64_t{1} : static_cast<std::uint64_t>(pieces_of(block, slot));
  const auto steps = static_cast<std::uint64_t>(p - 1);
  // Where each producer's ring stood before this call; this rank's block in producer j's ring
  // is the one of j's step (me - j) mod p.
  std::vector<std::uint64_t> base(static_cast<std::size_t>(p));
  for (int j = 0; j < p; ++j) {
    const auto ji = static_cast<std::size_t>(j);
    if (j == me) {
      base[ji] = arena.published(me).load(std::memory_order_relaxed);
      continue;
    }
    base[ji] = arena.consumed(me, j).load(std::memory_order_relaxed);
    const auto step = static_cast<std::uint64_t>((me - j + p) % p);
    if (step > 1) arena.advance(arena.consumed(me, j), base[ji] + (step - 1) * pieces);
  }
  for (int s = 1; s < p; ++s) {
    const int to = (me + s) % p;
    const int from = (me - s + p) % p;
    const auto first = static_cast<std::uint64_t>(s - 1) * pieces;
    if (direct) {
      co_await publish_direct(op, arena, base[static_cast<std::size_t>(me)] + first, at(input, to),
                              block);
      bool whole = false;
      co_await take(op, arena, from, base[static_cast<std::size_t>(from)] + first, at(a.recv, from),
                    block, copy, &whole);
    } else {
      for (std::uint64_t k = 0; k < pieces; ++k) {
        const std::size_t offset = static_cast<std::size_t>(k) * slot;
        const std::size_t length = std::min(slot, block - offset);
        co_await publish(op, arena, base[static_cast<std::size_t>(me)] + first + k,
                         at(input, to) + offset, length);
        co_await take(op, arena, from, base[static_cast<std::size_t>(from)] + first + k,
                      at(a.recv, from) + offset, length, copy);
      }
    }
    arena.advance(arena.consumed(me, from), base[static_cast<std::size_t>(from)] + steps * pieces);
  }
  // The readers copy from the input until they have all taken this rank's last block.
  if (direct)
    co_await op.until(read_by_all(op, arena, base[static_cast<std::size_t>(me)] + steps - 1));
}

}  // namespace collx::detail
