// Allgather: ring, recursive doubling (with the non-power-of-two fold) and Bruck. Block r of the
// output comes from rank r; blocks may differ in length (the offsets say where each starts).
#include <cstring>

#include "collectives.hpp"
#include "collx/error.hpp"
#include "pipeline.hpp"
#include "recursive.hpp"
#include "registry.hpp"
#include "ring.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;

// The rank's own block into its place in the output, unless it is already there (in place).
void place_own_block(Operation& op, const AllgatherArgs& a, const BlockLayout& blocks) {
  std::byte* own = a.recv + blocks.offset(op.rank()) * a.element_size;
  if (a.send != nullptr && a.send != own) {
    op.copy(own, a.send, blocks.length(op.rank()) * a.element_size);
  }
}

Task allgather_ring(Operation& op, AllgatherArgs a) {
  const BlockLayout blocks(a.offsets);
  const int p = op.size();
  if (p == 2) {
    // One exchange, nothing to forward: unsegmented, sent straight from the input, and the own
    // block copied while the peer already reads it (the transfer and the copy overlap).
    const int peer = 1 - op.rank();
    const std::size_t elem = a.element_size;
    const std::byte* own = a.send != nullptr ? a.send : a.recv + blocks.offset(op.rank()) * elem;
    Transfer send;
    Transfer recv;
    op.recv(recv, a.recv + blocks.offset(peer) * elem, blocks.length(peer) * elem, peer,
            a.phases[0]);
    op.send(send, own, blocks.length(op.rank()) * elem, peer, a.phases[0]);
    place_own_block(op, a, blocks);
    co_await op.wait(send, recv);
    co_return;
  }
  place_own_block(op, a, blocks);
  co_await ring_stream(op, {.ring = {op.rank(), p, 0},
                            .layout = blocks,
                            .input = a.recv,
                            .output = a.recv,
                            .element_size = a.element_size,
                            .first_step = p - 1,
                            .end_step = 2 * (p - 1),
                            .phases = a.phases});
}

Task allgather_recursive_doubling(Operation& op, AllgatherArgs a) {
  const BlockLayout blocks(a.offsets);
  place_own_block(op, a, blocks);
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t elem = a.element_size;
  const std::size_t total = blocks.count() * elem;
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  auto block_bytes = [&](int r) { return blocks.length(r) * elem; };
  if (role == patterns::FoldRole::folded) {
    const int proxy = fold.fold_partner(rank);
    Transfer send;
    Transfer recv;
    op.send(send, a.recv + blocks.offset(rank) * elem, block_bytes(rank), proxy, a.phases[0]);
    co_await op.wait(send);
    op.recv(recv, a.recv, total, proxy, a.phases[1]);
    co_await op.wait(recv);
    co_return;
  }
  if (role == patterns::FoldRole::proxy) {
    const int folded = fold.fold_partner(rank);
    Transfer recv;
    op.recv(recv, a.recv + blocks.offset(folded) * elem, block_bytes(folded), folded, a.phases[0]);
    co_await op.wait(recv);
  }
  // Core rank c holds the blocks of ranks [first_rank_of_core(c), first_rank_of_core(c + 1)):
  // contiguous, so every window of core ranks is one contiguous range of the output.
  const int core_size = fold.core_size();
  std::vector<std::size_t> core_offsets(static_cast<std::size_t>(core_size) + 1);
  for (int c = 0; c < core_size; ++c) {
    core_offsets[static_cast<std::size_t>(c)] = blocks.offset(fold.first_rank_of_core(c));
  }
  core_offsets.back() = blocks.count();
  const BlockLayout core_blocks(core_offsets);
  const int core = fold.core_rank(rank);
  for (int s = 0; s < patterns::log2_exact(core_size); ++s) {
    const auto step = patterns::doubling_gather_step(core, s);
    const int peer = fold.rank_of_core(step.peer_core);
    Transfer send;
    Transfer recv;
    op.recv(recv, a.recv + core_blocks.offset(step.recv_first) * elem,
            core_blocks.length(step.recv_first, step.blocks) * elem, peer, a.phases[0]);
    op.send(send, a.recv + core_blocks.offset(step.send_first) * elem,
            core_blocks.length(step.send_first, step.blocks) * elem, peer, a.phases[0]);
    co_await op.wait(send, recv);
  }
  if (role == patterns::FoldRole::proxy) {
    Transfer send;
    op.send(send, a.recv, total, fold.fold_partner(rank), a.phases[1]);
    co_await op.wait(send);
  }
}

// Bruck: works on a copy rotated so this rank's block is first; in step k (distance 2^k) the
// first min(2^k, p - 2^k) blocks go to rank - 2^k and as many arrive from rank + 2^k. Every
// rank count takes ceil(log2 p) steps.
Task allgather_bruck(Operation& op, AllgatherArgs a) {
  const BlockLayout blocks(a.offsets);
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t elem = a.element_size;
  if (p == 1) {
    place_own_block(op, a, blocks);
    co_return;
  }
  // rotated[i] = offset of rank (rank + i)'s block in the rotated copy.
  std::vector<std::size_t> rotated(static_cast<std::size_t>(p) + 1, 0);
  for (int i = 0; i < p; ++i) {
    rotated[static_cast<std::size_t>(i) + 1] =
        rotated[static_cast<std::size_t>(i)] + blocks.length(patterns::wrap(rank + i, p));
  }
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  const std::byte* own = a.send != nullptr ? a.send : a.recv + blocks.offset(rank) * elem;
  op.copy(work.data(), own, blocks.length(rank) * elem);
  for (int distance = 1; distance < p; distance *= 2) {
    const int n = std::min(distance, p - distance);
    Transfer send;
    Transfer recv;
    op.recv(recv, work.data() + rotated[static_cast<std::size_t>(distance)] * elem,
            (rotated[static_cast<std::size_t>(distance + n)] -
             rotated[static_cast<std::size_t>(distance)]) *
                elem,
            patterns::wrap(rank + distance, p), a.phases[0]);
    op.send(send, work.data(), rotated[static_cast<std::size_t>(n)] * elem,
            patterns::wrap(rank - distance, p), a.phases[0]);
    co_await op.wait(send, recv);
  }
  for (int i = 0; i < p; ++i) {
    const int owner = patterns::wrap(rank + i, p);
    op.copy(a.recv + blocks.offset(owner) * elem,
            work.data() + rotated[static_cast<std::size_t>(i)] * elem, blocks.length(owner) * elem);
  }
}

}  // namespace

std::span<const AlgorithmRow> allgather_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::allgather>(Algorithm::ring, allgather_ring, model::allgather_ring),
      row<Collective::allgather>(Algorithm::recursive_doubling, allgather_recursive_doubling,
                                 model::allgather_recursive_doubling),
      row<Collective::allgather>(Algorithm::bruck, allgather_bruck, model::allgather_bruck),
      row<Collective::allgather>(Algorithm::shared_memory, allgather_shared_memory,
                                 model::allgather_shared_memory, nullptr, Algorithm::ring),
  };
  return rows;
}

}  // namespace collx::detail
