// The shared arena's schedules (Algorithm::shared_memory of every collective but barrier), in
// the steps of arena_steps.hpp (the rings and counters: shm_arena.hpp). No byte goes through the
// MPI library.
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "arena_steps.hpp"
#include "collectives.hpp"
#include "cost_model.hpp"
#include "host_reduce.hpp"
#include "pieces.hpp"
#include "shm_arena.hpp"

namespace collx::detail {

using namespace arena_steps;

namespace {
// The blocks of a gather's, scatter's or allgather's buffer in bytes: rank r's at offset(r).
struct ByteBlocks {
  patterns::BlockLayout elements;
  std::size_t element_size;
  std::size_t offset(int r) const { return elements.offset(r) * element_size; }
  std::size_t length(int r) const { return elements.length(r) * element_size; }
};

// A rank other than the root of a gather or reduce: only the root reads what the others
// publish, so this rank steps its counters over their slots (`cut_of(r)`) up front, that their
// rings never wait for it. Returns where its own slots start. Not a coroutine: the publishing
// loops stay in their schedule's frame (a nested task would cost every small call a frame).
template <class CutOf>
std::uint64_t skip_to_own_slots(Operation& op, SharedArena& arena, int root, CutOf cut_of) {
  const int me = op.rank();
  for (int r = 0; r < op.size(); ++r) {
    if (r != me && r != root)
      arena.advance(arena.consumed(me, r), ring_base(arena, me, r) + cut_of(r).count());
  }
  return ring_base(arena, me, me);
}

}  // namespace

// A broadcast as pointers (broadcast_goes_directly): the buffer in p pieces, piece i for the
// rank i after the root. Every rank publishes its buffer's address in one slot of its ring; the
// root writes each other rank's piece into that rank's buffer (process_vm_writev), and each
// other rank reads the other p - 1 pieces from the root's (process_vm_readv), all at once: the
// root and every other rank copy (p-1)/p of the buffer each, where the ring has the root copy it
// all in and every other rank all out, each in turn. A rank other than the root returns once
// the root has written its piece (the root has then consumed its slot), the root once every
// other rank has read its pieces.
Task broadcast_directly(Operation& op, SharedArena& arena, std::byte* buffer, std::size_t bytes,
                        int root) {
  const int p = op.size();
  const int me = op.rank();
  // Pieces of whole pages: a page that two pieces share is pinned by both copies.
  constexpr std::size_t kPage = 4096;
  const std::size_t piece = (bytes / static_cast<std::size_t>(p) + kPage - 1) / kPage * kPage;
  const auto begin = [&](int i) { return std::min(bytes, static_cast<std::size_t>(i) * piece); };
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  const std::uint64_t own = base[static_cast<std::size_t>(me)];
  co_await publish_direct(op, arena, own, buffer, bytes);
  if (me == root) {
    for (int i = 1; i < p; ++i) {
      const int r = (root + i) % p;
      const std::uint64_t sequence = base[static_cast<std::size_t>(r)];
      co_await op.until(
          CounterReached(arena, arena.published(r), sequence + 1, r, "a buffer's address from"),
          [&op, &arena, r, sequence, buffer, from = begin(i), to = begin(i + 1)] {
            const std::uint64_t address =
                arena.descriptor(r, sequence).address.load(std::memory_order_relaxed);
            write_directly(op, arena, r, address + from, buffer + from, to - from);
            arena.advance(arena.consumed(op.rank(), r), sequence + 1);
          });
    }
  } else {
    // Only the root uses the other ranks' addresses.
    for (int r = 0; r < p; ++r) {
      if (r != me && r != root)
        arena.advance(arena.consumed(me, r), base[static_cast<std::size_t>(r)] + 1);
    }
    const std::uint64_t sequence = base[static_cast<std::size_t>(root)];
    const int mine = (me - root + p) % p;
    co_await op.until(
        CounterReached(arena, arena.published(root), sequence + 1, root, "a buffer's address from"),
        [&op, &arena, root, sequence, buffer, bytes, from = begin(mine), to = begin(mine + 1)] {
          const std::uint64_t address =
              arena.descriptor(root, sequence).address.load(std::memory_order_relaxed);
          // The pieces after this rank's first, so that the ranks do not all read one at once.
          read_directly(op, arena, root, buffer + to, address + to, bytes - to);
          read_directly(op, arena, root, buffer, address, from);
          arena.advance(arena.consumed(op.rank(), root), sequence + 1);
        });
  }
  co_await op.until(ConsumedByAll(
      arena, me, own + 1, me == root ? "a direct read by" : "a write into this rank's buffer by"));
}

Task broadcast_shared_memory(Operation& op, BroadcastArgs a) {
  const std::size_t bytes = a.count * a.element_size;
  if (bytes == 0 || op.size() == 1) co_return;
  SharedArena& arena = *op.arena();
  if (broadcast_goes_directly(arena, bytes)) {
    co_await broadcast_directly(op, arena, a.buffer, bytes, a.root);
    co_return;
  }
  const SlotCut cut{bytes, arena.slot_bytes()};
  // Every rank other than the root has consumed exactly what the root published so far.
  const std::uint64_t base = ring_base(arena, op.rank(), a.root);
  const kernels::CopyFn copy = copy_for_output(bytes);
  for (std::size_t k = 0; k < cut.count(); ++k) {
    if (op.rank() == a.root) {
      co_await publish(op, arena, base + k, a.buffer + cut.offset(k), cut.length(k));
    } else {
      co_await take(op, arena, a.root, base + k, a.buffer + cut.offset(k), cut.length(k), copy);
    }
  }
}

namespace {
// Whether the next slot this rank reads of every producer `each_producer(f)` calls f with is
// published within a spin (SharedArena::spin): a rooted root's one wait run at once.
template <class EachProducer>
bool next_slots_published_within_a_spin(SharedArena& arena, int me, EachProducer each_producer) {
  return arena.spin([&] {
    bool all = true;
    each_producer([&](int r) {
      const std::uint64_t sequence = ring_base(arena, me, r);
      all = all && arena.descriptor(r, sequence).stamp.load(std::memory_order_acquire) > sequence;
    });
    return all;
  });
}
}  // namespace

bool arena_free_at_once(SharedArena& arena, int me, int nranks) {
  return arena.size() == nranks && nranks > 1 &&
         operations_in_flight.load(std::memory_order_acquire) == 0 && arena.idle(me);
}

bool broadcast_shared_memory_at_once(SharedArena& arena, int me, const BroadcastArgs& a) {
  const std::size_t bytes = a.count * a.element_size;
  if (bytes == 0 || bytes > arena.slot_bytes() || broadcast_goes_directly(arena, bytes))
    return false;
  // As broadcast_shared_memory's one slot, each wait a spin at most.
  const std::uint64_t sequence = ring_base(arena, me, a.root);
  if (me == a.root) {
    const ConsumedByAll room = room_for(arena, me, sequence);
    if (!arena.spin([&] { return room.met(); })) return false;
    fill_slot(arena, me, sequence, a.buffer, bytes, nullptr, false);
    return true;
  }
  const SlotPublished published(arena, a.root, sequence, "a slot from");
  if (!published.spin()) return false;
  // A pointer where bytes were due: the operation reports it.
  if (arena.descriptor(a.root, sequence).address.load(std::memory_order_relaxed) != 0) return false;
  copy_out_of_slot(arena, a.root, sequence, a.buffer, bytes, copy_for_output(bytes));
  arena.advance(arena.consumed(me, a.root), sequence + 1);
  return true;
}

Task allgather_shared_memory(Operation& op, AllgatherArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const ByteBlocks blocks{patterns::BlockLayout(a.offsets), a.element_size};
  const auto block = [&](int r) { return a.recv + blocks.offset(r); };
  const std::size_t largest = blocks.elements.max_length() * a.element_size;
  if (largest == 0 || p == 1) {
    if (a.send != nullptr && a.send != block(me))
      kernels::copy(block(me), a.send, blocks.length(me));
    co_return;
  }
  SharedArena& arena = *op.arena();
  const std::size_t slot = arena.slot_bytes();
  const std::size_t rounds = SlotCut{largest, slot}.count();
  const std::byte* own = a.send != nullptr ? a.send : block(me);
  const bool copy_own = own != block(me);
  const std::size_t total_bytes = a.offsets.back() * a.element_size;
  const kernels::CopyFn copy = copy_for_output(total_bytes);
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  const std::uint64_t own_base = base[static_cast<std::size_t>(me)];
  // Round k: publish the own slot k, then take slot k of every other rank, starting with the
  // next rank so that the ranks do not all read one producer at once. A rank that hands its
  // block over directly publishes it whole in round 0; its readers take it whole then.
  const bool direct = hand_over_directly(arena, me, blocks.length(me), total_bytes);
  if (direct) {
    co_await publish_direct(op, arena, own_base, own, blocks.length(me));
    if (copy_own) copy(block(me), own, blocks.length(me));
  }
  std::vector<char> taken_whole(static_cast<std::size_t>(p), 0);
  for (std::size_t k = 0; k < rounds; ++k) {
    const std::size_t offset = k * slot;
    const auto length = [&](int r) { return std::min(slot, blocks.length(r) - offset); };
    if (!direct && offset < blocks.length(me)) {
      co_await publish(op, arena, own_base + k, own + offset, length(me),
                       copy_own ? block(me) + offset : nullptr, streams_output(total_bytes));
    }
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      const auto ri = static_cast<std::size_t>(r);
      if (offset >= blocks.length(r) || taken_whole[ri] != 0) continue;
      bool whole = false;
      co_await take(op, arena, r, base[ri] + k, block(r) + offset, length(r), copy, &whole);
      taken_whole[ri] = whole ? 1 : 0;
    }
  }
  if (direct) co_await op.until(read_by_all(op, arena, own_base));
}

