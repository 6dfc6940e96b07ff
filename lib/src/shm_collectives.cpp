// The shared-memory algorithms: broadcast and allgather through the communicator's
// SharedArena (shm_arena.hpp), for ranks on one node with host buffers.
//
// A producer cuts its bytes into pieces, copies each into the next entry of its ring and
// publishes it (a release store of its count); every other rank waits for the count, copies the
// piece out and says so in its own counter, which frees the ring entry once every reader has.
// All copies are memcpy, the producer's and the readers' run at the same time, and no byte goes
// through the MPI library.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "collectives.hpp"
#include "shm_arena.hpp"

namespace collx::detail {

namespace {

// Piece length for a payload of `bytes` (the same on every rank: they all see the same size).
// The pipeline costs about (bytes + piece) / bandwidth + pieces * sync: the best piece is near
// sqrt(bytes * sync * bandwidth), with sync * bandwidth about 16 KiB here (a fraction of a
// microsecond to see a counter move, tens of GB/s to copy), between 8 KiB and a ring entry.
std::size_t piece_bytes(const SharedArena& arena, std::size_t bytes) {
  constexpr double kSyncBytes = 16 << 10;
  const auto ideal = static_cast<std::size_t>(std::sqrt(static_cast<double>(bytes) * kSyncBytes));
  const std::size_t rounded = (ideal + 4095) / 4096 * 4096;
  return std::min(std::max<std::size_t>(rounded, 8 << 10), arena.chunk_bytes());
}

std::size_t pieces_of(std::size_t bytes, std::size_t piece) {
  return (bytes + piece - 1) / piece;
}

// Waits until every other rank has copied out chunk `sequence - chunks` of `producer`'s ring,
// so that the entry chunk `sequence` goes into is free.
Task wait_for_room(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence) {
  const auto ring = static_cast<std::uint64_t>(arena.chunks());
  if (sequence < ring) co_return;
  for (int reader = 0; reader < op.size(); ++reader) {
    if (reader == producer) continue;
    co_await op.until(arena.consumed(reader, producer), sequence + 1 - ring, reader,
                      "ring room from");
  }
}

// Publishes piece `sequence` of this rank's ring: `bytes` from `source`.
Task publish(Operation& op, SharedArena& arena, std::uint64_t sequence, const std::byte* source,
             std::size_t bytes) {
  const int me = op.rank();
  co_await wait_for_room(op, arena, me, sequence);
  std::memcpy(arena.chunk(me, sequence), source, bytes);
  arena.published(me).store(sequence + 1, std::memory_order_release);
}

// Copies piece `sequence` of `producer`'s ring to `target` once it is published.
Task take(Operation& op, SharedArena& arena, int producer, std::uint64_t sequence,
          std::byte* target, std::size_t bytes) {
  co_await op.until(arena.published(producer), sequence + 1, producer, "a chunk from");
  std::memcpy(target, arena.chunk(producer, sequence), bytes);
  arena.consumed(op.rank(), producer).store(sequence + 1, std::memory_order_release);
}

}  // namespace

bool shared_memory_usable(Operation& op) {
  const SharedArena* arena = op.transport().shared_arena();
  return arena != nullptr && arena->size() == op.size() && !op.device_memory();
}

Task broadcast_shared_memory(Operation& op, BroadcastArgs a) {
  const std::size_t bytes = a.count * a.element_size;
  if (bytes == 0 || op.size() == 1) co_return;
  SharedArena& arena = *op.transport().shared_arena();
  const std::size_t piece = piece_bytes(arena, bytes);
  const std::size_t n = pieces_of(bytes, piece);
  const int me = op.rank();
  // Every rank other than the root has consumed exactly what the root published so far.
  const std::uint64_t base = me == a.root
                                 ? arena.published(me).load(std::memory_order_relaxed)
                                 : arena.consumed(me, a.root).load(std::memory_order_relaxed);
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t offset = k * piece;
    const std::size_t length = std::min(piece, bytes - offset);
    if (me == a.root) {
      co_await publish(op, arena, base + k, a.buffer + offset, length);
    } else {
      co_await take(op, arena, a.root, base + k, a.buffer + offset, length);
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
  SharedArena& arena = *op.transport().shared_arena();
  const std::size_t piece = piece_bytes(arena, largest);
  const std::size_t rounds = pieces_of(largest, piece);
  const std::byte* own = a.send != nullptr ? a.send : block(me);
  const bool copy_own = own != block(me);
  // Where each producer's ring stood before this call (see shm_arena.hpp).
  std::vector<std::uint64_t> base(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    base[static_cast<std::size_t>(r)] = r == me
                                            ? arena.published(me).load(std::memory_order_relaxed)
                                            : arena.consumed(me, r).load(std::memory_order_relaxed);
  }
  // Round k: publish the own piece k, then take piece k of every other rank, starting with the
  // next rank so that the ranks do not all read one producer at once.
  for (std::size_t k = 0; k < rounds; ++k) {
    const std::size_t offset = k * piece;
    if (offset < block_bytes(me)) {
      const std::size_t length = std::min(piece, block_bytes(me) - offset);
      co_await publish(op, arena, base[static_cast<std::size_t>(me)] + k, own + offset, length);
      if (copy_own) std::memcpy(block(me) + offset, own + offset, length);
    }
    for (int step = 1; step < p; ++step) {
      const int r = (me + step) % p;
      if (offset >= block_bytes(r)) continue;
      const std::size_t length = std::min(piece, block_bytes(r) - offset);
      co_await take(op, arena, r, base[static_cast<std::size_t>(r)] + k, block(r) + offset, length);
    }
  }
}

}  // namespace collx::detail
