// The steps of the shared arena's schedules: a producer fills the next slot of its ring and
// publishes it; a reader waits, copies it out and hands it back; the block reductions' pieces.
// Steps that wait then act are awaiters (Operation::until), with no coroutine frame of their own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "collectives.hpp"
#include "host_reduce.hpp"
#include "pieces.hpp"
#include "shm_arena.hpp"

namespace collx::detail::arena_steps {

// Whether an output of `output_bytes` is written with streaming stores; how slots are copied out
// of a ring into such an output.
bool streams_output(std::size_t output_bytes);
kernels::CopyFn copy_for_output(std::size_t output_bytes);

// The ring slots that `bytes` fill, `slot` bytes each but the last: slot k holds
// [offset(k), offset(k) + length(k)).
struct SlotCut {
  std::size_t bytes = 0;
  std::size_t slot = 1;
  std::size_t count() const { return (bytes + slot - 1) / slot; }
  std::size_t offset(std::size_t k) const { return k * slot; }
  std::size_t length(std::size_t k) const { return std::min(slot, bytes - k * slot); }
};

// Where a reader finds the `bytes` of slot `sequence` of `producer`'s ring, published with its
// bytes in the slot (not as a pointer): in its descriptor line where they are there too
// (fill_slot, of that length), else in the slot.
const std::byte* slot_bytes(SharedArena& arena, int producer, std::uint64_t sequence,
                            std::size_t bytes);
// Copies those bytes to `target`.
void copy_out_of_slot(SharedArena& arena, int producer, std::uint64_t sequence, std::byte* target,
                      std::size_t bytes, kernels::CopyFn copy);

// Marks slot `sequence` of this rank's ring filled, clearing a pointer an earlier
// publish_direct left (only then: an unchanged line stays in the readers' caches);
// `inline_length` (0: none) of its bytes are in its descriptor line as well (fill_slot).
void publish_filled(SharedArena& arena, int me, std::uint64_t sequence,
                    std::size_t inline_length = 0);

// Publishes slot `sequence` of this rank's ring: `bytes` from `source`, with the stores its
// RingStores choose; with `also`, to `also` as well (the allgather's own block), block by block
// so the second copy reads from L1 (streaming copies are not cut up).
void fill_slot(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* source,
               std::size_t bytes, std::byte* also, bool also_streams);

// Copies slot `sequence` of `producer`'s ring to `target` once published: from the ring slot, or
// from the producer's memory where it published a pointer (`direct` then says so).
void take_slot(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
               std::byte* target, std::size_t bytes, kernels::CopyFn copy, bool* direct);

// Whether blocks of `block` bytes go as pointers, where every rank sees it alike: false without
// direct reads, COLLX_SHM_DIRECT's value where set, true in the direct window; else nullopt.
std::optional<bool> direct_by_setting(const SharedArena& arena, std::size_t block);

// Whether a broadcast of `bytes` goes as pointers (broadcast_shared_memory): the same on every
// rank (the call's size, the arena's setting).
bool broadcast_goes_directly(const SharedArena& arena, std::size_t bytes);

// Whether a gather or scatter whose largest block is `largest_block` bytes goes as pointers
// (rooted_shared_memory): the same on every rank (every rank knows every block's length).
bool rooted_goes_directly(const SharedArena& arena, std::size_t largest_block);

// Copies `bytes` at `address` in `producer`'s memory to `target` (read_direct), or throws naming
// the producer.
void read_directly(Operation& op, SharedArena& arena, int producer, std::byte* target,
                   std::uint64_t address, std::size_t bytes);
// Copies `bytes` from `source` to `address` in `peer`'s memory (write_direct), or throws naming
// the peer.
void write_directly(Operation& op, SharedArena& arena, int peer, std::uint64_t address,
                    const std::byte* source, std::size_t bytes);

// Whether this rank hands its allgather block of `block` bytes (of `output` in all) to the
// readers as a pointer this time.
bool hand_over_directly(SharedArena& arena, int me, std::size_t block, std::size_t output);

// Where `producer`'s ring stood before this call: this rank's published count where it is the
// producer, else what this rank has consumed of it (the same value, see shm_arena.hpp).
inline std::uint64_t ring_base(SharedArena& arena, int me, int producer) {
  return producer == me ? arena.published(me).load(std::memory_order_relaxed)
                        : arena.consumed(me, producer).load(std::memory_order_relaxed);
}
// ring_base of every rank's ring, by rank.
std::vector<std::uint64_t> ring_bases(Operation& op, SharedArena& arena);

// Copies this rank's pieces of round `round` of every other rank's block from `send` into its
// ring slot `sequence` (block j's piece at j * piece elements) and publishes it; the entry must
// be free (room_for).
void fill_pieces(SharedArena& arena, int me, std::uint64_t sequence, const std::byte* send,
                 std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                 std::size_t elem);

// Whether any rank may hand over the pieces of a call of `bytes` as pointers: the same on every
// rank, so a reader knows before any arrives whether it needs room for pieces read directly.
bool pieces_may_go_directly(const SharedArena& arena, std::size_t bytes);

// Whether this rank hands its block reduction's pieces over as pointers this call: as
// COLLX_SHM_DIRECT says, else while the ring's plain stores are slow and no trial is due. Each
// rank decides alone: a reader looks at each slot's descriptor.
bool pieces_go_directly(SharedArena& arena, int me, std::size_t bytes);

// Reduces this rank's piece of round `round` into `target` from its own input and the others'
// ring slots `base[j] + slot_step`, in rank order, handing each slot back once read. `scratch`
// (3 pieces) takes pieces handed over as pointers and, in place, a copy of `target`. With
// `also`, the last step copies each few KiB of `target` there right after reducing them, while
// they are in the core's first-level cache (an allreduce's reduced piece, in its ring slot for
// the others and in its output).
struct CopyOfTarget {
  std::byte* to = nullptr;
  kernels::CopyFn copy = nullptr;
};
Task reduce_own_piece(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                      std::uint64_t slot_step, const std::byte* send,
                      std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                      const Reduction& reduction, std::byte* target, std::byte* scratch,
                      CopyOfTarget also = {});

// Copies every other rank's reduced piece of round `round` (slot `base[j] + slot_step`) into
// `recv`, from the next rank on so that the ranks do not all read one producer at once.
Task take_reduced_pieces(Operation& op, SharedArena& arena, std::span<const std::uint64_t> base,
                         std::uint64_t slot_step, std::byte* recv,
                         std::span<const std::size_t> offsets, std::size_t round, std::size_t piece,
                         std::size_t elem, kernels::CopyFn copy);

// Met once every other rank has copied out slot `sequence - slots` of `producer`'s ring.
inline ConsumedByAll room_for(SharedArena& arena, int producer, std::uint64_t sequence) {
  const auto ring = static_cast<std::uint64_t>(arena.slots());
  return {arena, producer, sequence < ring ? 0 : sequence + 1 - ring, "ring room from"};
}

// co_await publish(...): fill_slot once the entry is free (an awaiter, no coroutine frame).
inline auto publish(Operation& op, SharedArena& arena, std::uint64_t sequence,
                    const std::byte* source, std::size_t bytes, std::byte* also = nullptr,
                    bool also_streams = false) {
  const int me = op.rank();
  return op.until(room_for(arena, me, sequence),
                  [&arena, me, sequence, source, bytes, also, also_streams] {
                    fill_slot(arena, me, sequence, source, bytes, also, also_streams);
                  });
}

// Publishes slot `sequence` of this rank's ring as a pointer, which readers copy from this
// process (SharedArena::read_direct); `source` must stay as it is until read_by_all.
inline auto publish_direct(Operation& op, SharedArena& arena, std::uint64_t sequence,
                           const std::byte* source, std::size_t bytes) {
  const int me = op.rank();
  return op.until(room_for(arena, me, sequence), [&arena, me, sequence, source, bytes] {
    SharedArena::SlotDescriptor& d = arena.descriptor(me, sequence);
    d.address.store(reinterpret_cast<std::uint64_t>(source), std::memory_order_relaxed);
    d.bytes.store(bytes, std::memory_order_relaxed);
    arena.mark_published(me, sequence);
  });
}

// Met once every other rank has taken slot `sequence` of this rank's ring.
inline ConsumedByAll read_by_all(Operation& op, SharedArena& arena, std::uint64_t sequence) {
  return {arena, op.rank(), sequence + 1, "a direct read by"};
}

// co_await take(...): take_slot once the slot is published.
inline auto take(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
                 std::byte* target, std::size_t bytes, kernels::CopyFn copy,
                 bool* direct = nullptr) {
  return op.until(SlotPublished(arena, producer, sequence, "a slot from"),
                  [&op, &arena, producer, sequence, target, bytes, copy, direct] {
                    take_slot(op, arena, producer, sequence, target, bytes, copy, direct);
                  });
}

}  // namespace collx::detail::arena_steps