Task reduce_shared_memory(Operation& op, ReduceArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t elem = a.reduction.element_size;
  const std::size_t bytes = a.count * elem;
  if (bytes == 0) co_return;
  SharedArena& arena = *op.arena();
  // Whole elements per slot (every element size divides a ring slot of whole KiB).
  const SlotCut cut{bytes, arena.slot_bytes() / elem * elem};
  if (me != a.root) {
    const std::uint64_t base = skip_to_own_slots(op, arena, a.root, [&](int) { return cut; });
    for (std::size_t k = 0; k < cut.count(); ++k)
      co_await publish(op, arena, base + k, a.send + cut.offset(k), cut.length(k));
    co_return;
  }
  // The root combines slot k of every rank into its output, its own first (so an in-place root
  // reads it before overwriting it), then from root + 1 on, handing each slot back at once.
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  for (std::size_t k = 0; k < cut.count(); ++k) {
    const std::size_t elems = cut.length(k) / elem;
    std::byte* out = a.recv + cut.offset(k);
    const std::byte* accumulated = a.send + cut.offset(k);
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      const std::uint64_t sequence = base[static_cast<std::size_t>(r)] + k;
      const SlotPublished published(arena, r, sequence, "a slot from");
      co_await op.until(published);
      a.reduction.combine(out, accumulated, slot_bytes(arena, r, sequence, cut.length(k)), elems,
                          step == p - 1);
      accumulated = out;
      arena.advance(arena.consumed(me, r), sequence + 1);
    }
  }
}

