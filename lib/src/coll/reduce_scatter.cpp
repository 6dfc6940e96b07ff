// Reduce-scatter (equal or per-rank blocks): ring, recursive halving with the fold, butterfly,
// and the node-aware hierarchical form. Rank r ends with block r of the reduction.
#include <algorithm>
#include <array>
#include <bit>

#include "collectives.hpp"
#include "fold.hpp"
#include "pipeline.hpp"
#include "recursive.hpp"
#include "registry.hpp"
#include "ring.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;

// The block this rank keeps; when recv aliases send (in place) the result is built elsewhere
// and copied in at the end (finish), after every send from `send` is done.
struct Destination {
  ScratchBuffer staging;
  std::byte* target;
  std::size_t bytes;
  Destination(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks)
      : target(a.recv), bytes(blocks.length(op.rank()) * a.reduction.element_size) {
    const std::byte* send_end = a.send + blocks.count() * a.reduction.element_size;
    if (a.recv + bytes > a.send && a.recv < send_end && bytes > 0) {
      staging = op.scratch(bytes);
      target = staging.data();
    }
  }
  void finish(Operation& op, std::byte* recv) const {
    if (target != recv) op.copy(recv, target, bytes);
  }
};

// Nothing to exchange: one rank, whose block is its input (which recv may overlap), or no data.
bool trivial(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks) {
  const std::size_t elem = a.reduction.element_size;
  if (op.size() == 1) op.move(a.recv, a.send + blocks.offset(0) * elem, blocks.length(0) * elem);
  return op.size() == 1 || blocks.count() == 0;
}

Task reduce_scatter_ring(Operation& op, ReduceScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  if (trivial(op, a, blocks)) co_return;
  const Destination d(op, a, blocks);
  const int p = op.size();
  // Intermediate sums live in two block-sized buffers; the owned block is finished in place.
  ScratchBuffer partial = op.scratch(
      p > 2 ? ring_partial_bytes(blocks, a.reduction.element_size, op.segment_bytes()) : 0);
  co_await ring_stream(op, {.ring = {op.rank(), p, 0},
                            .layout = blocks,
                            .input = a.send,
                            .output = nullptr,
                            .partial = partial.data(),
                            .owned_output = d.target,
                            .reduction = &a.reduction,
                            .element_size = a.reduction.element_size,
                            .first_step = 0,
                            .end_step = p - 1,
                            .phases = a.phases});
  d.finish(op, a.recv);
}

// Recursive halving over the core ranks. far_first halves the buffer as it lies (first pairs
// p'/2 apart). near_first (the butterfly) first reorders the core blocks bit-reversed, so that
// the steps pair ranks 1, 2, 4, ... apart and the largest exchanges stay inside a node.
template <PairOrder kOrder>
Task reduce_scatter_halving(Operation& op, ReduceScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  if (trivial(op, a, blocks)) co_return;
  const Destination d(op, a, blocks);
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t elem = a.reduction.element_size;
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  const int partner = fold.fold_partner(rank);
  // Everything goes to the proxy to be reduced; only the folded rank's block comes back.
  const FoldMessages messages{&a.reduction, elem, a.phases, 1};
  if (role == patterns::FoldRole::folded) {
    co_await fold_out(op, messages, partner, a.send, blocks.count(), d.target, blocks.length(rank));
    d.finish(op, a.recv);
    co_return;
  }
  // The full-length accumulator: what this rank has reduced so far.
  ScratchBuffer accumulator = op.scratch(blocks.count() * elem);
  const std::byte* input = a.send;
  if (role == patterns::FoldRole::proxy) {
    co_await fold_in(op, messages, partner, accumulator.data(), a.send, blocks.count());
    input = accumulator.data();
  }
  const int core_size = fold.core_size();
  std::vector<std::size_t> core_offsets(static_cast<std::size_t>(core_size) + 1);
  const BlockLayout core_blocks = fold.core_layout(blocks, core_offsets);
  const int bits = patterns::log2_exact(core_size);
  // near_first: where position q (core block reverse_bits(q)) starts in the reordered buffer.
  std::vector<std::size_t> order_offsets;
  std::byte* reduced = accumulator.data();
  ScratchBuffer reordered;
  if constexpr (kOrder == PairOrder::near_first) {
    // The proxy's input is the accumulator: the reordered copy needs a buffer of its own.
    if (input == accumulator.data()) {
      reordered = op.scratch(blocks.count() * elem);
      reduced = reordered.data();
    }
    order_offsets.resize(static_cast<std::size_t>(core_size) + 1);
    std::size_t at = 0;
    for (int q = 0; q < core_size; ++q) {
      const int c = patterns::reverse_bits(q, bits);
      const std::size_t length = core_blocks.length(c);
      order_offsets[static_cast<std::size_t>(q)] = at;
      op.copy(reduced + at * elem, input + core_blocks.offset(c) * elem, length * elem);
      at += length;
    }
    order_offsets.back() = at;
    co_await halving_reduce_scatter(op, fold,
                                    BlockLayout(std::span<const std::size_t>(order_offsets)),
                                    reduced, reduced, a.reduction, a.phases, kOrder);
  } else {
    co_await halving_reduce_scatter(op, fold, core_blocks, input, reduced, a.reduction, a.phases);
  }
  // Rank r's block within its core rank's block, where the halving left that block.
  const auto block_of = [&](int r) {
    const int c = fold.core_rank(role == patterns::FoldRole::proxy && r == partner ? rank : r);
    const std::size_t start =
        order_offsets.empty()
            ? core_blocks.offset(c)
            : order_offsets[static_cast<std::size_t>(patterns::reverse_bits(c, bits))];
    return reduced + (start + blocks.offset(r) - core_blocks.offset(c)) * elem;
  };
  op.copy(d.target, block_of(rank), blocks.length(rank) * elem);
  if (role == patterns::FoldRole::proxy) {
    co_await fold_return(op, messages, partner, block_of(partner), blocks.length(partner));
  }
  d.finish(op, a.recv);
}

