// The shared arena's steps (arena_steps.hpp) and its turns.
#include "arena_steps.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "collx/error.hpp"
#include "config.hpp"
#include "pieces.hpp"

namespace collx::detail {

namespace arena_steps {

namespace {

// Outputs larger than this are written with streaming stores: they do not stay in cache anyway.
constexpr std::size_t kStreamingOutputBytes = std::size_t{8} << 20;

// Allgather blocks of at least this many bytes are read directly from their producer while its
// plain stores are slow, up to outputs of kDirectMaxOutputBytes (above it streaming wins).
constexpr std::size_t kDirectMinBlockBytes = RingStores::kTimedBytes;
constexpr std::size_t kDirectMaxOutputBytes = std::size_t{4} << 20;

// At two ranks, blocks in this window are read directly from the producer's buffer whatever the
// ring's stores: one kernel copy beats the ring's two there. Broadcasts at two ranks from its
// lower edge, and gathers and scatters whose largest block reaches it (twice it from three ranks
// on), go as pointers whatever their size (broadcast_shared_memory, rooted_shared_memory): a
// broadcast's root writes half of the buffer into the other rank's while that rank reads the
// other half; a gather's ranks write their blocks into the root's buffer (a scatter's read
// theirs from it) while the root copies its own: copies at once, where through the ring the
// root copies every byte in or out itself and the others wait on it. At three ranks and more a
// broadcast's ranks each copy (p-1)/p of it, each byte by the kernel's slower copy, and with the
// ranks sharing two cores that lost to the ring; gathers and scatters of blocks below 64 KiB
// lost there too (docs/PERFORMANCE.md, "Broadcast, gather and scatter as pointers").
constexpr std::size_t kDirectWindowMinBlockBytes = std::size_t{32} << 10;
constexpr std::size_t kDirectWindowMaxBlockBytes = std::size_t{64} << 10;

// How much of a reduced piece reduce_own_piece reduces, then copies on at once: its inputs and
// its result stay in a first-level cache of 32 KiB.
constexpr std::size_t kCopiedWhileCachedBytes = std::size_t{8} << 10;

// A copy with streaming or plain stores.
kernels::CopyFn copy_with(bool streaming) {
  return streaming ? kernels::active_kernels().copy_streaming
                   : [](void* dst, const void* src, std::size_t n) { kernels::copy(dst, src, n); };
}

// Where this rank's piece of producer j's input is: in j's ring slot, or copied from j's
// memory (pieces_go_directly) into piece `at` of `scratch`.
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

// Fills slot `sequence` of this rank's ring with `fill(streaming)` (`bytes` in all) with the
// stores its RingStores choose, times a timed fill for them (logging a change of choice under
// COLLX_DEBUG=INFO), and publishes the slot (`inline_length` of its bytes in its descriptor line
// too: publish_filled).
template <class Fill>
void fill_timed(SharedArena& arena, int me, std::uint64_t sequence, std::size_t bytes,
                std::size_t inline_length, Fill fill) {
  RingStores& stores = arena.ring_stores(me);
  const RingStores::Kind kind = stores.next(bytes);
  const bool timed = stores.timed(bytes);
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  fill(kind == RingStores::Kind::streaming);
  if (timed && stores.record(kind, bytes, std::chrono::steady_clock::now() - start) &&
      config().debug >= DebugLevel::info) {
    std::fprintf(stderr,
                 "collx INFO rank %d: shared-memory ring stores now %s (plain %.0f ns/KiB, "
                 "streaming %.0f ns/KiB)\n",
                 me, stores.current() == RingStores::Kind::plain ? "plain" : "streaming",
                 stores.best_ns_per_kib(RingStores::Kind::plain),
                 stores.best_ns_per_kib(RingStores::Kind::streaming));
  }
  publish_filled(arena, me, sequence, inline_length);
}

// Whether this rank's plain stores are slow (RingStores chose streaming) and no trial of either
// kind is due: then its bytes go as pointers, a call the stores count as untimed.
bool streaming_settled(SharedArena& arena, int me, std::size_t bytes) {
  RingStores& stores = arena.ring_stores(me);
  if (stores.current() != RingStores::Kind::streaming ||
      stores.next(std::min(bytes, arena.slot_bytes())) != RingStores::Kind::streaming) {
    return false;
  }
  stores.count_untimed();
  return true;
}

}  // namespace

bool streams_output(std::size_t output_bytes) {
  return output_bytes > kStreamingOutputBytes;
}

kernels::CopyFn copy_for_output(std::size_t output_bytes) {
  return copy_with(streams_output(output_bytes));
}

void publish_filled(SharedArena& arena, int me, std::uint64_t sequence, std::size_t inline_length) {
  SharedArena::SlotDescriptor& d = arena.descriptor(me, sequence);
  // Stored only where they change: the line stays shared with the readers polling it.
  if (d.address.load(std::memory_order_relaxed) != 0) d.address.store(0, std::memory_order_relaxed);
  const std::uint64_t length = inline_length == 0 ? 0 : SharedArena::kInlineTag | inline_length;
  if (d.bytes.load(std::memory_order_relaxed) != length)
    d.bytes.store(length, std::memory_order_relaxed);
  arena.mark_published(me, sequence);
}

void fill_slot(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* source,
               std::size_t bytes, std::byte* also, bool also_streams) {
  std::byte* entry = arena.slot(me, sequence);
  // A small slot's bytes in its descriptor line as well, where take_slot copies them from.
  const std::size_t inline_length = bytes <= SharedArena::kInlineBytes ? bytes : 0;
  if (inline_length != 0)
    std::memcpy(arena.descriptor(me, sequence).inline_bytes, source, inline_length);
  fill_timed(arena, me, sequence, bytes, inline_length, [&](bool streaming) {
    if (also != nullptr && !streaming && !also_streams) {
      constexpr std::size_t kBlock = std::size_t{8} << 10;
      for (std::size_t i = 0; i < bytes; i += kBlock) {
        const std::size_t n = std::min(kBlock, bytes - i);
        kernels::copy(entry + i, source + i, n);
        kernels::copy(also + i, entry + i, n);
      }
      return;
    }
    copy_with(streaming)(entry, source, bytes);
    if (also != nullptr) copy_with(also_streams)(also, source, bytes);
  });
}

const std::byte* slot_bytes(SharedArena& arena, int producer, std::uint64_t sequence,
                            std::size_t bytes) {
  const SharedArena::SlotDescriptor& d = arena.descriptor(producer, sequence);
  if (bytes != 0 && d.bytes.load(std::memory_order_relaxed) == (SharedArena::kInlineTag | bytes))
    return d.inline_bytes;
  return arena.slot(producer, sequence);
}

void copy_out_of_slot(SharedArena& arena, int producer, std::uint64_t sequence, std::byte* target,
                      std::size_t bytes, kernels::CopyFn copy) {
  const std::byte* from = slot_bytes(arena, producer, sequence, bytes);
  if (from == arena.slot(producer, sequence)) {
    copy(target, from, bytes);
  } else {
    std::memcpy(target, from, bytes);
  }
}

void take_slot(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
               std::byte* target, std::size_t bytes, kernels::CopyFn copy, bool* direct) {
  const SharedArena::SlotDescriptor& d = arena.descriptor(producer, sequence);
  const std::uint64_t address = d.address.load(std::memory_order_relaxed);
  if (address == 0) {
    copy_out_of_slot(arena, producer, sequence, target, bytes, copy);
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

std::optional<bool> direct_by_setting(const SharedArena& arena, std::size_t block) {
  if (!arena.direct_reads()) return false;
  if (const std::optional<bool> forced = arena.direct_reads_forced()) return forced;
  const bool window = block >= kDirectWindowMinBlockBytes && block <= kDirectWindowMaxBlockBytes;
  return arena.size() == 2 && window ? std::optional<bool>(true) : std::nullopt;
}

void read_directly(Operation& op, SharedArena& arena, int producer, std::byte* target,
                   std::uint64_t address, std::size_t bytes) {
  const int error = arena.read_direct(producer, target, address, bytes);
  if (error != 0) {
    throw Error(ErrorCode::transport, "", op.rank(),
                "process_vm_readv from rank " + std::to_string(producer) +
                    " failed: " + std::strerror(error));
  }
}

void write_directly(Operation& op, SharedArena& arena, int peer, std::uint64_t address,
                    const std::byte* source, std::size_t bytes) {
  const int error = arena.write_direct(peer, address, source, bytes);
  if (error != 0) {
    throw Error(
        ErrorCode::transport, "", op.rank(),
        "process_vm_writev to rank " + std::to_string(peer) + " failed: " + std::strerror(error));
  }
}

bool broadcast_goes_directly(const SharedArena& arena, std::size_t bytes) {
  return bytes > 0 && direct_by_setting(arena, bytes)
                          .value_or(arena.size() == 2 && bytes >= kDirectWindowMinBlockBytes);
}

bool rooted_goes_directly(const SharedArena& arena, std::size_t largest_block) {
  const std::size_t least = (arena.size() == 2 ? 1 : 2) * kDirectWindowMinBlockBytes;
  return largest_block > 0 &&
         direct_by_setting(arena, largest_block).value_or(largest_block >= least);
}

bool hand_over_directly(SharedArena& arena, int me, std::size_t block, std::size_t output) {
  if (block == 0) return false;
  if (const std::optional<bool> settled = direct_by_setting(arena, block)) return *settled;
  if (block < kDirectMinBlockBytes || output > kDirectMaxOutputBytes) return false;
  return streaming_settled(arena, me, block);
}

std::vector<std::uint64_t> ring_bases(Operation& op, SharedArena& arena) {
  std::vector<std::uint64_t> base(static_cast<std::size_t>(op.size()));
  for (int r = 0; r < op.size(); ++r)
    base[static_cast<std::size_t>(r)] = ring_base(arena, op.rank(), r);
  return base;
}

void fill_pieces(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* send,
                 std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                 std::size_t elem) {
  std::byte* entry = arena.slot(me, sequence);
  // Written and timed like publish()'s slots: the time tells the slow state (RingStores).
  std::size_t bytes = 0;
  for (int j = 0; j < arena.size(); ++j) {
    if (j != me) bytes += patterns::piece_of(offsets, j, round, piece).length() * elem;
  }
  fill_timed(arena, me, sequence, bytes, 0, [&](bool streaming) {
    const kernels::CopyFn copy = copy_with(streaming);
    for (int j = 0; j < arena.size(); ++j) {
      const patterns::ElementRange r = patterns::piece_of(offsets, j, round, piece);
      if (j == me || r.length() == 0) continue;
      copy(entry + static_cast<std::size_t>(j) * piece * elem, send + r.begin * elem,
           r.length() * elem);
    }
  });
}

bool pieces_may_go_directly(const SharedArena& arena, std::size_t bytes) {
  if (!arena.direct_reads() || bytes == 0) return false;
  const std::optional<bool> forced = arena.direct_reads_forced();
  if (forced.has_value()) return *forced;
  return std::min(bytes, arena.slot_bytes()) >= RingStores::kTimedBytes;
}

bool pieces_go_directly(SharedArena& arena, int me, std::size_t bytes) {
  if (!pieces_may_go_directly(arena, bytes)) return false;
  return arena.direct_reads_forced().has_value() || streaming_settled(arena, me, bytes);
}

Task reduce_own_piece(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                      std::uint64_t slot_step, const std::byte* send,
                      std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                      const Reduction& reduction, std::byte* target, std::byte* scratch,
                      CopyOfTarget also) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = reduction.element_size;
  const patterns::ElementRange r = patterns::piece_of(offsets, me, round, piece);
  const auto slot = [&](int j) { return base[static_cast<std::size_t>(j)] + slot_step; };
  const std::byte* own = send + r.begin * elem;
  if (own == target && me >= 2 && r.length() > 0) {
    // The first step writes target before this rank's input is combined (step `me`).
    kernels::copy(scratch + 2 * piece * elem, own, r.length() * elem);
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
    if (j == p - 1 && also.to != nullptr) {
      // Element by element, as one pass would (the same bits); each stretch is copied while in
      // cache. In place, `also.to` is this rank's input: each stretch is read before it is
      // copied over.
      const std::byte* upper = input(j);
      const std::size_t stretch = std::max<std::size_t>(kCopiedWhileCachedBytes / elem, 1);
      for (std::size_t done = 0; done < r.length(); done += stretch) {
        const std::size_t n = std::min(stretch, r.length() - done);
        const std::size_t at = done * elem;
        reduction.combine(target + at, lower + at, upper + at, n, true);
        also.copy(also.to + at, target + at, n * elem);
      }
    } else {
      reduction.combine(target, lower, input(j), r.length(), j == p - 1);
    }
    if (j == 1) hand_back(0);
    hand_back(j);
  }
}

Task take_reduced_pieces(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                         std::uint64_t slot_step, std::byte* recv,
                         std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                         std::size_t elem, kernels::CopyFn copy) {
  for (int step = 1; step < op.size(); ++step) {
    const int j = (op.rank() + step) % op.size();
    const patterns::ElementRange r = patterns::piece_of(offsets, j, round, piece);
    bool direct = false;  // a producer whose pieces went directly published a pointer
    co_await take(op, arena, j, base[static_cast<std::size_t>(j)] + slot_step,
                  recv + r.begin * elem, r.length() * elem, copy, &direct);
  }
}

}  // namespace arena_steps

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

// Not a coroutine: the ticket is taken when the dispatcher builds the task, in call order on
// every rank. Inside a Group the composite holds the group arena's turn already.
Task in_turn(Operation& op, Task body) {
  if (op.in_group()) return body;
  return in_turn(op, *op.arena(), op.rank(), std::move(body));
}

Task in_turn(Operation& op, SharedArena& arena, int me, Task body) {
  op.set_holds_turn();
  const std::uint64_t ticket = arena.take_ticket(me);
  // A schedule built before its operation starts, with no earlier arena operation unfinished:
  // the turn is its own now and the operation ends it (no frame around the schedule). A part
  // built while its operation runs holds the turn for its own run: the wrapper ends it.
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

}  // namespace collx::detail