bool reduce_shared_memory_at_once(SharedArena& arena, int me, const ReduceArgs& a) {
  const int p = arena.size();
  const std::size_t elem = a.reduction.element_size;
  const std::size_t bytes = a.count * elem;
  if (bytes == 0 || bytes > arena.slot_bytes() / elem * elem) return false;
  // As reduce_shared_memory's one slot, each wait a spin at most.
  const auto producers = [&](auto each) {
    for (int step = 1; step < p; ++step)
      each((me + step) % p);
  };
  if (me != a.root) {
    const std::uint64_t sequence = ring_base(arena, me, me);
    const ConsumedByAll room = room_for(arena, me, sequence);
    if (!arena.spin([&] { return room.met(); })) return false;
    producers([&](int r) {
      if (r != a.root) arena.advance(arena.consumed(me, r), ring_base(arena, me, r) + 1);
    });
    fill_slot(arena, me, sequence, a.send, bytes, nullptr, false);
    return true;
  }
  if (!next_slots_published_within_a_spin(arena, me, producers)) return false;
  const std::byte* accumulated = a.send;
  producers([&](int r) {
    const std::uint64_t sequence = ring_base(arena, me, r);
    a.reduction.combine(a.recv, accumulated, slot_bytes(arena, r, sequence, bytes), a.count,
                        r == (me + p - 1) % p);
    accumulated = a.recv;
    arena.advance(arena.consumed(me, r), sequence + 1);
  });
  return true;
}

