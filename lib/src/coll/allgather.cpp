// Allgather: ring, recursive doubling (with the fold), Bruck and the node-aware hierarchical
// allgather. Block r (of any length, at offsets[r]) comes from rank r.
#include <bit>

#include "bruck.hpp"
#include "collectives.hpp"
#include "fold.hpp"
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
    // One exchange, unsegmented; the own block is copied while the peer reads it.
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
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  const int partner = fold.fold_partner(rank);
  // A folded rank's block goes to its proxy as it is; the whole output comes back on phase 1.
  const FoldMessages messages{nullptr, a.element_size, a.phases, 1};
  auto block_of = [&](int r) { return a.recv + blocks.offset(r) * a.element_size; };
  if (role == patterns::FoldRole::folded) {
    co_await fold_out(op, messages, partner, block_of(rank), blocks.length(rank), a.recv,
                      blocks.count());
    co_return;
  }
  if (role == patterns::FoldRole::proxy) {
    co_await fold_in(op, messages, partner, block_of(partner), nullptr, blocks.length(partner));
  }
  std::vector<std::size_t> core_offsets(static_cast<std::size_t>(fold.core_size()) + 1);
  const BlockLayout core_blocks = fold.core_layout(blocks, core_offsets);
  co_await doubling_allgather(op, fold, core_blocks, a.recv, a.element_size, a.phases[0]);
  if (role == patterns::FoldRole::proxy) {
    co_await fold_return(op, messages, partner, a.recv, blocks.count());
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
  std::vector<std::size_t> rotated_offsets(static_cast<std::size_t>(p) + 1);
  const BlockLayout rotated = patterns::bruck_rotated_layout(rank, blocks, rotated_offsets);
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  const std::byte* own = a.send != nullptr ? a.send : a.recv + blocks.offset(rank) * elem;
  op.copy(work.data(), own, blocks.length(rank) * elem);
  for (int distance = 1; distance < p; distance *= 2) {
    const auto step = patterns::bruck_allgather_step(rank, p, distance);
    Transfer send;
    Transfer recv;
    op.recv(recv, work.data() + rotated.offset(distance) * elem,
            rotated.length(distance, step.blocks) * elem, step.recv_from, a.phases[0]);
    op.send(send, work.data(), rotated.length(0, step.blocks) * elem, step.send_to, a.phases[0]);
    co_await op.wait(send, recv);
  }
  for (int i = 0; i < p; ++i) {
    const int owner = patterns::bruck_block_at(rank, i, p);
    op.copy(a.recv + blocks.offset(owner) * elem, work.data() + rotated.offset(i) * elem,
            blocks.length(owner) * elem);
  }
}

// The flat allgather across nodes (and where hierarchical does not split): two tag phases.
Algorithm flat_allgather(const Operation& op, const AllgatherArgs& a) {
  if (std::has_single_bit(static_cast<unsigned>(op.size()))) return Algorithm::recursive_doubling;
  return a.offsets.back() * a.element_size <= model::kFlatAllgatherBruckBytes ? Algorithm::bruck
                                                                              : Algorithm::ring;
}

// Hierarchical (as many ranks on every node, else flat): the ranks of local rank i allgather
// across nodes into region i of a buffer laid out local rank first, a node allgather assembles
// the regions, and every rank copies the blocks to their places.
Task allgather_hierarchical_in(Operation& op, AllgatherArgs a, const patterns::NodeLayout& layout,
                               SharedArena* node_arena) {
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.element_size;
  const int rank = op.rank();
  const int local = layout.local_rank(rank);
  const LocalRankOrder order = local_rank_order(layout, blocks);
  const std::vector<std::size_t> regions = order.regions();
  const std::vector<std::size_t> within = order.within(local);
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  std::byte* const region = work.data() + regions[static_cast<std::size_t>(local)] * elem;
  const std::byte* own = a.send != nullptr ? a.send : a.recv + blocks.offset(rank) * elem;
  const auto [across_nodes, node_gather] =
      a.phases.split({{"across nodes", 2}, {"node allgather", 2}});
  {
    const Operation::Group group(op, layout.peers(local));
    const AllgatherArgs across{own, region, within, elem, across_nodes};
    co_await allgather_task(op, across, flat_allgather(op, across));
  }
  {
    const Operation::Group group(op, layout.members(layout.node_of(rank)), node_arena);
    const AllgatherArgs inside{nullptr, work.data(), regions, elem, node_gather};
    co_await allgather_task(op, inside,
                            node_arena != nullptr ? Algorithm::shared_memory : Algorithm::ring);
  }
  for (std::size_t i = 0; i < order.order.size(); ++i) {
    const int r = order.order[i];
    op.copy(a.recv + blocks.offset(r) * elem, work.data() + order.at[i] * elem,
            blocks.length(r) * elem);
  }
}

}  // namespace

LocalRankOrder local_rank_order(const patterns::NodeLayout& layout,
                                const patterns::BlockLayout& blocks) {
  LocalRankOrder o;
  o.order = layout.by_local_rank();
  o.nodes = layout.nodes();
  o.per_node = layout.max_ranks_per_node();
  o.at.assign(o.order.size() + 1, 0);
  for (std::size_t i = 0; i < o.order.size(); ++i)
    o.at[i + 1] = o.at[i] + blocks.length(o.order[i]);
  return o;
}

std::vector<std::size_t> LocalRankOrder::regions() const {
  std::vector<std::size_t> out(static_cast<std::size_t>(per_node) + 1);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = at[i * static_cast<std::size_t>(nodes)];
  return out;
}

std::vector<std::size_t> LocalRankOrder::within(int local) const {
  const std::size_t first = static_cast<std::size_t>(local) * static_cast<std::size_t>(nodes);
  std::vector<std::size_t> out(static_cast<std::size_t>(nodes) + 1);
  for (std::size_t j = 0; j < out.size(); ++j)
    out[j] = at[first + j] - at[first];
  return out;
}

std::span<const AlgorithmRow> allgather_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(allgather, ring, allgather_ring, 2),
      COLLX_ROW(allgather, recursive_doubling, allgather_recursive_doubling, 2),
      COLLX_ROW(allgather, bruck, allgather_bruck, 1),
      COLLX_ROW(allgather, shared_memory, allgather_shared_memory, 2, Algorithm::ring),
      COLLX_ROW(
          allgather, hierarchical,
          (with_node_arena<Collective::allgather, allgather_hierarchical_in, flat_allgather, true>),
          4),
  };
  return rows;
}

}  // namespace collx::detail