// The flat reduce-scatter across nodes (and where hierarchical does not split): two tag phases.
Algorithm flat_reduce_scatter(const Operation&, const ReduceScatterArgs& a) {
  return a.offsets.back() * a.reduction.element_size <= model::kFlatReduceScatterHalvingBytes
             ? Algorithm::recursive_halving
             : Algorithm::ring;
}

// How many node segments the hierarchical reduce_scatter of `bytes` runs in: pipelined only on
// many nodes (a power of two, host memory); 1 elsewhere.
int pipelined_segments(const Operation& op, std::size_t bytes, const patterns::NodeLayout& layout) {
  if (layout.nodes() < model::kManyNodes ||
      !std::has_single_bit(static_cast<unsigned>(layout.nodes())) || op.device_memory()) {
    return 1;
  }
  const std::size_t piece =
      std::max<std::size_t>(1, op.segment_bytes() / model::kManyNodesPieceDivisor *
                                   static_cast<std::size_t>(layout.max_ranks_per_node()));
  return static_cast<int>(std::clamp<std::size_t>(bytes / piece, 1, model::kMostNodeSegments));
}

// Hierarchical (as many ranks on every node, else flat): the input reordered local rank first,
// a node reduce-scatter leaves region i (the blocks of the ranks of local rank i) on local rank
// i, and those ranks reduce-scatter it across nodes, each keeping its own block. Pipelined on
// 2^L nodes: node segment c is piece c of every block; each runs the node reduce-scatter, then
// recursive halving of its region across nodes (AcrossNodes), its exchanges staggered.
Task reduce_scatter_hierarchical_in(Operation& op, ReduceScatterArgs a,
                                    const patterns::NodeLayout& layout, SharedArena* node_arena) {
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.reduction.element_size;
  const int nodes = layout.nodes();
  if (node_arena == nullptr && nodes >= model::kManyNodes &&
      !std::has_single_bit(static_cast<unsigned>(nodes))) {
    // The pipeline needs 2^L nodes; on other many-node counts the butterfly did better.
    co_await reduce_scatter_task(op, a, Algorithm::butterfly);
    co_return;
  }
  const auto [node_scatter, across] =
      a.phases.split({{"node reduce_scatter", 2}, {"across nodes", 2}});
  const int segments = pipelined_segments(op, blocks.count() * elem, layout);
  const int local = layout.local_rank(op.rank());
  const int v = layout.node_of(op.rank());
  const auto count = static_cast<std::size_t>(segments);
  const auto width = static_cast<std::size_t>(op.size()) + 1;
  const auto piece = [&](int r) { return BlockLayout{blocks.length(r), segments}; };
  // Node segment c, piece c of every block, local rank first: in[c]; within[c], this rank's
  // region of it (the pieces of the ranks of its local rank, by node); start[c]: where the node
  // segment starts in `work`, region[c]: where its region of this rank starts in `regions`.
  std::vector<LocalRankOrder> in(count);
  std::vector<std::vector<std::size_t>> within(count);
  std::vector<std::size_t> start(count + 1, 0);
  std::vector<std::size_t> region(count + 1, 0);
  // The input, node segment by node segment (afterwards a.send is not read again: a.recv may
  // alias it).
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  for (std::size_t c = 0; c < count; ++c) {
    const auto at = static_cast<int>(c);
    std::vector<std::size_t> pieces(width, 0);
    for (std::size_t r = 0; r + 1 < width; ++r)
      pieces[r + 1] = pieces[r] + piece(static_cast<int>(r)).length(at);
    in[c] = local_rank_order(layout, BlockLayout(pieces));
    within[c] = in[c].within(local);
    start[c + 1] = start[c] + in[c].at.back();
    region[c + 1] = region[c] + within[c].back();
    for (std::size_t i = 0; i + 1 < width; ++i) {
      const int r = in[c].order[i];
      op.copy(work.data() + (start[c] + in[c].at[i]) * elem,
              a.send + (blocks.offset(r) + piece(r).offset(at)) * elem, piece(r).length(at) * elem);
    }
  }
  ScratchBuffer regions = op.scratch(region[count] * elem);
  ScratchBuffer received = op.scratch(count > 1 ? region[count] * elem : 0);
  const Reduction partial = a.reduction.partial();
  const AcrossNodes across_nodes{op, layout.peers(local), v, nodes, across, &a.reduction};
  std::vector<std::array<Transfer, 2>> exchanges(count);
  const auto post = [&](std::size_t c, int e) {
    across_nodes.post(exchanges[c][0], exchanges[c][1], regions.data() + region[c] * elem,
                      within[c], received.data() + region[c] * elem, e);
  };
  const BlockLayout mine = piece(op.rank());
  const bool halving =
      count > 1 &&
      halving_inside_node(
          op, layout, blocks.count() * elem / (count * static_cast<std::size_t>(in[0].per_node)));
  const auto node_phase = [&](std::size_t c) -> Task {
    const std::vector<std::size_t> offsets = in[c].regions();
    {
      const Operation::Group group(op, layout.members(v), node_arena);
      const ReduceScatterArgs inside{work.data() + start[c] * elem,
                                     regions.data() + region[c] * elem, offsets, partial,
                                     node_scatter};
      co_await reduce_scatter_task(op, inside,
                                   node_arena != nullptr ? Algorithm::shared_memory
                                   : halving             ? Algorithm::butterfly
                                                         : Algorithm::ring);
    }
    if (count > 1) {
      post(c, 0);
      co_return;
    }
    const Operation::Group group(op, layout.peers(local));
    const ReduceScatterArgs flat{regions.data(), a.recv, within[0], a.reduction, across};
    co_await reduce_scatter_task(op, flat, flat_reduce_scatter(op, flat));
  };
  const auto exchange = [&](std::size_t c, int e) -> Task {
    co_await op.wait(exchanges[c][0], exchanges[c][1]);
    across_nodes.combine(regions.data() + region[c] * elem, within[c],
                         received.data() + region[c] * elem, e - 1);
    if (e < across_nodes.steps()) {
      post(c, e);
    } else {
      op.copy(a.recv + mine.offset(static_cast<int>(c)) * elem,
              regions.data() + (region[c] + within[c][static_cast<std::size_t>(v)]) * elem,
              mine.length(static_cast<int>(c)) * elem);
    }
  };
  co_await staggered(count, count > 1 ? across_nodes.steps() : 0, node_phase, exchange);
}

}  // namespace

std::span<const AlgorithmRow> reduce_scatter_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(reduce_scatter, ring, reduce_scatter_ring, 2),
      COLLX_ROW(reduce_scatter, recursive_halving, reduce_scatter_halving<PairOrder::far_first>, 2),
      COLLX_ROW(reduce_scatter, butterfly, reduce_scatter_halving<PairOrder::near_first>, 2),
      COLLX_ROW(reduce_scatter, shared_memory, reduce_scatter_shared_memory, 2, Algorithm::ring),
      COLLX_ROW(reduce_scatter, hierarchical,
                (with_node_arena<Collective::reduce_scatter, reduce_scatter_hierarchical_in,
                                 flat_reduce_scatter, true>),
                4),
  };
  return rows;
}

}  // namespace collx::detail