// ---- block reductions (allreduce, reduce_scatter) ----
// Every rank reduces its own block, in the order rank 0, 1, ..., p-1: the same bits everywhere.
// Round k handles piece k of every block: each rank copies its input's pieces of the others'
// blocks side by side into one ring slot, then reduces its own piece from its input and the p-1
// slots while in cache. An allreduce then publishes the reduced piece for the others to copy.

using model::kPieceBytes;  // shared with the model (cost_model.hpp)

namespace {

// Elements per piece at this operation's ranks; 0 where a ring slot is too small for one
// element per rank (only a test's tiny arena): the call then runs on messages.
std::size_t piece_for(Operation& op, std::size_t elem) {
  return patterns::piece_elements(kPieceBytes, op.arena()->slot_bytes(), op.size(), elem);
}

// The rounds of a block reduction: this rank reduces its piece of every round into
// `own_block`; an allreduce (`all`) publishes each reduced piece in a second slot and copies
// every other rank's into `recv`.
Task reduce_blocks(Operation& op, const std::byte* send, std::byte* recv, std::byte* own_block,
                   std::vector<std::size_t> offsets, Reduction reduction, bool all) {
  const int me = op.rank();
  const auto mine = static_cast<std::size_t>(me);
  const std::size_t elem = reduction.element_size;
  const std::size_t bytes = offsets.back() * elem;
  if (op.size() == 1) {
    if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
    co_return;
  }
  SharedArena& arena = *op.arena();
  const std::size_t piece = piece_for(op, elem);
  const std::size_t rounds = patterns::rounds_of(offsets, piece);
  if (rounds == 0) co_return;
  // Where a reduce_scatter's block overlaps send, later rounds still read send: the block is
  // built aside and copied in at the end.
  const std::size_t own_bytes = (offsets[mine + 1] - offsets[mine]) * elem;
  const bool aliased =
      !all && own_bytes > 0 && own_block + own_bytes > send && own_block < send + bytes;
  ScratchBuffer staging = op.scratch(aliased ? own_bytes : 0);
  std::byte* const block = aliased ? staging.data() : own_block;
  const kernels::CopyFn copy = copy_for_output(bytes);
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  // Round k's slots: its input pieces at base + stride * k, an allreduce's reduced piece next.
  const std::uint64_t stride = all ? 2 : 1;
  // Handing pieces over directly, this rank publishes pointers (to its input, then to its
  // reduced piece in recv) and returns once every reader has taken them.
  const bool direct = pieces_go_directly(arena, me, bytes);
  ScratchBuffer scratch = op.scratch(pieces_may_go_directly(arena, bytes) ? 3 * piece * elem : 0);
  for (std::size_t k = 0; k < rounds; ++k) {
    const std::uint64_t inputs = stride * k;
    if (direct) {
      co_await publish_direct(op, arena, base[mine] + inputs, send, bytes);
    } else {
      co_await op.until(room_for(arena, me, base[mine] + inputs), [&] {
        fill_pieces(arena, me, base[mine] + inputs, send, offsets, k, piece, elem);
      });
    }
    // The others' reduced pieces of the round before, now that this round's inputs are out
    // (in place, their regions of recv were copied into the slot of that round already).
    if (all && k > 0) {
      co_await take_reduced_pieces(op, arena, base, inputs - 1, recv, offsets, k - 1, piece, elem,
                                   copy);
    }
    const patterns::ElementRange r = patterns::piece_of(offsets, me, k, piece);
    std::byte* const target = block + (r.begin - offsets[mine]) * elem;
    const std::uint64_t reduced = base[mine] + inputs + 1;
    if (all && !direct) {
      co_await op.until(room_for(arena, me, reduced));
      std::byte* entry = arena.slot(me, reduced);
      co_await reduce_own_piece(op, arena, base, inputs, send, offsets, k, piece, reduction, entry,
                                scratch.data(), {target, copy});
      publish_filled(arena, me, reduced);
      continue;
    }
    co_await reduce_own_piece(op, arena, base, inputs, send, offsets, k, piece, reduction, target,
                              scratch.data());
    if (all) co_await publish_direct(op, arena, reduced, target, r.length() * elem);
  }
  if (all) {
    co_await take_reduced_pieces(op, arena, base, stride * rounds - 1, recv, offsets, rounds - 1,
                                 piece, elem, copy);
  }
  // The readers take the slots in order: the last one taken, they have read all of this call's.
  if (direct) co_await op.until(read_by_all(op, arena, base[mine] + stride * rounds - 1));
  if (aliased) kernels::copy(own_block, block, own_bytes);
}

}  // namespace

// Not coroutines: each starts the one block reduction (or its messages' fallback) directly.
Task allreduce_shared_memory(Operation& op, AllreduceArgs a) {
  const std::size_t elem = a.reduction.element_size;
  if (piece_for(op, elem) == 0) return allreduce_task(op, a, Algorithm::ring);
  std::vector<std::size_t> offsets = patterns::line_aligned_offsets(a.count, elem, op.size());
  std::byte* own_block = a.recv + offsets[static_cast<std::size_t>(op.rank())] * elem;
  return reduce_blocks(op, a.send, a.recv, own_block, std::move(offsets), a.reduction, true);
}

Task reduce_scatter_shared_memory(Operation& op, ReduceScatterArgs a) {
  if (piece_for(op, a.reduction.element_size) == 0) {
    return reduce_scatter_task(op, a, Algorithm::ring);
  }
  return reduce_blocks(op, a.send, a.recv, a.recv, std::move(a.offsets), a.reduction, false);
}

// ---- gather and scatter: one producer per block, from root + 1 on ----
// Gather: every other rank publishes its block in its own ring; the root takes them. Scatter:
// the root publishes every other rank's block in its ring in that order; each rank takes its own
// slots and steps its counter over the others'.
namespace {
// The root's copy of its own block between its full buffer and `own` (null: in place).
template <bool kGather>
void copy_root_block(std::byte* full, std::byte* own, const ByteBlocks& blocks, int root) {
  std::byte* const in_full = full + blocks.offset(root);
  if (own == nullptr || own == in_full) return;
  kernels::copy(kGather ? in_full : own, kGather ? own : in_full, blocks.length(root));
}

// Gather and scatter as pointers (rooted_goes_directly): the root publishes its full buffer's
// address in one slot of its ring, and every other rank writes its block into it (gather,
// process_vm_writev) or reads its block from it (scatter, process_vm_readv), all at once, while
// the root copies its own; one copy of each block, where the ring has the root copy every
// other rank's block in turn. The root returns once every other rank has consumed its slot.
template <bool kGather>
Task rooted_directly(Operation& op, SharedArena& arena, std::byte* full, std::byte* own,
                     const ByteBlocks& blocks, int root) {
  const int me = op.rank();
  const std::uint64_t sequence = ring_base(arena, me, root);
  if (me == root) {
    co_await publish_direct(op, arena, sequence, full, blocks.offset(op.size()));
    copy_root_block<kGather>(full, own, blocks, root);
    co_await op.until(
        ConsumedByAll(arena, me, sequence + 1,
                      kGather ? "a write into this rank's buffer by" : "a direct read by"));
    co_return;
  }
  co_await op.until(
      CounterReached(arena, arena.published(root), sequence + 1, root, "a buffer's address from"),
      [&op, &arena, root, sequence, own, offset = blocks.offset(me), length = blocks.length(me)] {
        const std::uint64_t address =
            arena.descriptor(root, sequence).address.load(std::memory_order_relaxed);
        if constexpr (kGather) {
          write_directly(op, arena, root, address + offset, own, length);
        } else {
          read_directly(op, arena, root, own, address + offset, length);
        }
        arena.advance(arena.consumed(op.rank(), root), sequence + 1);
      });
}
}  // namespace

template <bool kGather>
Task rooted_shared_memory(Operation& op, RootedArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const ByteBlocks blocks{patterns::BlockLayout(a.offsets), a.element_size};
  SharedArena& arena = *op.arena();
  const auto cut = [&](int r) { return SlotCut{blocks.length(r), arena.slot_bytes()}; };
  // The root's full buffer and the rank's own block (null at the root: in place), collectives.hpp.
  std::byte* const full = kGather ? a.recv : const_cast<std::byte*>(a.send);
  std::byte* const own = kGather ? const_cast<std::byte*>(a.send) : a.recv;
  if (rooted_goes_directly(arena, blocks.elements.max_length() * a.element_size)) {
    co_await rooted_directly<kGather>(op, arena, full, own, blocks, a.root);
    co_return;
  }
  if (me == a.root) copy_root_block<kGather>(full, own, blocks, a.root);
  if (kGather && me != a.root) skip_to_own_slots(op, arena, a.root, cut);
  const kernels::CopyFn copy =
      copy_for_output(kGather ? a.offsets.back() * a.element_size : blocks.length(me));
  // A scatter's block r's slots start `before` slots after the root's ring base.
  const std::uint64_t root_base = ring_base(arena, me, a.root);
  std::uint64_t before = 0;
  for (int step = 1; step < p; ++step) {
    const int r = (a.root + step) % p;
    const SlotCut block = cut(r);
    const int producer = kGather ? r : a.root;
    const std::uint64_t first = kGather ? ring_base(arena, me, r) : root_base + before;
    if (!kGather && r == me) arena.advance(arena.consumed(me, a.root), first);
    for (std::size_t k = 0; k < block.count() && (me == a.root || r == me); ++k) {
      const std::size_t in_full = blocks.offset(r) + block.offset(k);
      if (me == producer) {
        co_await publish(op, arena, first + k, kGather ? own + block.offset(k) : full + in_full,
                         block.length(k));
      } else {
        co_await take(op, arena, producer, first + k,
                      kGather ? full + in_full : own + block.offset(k), block.length(k), copy);
      }
    }
    before += block.count();
  }
  if (!kGather && me != a.root) arena.advance(arena.consumed(me, a.root), root_base + before);
}
template Task rooted_shared_memory<true>(Operation&, RootedArgs);
template Task rooted_shared_memory<false>(Operation&, RootedArgs);

namespace {
// A gather's or scatter's blocks where its call can run at once: each fits one ring slot and
// goes through the slots (not as pointers); else none.
std::optional<ByteBlocks> blocks_in_one_slot_each(SharedArena& arena, const RootedArgs& a) {
  const ByteBlocks blocks{patterns::BlockLayout(a.offsets), a.element_size};
  const std::size_t largest = blocks.elements.max_length() * a.element_size;
  if (largest == 0 || largest > arena.slot_bytes() || rooted_goes_directly(arena, largest))
    return std::nullopt;
  return blocks;
}
}  // namespace

bool gather_shared_memory_at_once(SharedArena& arena, int me, const GatherArgs& a) {
  const std::optional<ByteBlocks> in_slots = blocks_in_one_slot_each(arena, a);
  if (!in_slots) return false;
  const ByteBlocks& blocks = *in_slots;
  const int p = arena.size();
  // As rooted_shared_memory<true>'s one slot per rank, each wait a spin at most.
  const auto others = [&](auto each) {
    for (int step = 1; step < p; ++step) {
      const int r = (a.root + step) % p;
      if (blocks.length(r) != 0) each(r);
    }
  };
  if (me != a.root) {
    const std::uint64_t sequence = ring_base(arena, me, me);
    const bool publishes = blocks.length(me) != 0;
    const ConsumedByAll room = room_for(arena, me, sequence);
    if (publishes && !arena.spin([&] { return room.met(); })) return false;
    // The other senders' slots: only the root reads them (skip_to_own_slots).
    others([&](int r) {
      if (r != me) arena.advance(arena.consumed(me, r), ring_base(arena, me, r) + 1);
    });
    if (publishes) fill_slot(arena, me, sequence, a.send, blocks.length(me), nullptr, false);
    return true;
  }
  if (!next_slots_published_within_a_spin(arena, me, others)) return false;
  // A pointer where bytes were due: the operation reports it.
  bool pointers = false;
  others([&](int r) {
    const std::uint64_t sequence = ring_base(arena, me, r);
    pointers =
        pointers || arena.descriptor(r, sequence).address.load(std::memory_order_relaxed) != 0;
  });
  if (pointers) return false;
  copy_root_block<true>(a.recv, const_cast<std::byte*>(a.send), blocks, a.root);
  const kernels::CopyFn copy = copy_for_output(a.offsets.back() * a.element_size);
  others([&](int r) {
    const std::uint64_t sequence = ring_base(arena, me, r);
    copy_out_of_slot(arena, r, sequence, a.recv + blocks.offset(r), blocks.length(r), copy);
    arena.advance(arena.consumed(me, r), sequence + 1);
  });
  return true;
}

bool scatter_shared_memory_at_once(SharedArena& arena, int me, const ScatterArgs& a) {
  const std::optional<ByteBlocks> in_slots = blocks_in_one_slot_each(arena, a);
  if (!in_slots) return false;
  const ByteBlocks& blocks = *in_slots;
  const int p = arena.size();
  // As rooted_shared_memory<false>'s one slot per other rank with a block, in rank order from
  // root + 1 on, each wait a spin at most: the root's for room for all of them in its ring, a
  // reader's for its own slot.
  const std::uint64_t base = ring_base(arena, me, a.root);
  std::uint64_t slots = 0;
  std::uint64_t own_slot = 0;
  for (int step = 1; step < p; ++step) {
    const int r = (a.root + step) % p;
    if (r == me) own_slot = base + slots;
    if (blocks.length(r) != 0) ++slots;
  }
  std::byte* const full = const_cast<std::byte*>(a.send);
  if (me == a.root) {
    if (slots > static_cast<std::uint64_t>(arena.slots())) return false;
    if (slots != 0) {
      const ConsumedByAll room = room_for(arena, me, base + slots - 1);
      if (!arena.spin([&] { return room.met(); })) return false;
    }
    std::uint64_t sequence = base;
    for (int step = 1; step < p; ++step) {
      const int r = (a.root + step) % p;
      if (blocks.length(r) != 0)
        fill_slot(arena, me, sequence++, full + blocks.offset(r), blocks.length(r), nullptr, false);
    }
    copy_root_block<false>(full, a.recv, blocks, a.root);
    return true;
  }
  if (blocks.length(me) != 0) {
    const SlotPublished published(arena, a.root, own_slot, "a slot from");
    if (!published.spin()) return false;
    // A pointer where bytes were due: the operation reports it.
    if (arena.descriptor(a.root, own_slot).address.load(std::memory_order_relaxed) != 0)
      return false;
    copy_out_of_slot(arena, a.root, own_slot, a.recv, blocks.length(me),
                     copy_for_output(blocks.length(me)));
  }
  // The slots for the others: only they read them.
  arena.advance(arena.consumed(me, a.root), base + slots);
  return true;
}

// Alltoall: pairwise's steps through the rings. In step s this rank fills its ring with its
// block for rank + s while taking the block rank - s fills for it, a slot of each in turn (no
// ring waits on a reader that waits on it). Readers step their counters over the slots meant for
// others; where direct_by_setting says so, one copy per block straight from the producer's input.
Task alltoall_shared_memory(Operation& op, AlltoallArgs a) {
  const int p = op.size();
  const int me = op.rank();
  const std::size_t block = a.count * a.element_size;
  const auto at = [block](auto* base, int r) { return base + static_cast<std::size_t>(r) * block; };
  const std::size_t total_bytes = block * static_cast<std::size_t>(p);
  SharedArena& arena = *op.arena();
  // Direct: each block is one slot holding a pointer. Decided from what every rank sees alike
  // (not from whether this rank's call is in place), so all count the same slots.
  const bool direct = block > 0 && p > 1 && direct_by_setting(arena, block).value_or(false);
  // In place, send from a copy: from three ranks on a block is overwritten (step s) before it
  // is sent (step p - s), or while it is read directly. At two ranks through the ring each
  // slot is out before it is overwritten.
  ScratchBuffer input_copy;
  const std::byte* input = p > 2 || direct ? stable_input(op, a, input_copy) : a.send;
  const kernels::CopyFn copy = copy_for_output(total_bytes);
  if (input != a.recv) copy(at(a.recv, me), at(input, me), block);
  if (block == 0 || p == 1) co_return;
  // Step s's block is the (s - 1)th of producer j's ring this call, in one slot where direct.
  const SlotCut cut{block, direct ? block : arena.slot_bytes()};
  const std::vector<std::uint64_t> base = ring_bases(op, arena);
  const auto first_slot = [&](int j, int s) {
    return base[static_cast<std::size_t>(j)] + static_cast<std::uint64_t>(s - 1) * cut.count();
  };
  // This rank's block in producer j's ring is the one of j's step (me - j) mod p.
  for (int j = 0; j < p; ++j) {
    const int step = (me - j + p) % p;
    if (step > 1) arena.advance(arena.consumed(me, j), first_slot(j, step));
  }
  for (int s = 1; s < p; ++s) {
    const int to = (me + s) % p;
    const int from = (me - s + p) % p;
    for (std::size_t k = 0; k < cut.count(); ++k) {
      const std::uint64_t slot = first_slot(me, s) + k;
      if (direct) {
        co_await publish_direct(op, arena, slot, at(input, to), block);
      } else {
        co_await publish(op, arena, slot, at(input, to) + cut.offset(k), cut.length(k));
      }
      bool whole = false;
      co_await take(op, arena, from, first_slot(from, s) + k, at(a.recv, from) + cut.offset(k),
                    cut.length(k), copy, direct ? &whole : nullptr);
    }
    arena.advance(arena.consumed(me, from), first_slot(from, p));
  }
  // The readers copy from the input until they have all taken this rank's last block.
  if (direct) co_await op.until(read_by_all(op, arena, first_slot(me, p) - 1));
}

}  // namespace collx::detail
