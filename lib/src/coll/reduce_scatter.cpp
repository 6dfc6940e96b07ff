// Reduce-scatter (equal or per-rank blocks): ring, recursive halving with the fold, butterfly,
// and the node-aware hierarchical form. Rank r ends with block r of the reduction.
#include <algorithm>
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
// and copied in at the end, after every send from `send` is done.
struct Destination {
  ScratchBuffer staging;
  std::byte* target = nullptr;
};
Destination destination(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks) {
  const std::size_t bytes = blocks.length(op.rank()) * a.reduction.element_size;
  const std::byte* send_end = a.send + blocks.count() * a.reduction.element_size;
  Destination d{{}, a.recv};
  if (a.recv + bytes > a.send && a.recv < send_end && bytes > 0) {
    d.staging = op.scratch(bytes);
    d.target = d.staging.data();
  }
  return d;
}

void finish(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks,
            const Destination& d) {
  if (d.target != a.recv) {
    op.copy(a.recv, d.target, blocks.length(op.rank()) * a.reduction.element_size);
  }
}

// One rank: its block is its input.
void copy_own_block(Operation& op, const ReduceScatterArgs& a, const BlockLayout& blocks,
                    const Destination& d) {
  const std::size_t elem = a.reduction.element_size;
  op.move(d.target, a.send + blocks.offset(op.rank()) * elem, blocks.length(op.rank()) * elem);
}

Task reduce_scatter_ring(Operation& op, ReduceScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  Destination d = destination(op, a, blocks);
  const int p = op.size();
  if (p == 1) {
    copy_own_block(op, a, blocks, d);
  } else if (blocks.count() > 0) {
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
  }
  finish(op, a, blocks, d);
}

// Recursive halving over the core ranks. far_first halves the buffer as it lies (first pairs
// p'/2 apart). near_first (the butterfly) first reorders the core blocks bit-reversed, so that
// the steps pair ranks 1, 2, 4, ... apart and the largest exchanges stay inside a node.
Task reduce_scatter_halving(Operation& op, ReduceScatterArgs a, PairOrder order) {
  const BlockLayout blocks(a.offsets);
  Destination d = destination(op, a, blocks);
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t elem = a.reduction.element_size;
  if (p == 1 || blocks.count() == 0) {
    if (p == 1) copy_own_block(op, a, blocks, d);
    finish(op, a, blocks, d);
    co_return;
  }
  const patterns::Fold fold{p};
  const patterns::FoldRole role = fold.role(rank);
  const int partner = fold.fold_partner(rank);
  // Everything goes to the proxy to be reduced; only the folded rank's block comes back.
  const FoldMessages messages{&a.reduction, elem, a.phases, 1};
  if (role == patterns::FoldRole::folded) {
    co_await fold_out(op, messages, partner, a.send, blocks.count(), d.target, blocks.length(rank));
    finish(op, a, blocks, d);
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
  if (order == PairOrder::near_first) {
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
                                    reduced, reduced, a.reduction, a.phases, order);
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
  finish(op, a, blocks, d);
}

Task reduce_scatter_recursive_halving(Operation& op, ReduceScatterArgs a) {
  return reduce_scatter_halving(op, std::move(a), PairOrder::far_first);
}

Task reduce_scatter_butterfly(Operation& op, ReduceScatterArgs a) {
  return reduce_scatter_halving(op, std::move(a), PairOrder::near_first);
}

// The flat reduce-scatter across nodes (and where hierarchical does not split): two tag phases.
Algorithm flat_reduce_scatter(std::size_t bytes) {
  return bytes <= model::kFlatReduceScatterHalvingBytes ? Algorithm::recursive_halving
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
  return static_cast<int>(
      std::min<std::size_t>(bytes / piece, static_cast<std::size_t>(model::kMostNodeSegments)));
}

// Hierarchical, pipelined (2^L nodes): node segment c is piece c of every block, laid out local
// rank first. Each runs the node reduce-scatter, then recursive halving of region i across the
// ranks of local rank i; segment c posts exchange e at iteration c + e, so exchanges of earlier
// segments move while the node works on the next.
Task reduce_scatter_hierarchical_pipelined(Operation& op, const ReduceScatterArgs& a,
                                           const patterns::NodeLayout& layout,
                                           const LocalRankOrder& order, SharedArena* node_arena,
                                           int segments, Phases node_scatter, Phases across) {
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.reduction.element_size;
  const int p = op.size();
  const int nodes = layout.nodes();
  const int k = order.per_node;
  const int local = layout.local_rank(op.rank());
  const int v = layout.node_of(op.rank());
  const int steps = std::countr_zero(static_cast<unsigned>(nodes));
  const auto count = static_cast<std::size_t>(segments);
  const auto width = static_cast<std::size_t>(p) + 1;
  const auto piece = [&](int r) { return BlockLayout{blocks.length(r), segments}; };
  // at[c * width + i]: where position i's piece c starts within node segment c; start[c]: where
  // node segment c starts in `work`, region[c]: where its region of this rank starts in `regions`.
  std::vector<std::size_t> at(count * width, 0);
  std::vector<std::size_t> start(count + 1, 0);
  std::vector<std::size_t> region(count + 1, 0);
  const auto first = static_cast<std::size_t>(local) * static_cast<std::size_t>(nodes);
  for (std::size_t c = 0; c < count; ++c) {
    std::size_t* row = at.data() + c * width;
    for (std::size_t i = 0; i + 1 < width; ++i)
      row[i + 1] = row[i] + piece(order.order[i]).length(static_cast<int>(c));
    start[c + 1] = start[c] + row[width - 1];
    region[c + 1] = region[c] + row[first + static_cast<std::size_t>(nodes)] - row[first];
  }
  // The input, node segment by node segment, local rank first (a.send is not read again).
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  for (std::size_t c = 0; c < count; ++c) {
    for (std::size_t i = 0; i + 1 < width; ++i) {
      const int r = order.order[i];
      const BlockLayout pieces = piece(r);
      op.copy(work.data() + (start[c] + at[c * width + i]) * elem,
              a.send + (blocks.offset(r) + pieces.offset(static_cast<int>(c))) * elem,
              pieces.length(static_cast<int>(c)) * elem);
    }
  }
  ScratchBuffer regions = op.scratch(region[count] * elem);
  ScratchBuffer received = op.scratch(region[count] * elem);
  const Reduction partial = a.reduction.partial();
  struct Exchange {
    Transfer send, recv;
  };
  std::vector<Exchange> exchanges(count);
  // Block j of node segment c's region (the piece of the rank of local rank `local` on node j).
  const auto within = [&](std::size_t c, int j) {
    return at[c * width + first + static_cast<std::size_t>(j)] - at[c * width + first];
  };
  const auto halves = [&](std::size_t c, int j) {
    const patterns::HalvingStep step = patterns::halving_step(v, nodes, j);
    struct Halves {
      patterns::HalvingStep step;
      std::size_t keep, keep_count, send, send_count;
    };
    const std::size_t keep = within(c, step.keep_first);
    const std::size_t send = within(c, step.send_first);
    return Halves{step, keep, within(c, step.keep_first + step.blocks) - keep, send,
                  within(c, step.send_first + step.blocks) - send};
  };
  const auto post = [&](std::size_t c, int j) {
    const Operation::Group group(op, layout.peers(local));
    const auto h = halves(c, j);
    std::byte* mine = regions.data() + region[c] * elem;
    op.recv(exchanges[c].recv, received.data() + (region[c] + h.keep) * elem, h.keep_count * elem,
            h.step.peer_core, across[0]);
    op.send(exchanges[c].send, mine + h.send * elem, h.send_count * elem, h.step.peer_core,
            across[0]);
  };
  const auto combine = [&](std::size_t c, int j) {
    const auto h = halves(c, j);
    std::byte* own = regions.data() + (region[c] + h.keep) * elem;
    const std::byte* theirs = received.data() + (region[c] + h.keep) * elem;
    a.reduction.combine(own, h.step.lower ? own : theirs, h.step.lower ? theirs : own, h.keep_count,
                        j == steps - 1);
  };
  const BlockLayout mine = piece(op.rank());
  const bool halving = halving_inside_node(
      op, layout, blocks.count() * elem / (count * static_cast<std::size_t>(k)));
  for (std::size_t t = 0; t < count + static_cast<std::size_t>(steps); ++t) {
    if (t < count) {
      std::vector<std::size_t> offsets(static_cast<std::size_t>(k) + 1);
      for (std::size_t i = 0; i < offsets.size(); ++i)
        offsets[i] = at[t * width + i * static_cast<std::size_t>(nodes)];
      {
        const Operation::Group group(op, layout.members(v), node_arena);
        const ReduceScatterArgs inside{work.data() + start[t] * elem,
                                       regions.data() + region[t] * elem, offsets, partial,
                                       node_scatter};
        co_await reduce_scatter_task(op, inside,
                                     node_arena != nullptr ? Algorithm::shared_memory
                                     : halving             ? Algorithm::butterfly
                                                           : Algorithm::ring);
      }
      post(t, 0);
    }
    for (int e = 1; e <= steps; ++e) {
      if (t < static_cast<std::size_t>(e) || t - static_cast<std::size_t>(e) >= count) continue;
      const std::size_t c = t - static_cast<std::size_t>(e);
      co_await op.wait(exchanges[c].send, exchanges[c].recv);
      combine(c, e - 1);
      if (e < steps) {
        post(c, e);
      } else {
        op.copy(a.recv + mine.offset(static_cast<int>(c)) * elem,
                regions.data() + (region[c] + within(c, v)) * elem,
                mine.length(static_cast<int>(c)) * elem);
      }
    }
  }
}

// Hierarchical (as many ranks on every node, else flat): the input reordered local rank first,
// a node reduce-scatter leaves region i (the blocks of the ranks of local rank i) on local rank
// i, and those ranks reduce-scatter it across nodes, each keeping its own block.
Task reduce_scatter_hierarchical_in(Operation& op, ReduceScatterArgs a, SharedArena* node_arena) {
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.reduction.element_size;
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr || !layout->uniform()) {
    co_await reduce_scatter_task(op, a, flat_reduce_scatter(blocks.count() * elem));
    co_return;
  }
  const int local = layout->local_rank(op.rank());
  const LocalRankOrder order = local_rank_order(*layout, blocks);
  if (node_arena == nullptr && layout->nodes() >= model::kManyNodes &&
      !std::has_single_bit(static_cast<unsigned>(layout->nodes()))) {
    // The pipeline needs 2^L nodes; on other many-node counts the butterfly did better.
    co_await reduce_scatter_task(op, a, Algorithm::butterfly);
    co_return;
  }
  const auto [node_scatter, across_nodes] =
      a.phases.split({{"node reduce_scatter", 2}, {"across nodes", 2}});
  if (const int segments = pipelined_segments(op, blocks.count() * elem, *layout); segments > 1) {
    co_await reduce_scatter_hierarchical_pipelined(op, a, *layout, order, node_arena, segments,
                                                   node_scatter, across_nodes);
    co_return;
  }
  const std::vector<std::size_t> regions = order.regions();
  const std::vector<std::size_t> within = order.within(local);
  // The input, reordered (afterwards a.send is not read again: a.recv may alias it).
  ScratchBuffer work = op.scratch(blocks.count() * elem);
  for (std::size_t i = 0; i < order.order.size(); ++i) {
    const int r = order.order[i];
    op.copy(work.data() + order.at[i] * elem, a.send + blocks.offset(r) * elem,
            blocks.length(r) * elem);
  }
  ScratchBuffer region = op.scratch(within.back() * elem);
  const Reduction partial = a.reduction.partial();
  {
    const Operation::Group group(op, layout->members(layout->node_of(op.rank())), node_arena);
    const ReduceScatterArgs inside{work.data(), region.data(), regions, partial, node_scatter};
    co_await reduce_scatter_task(
        op, inside, node_arena != nullptr ? Algorithm::shared_memory : Algorithm::ring);
  }
  {
    const Operation::Group group(op, layout->peers(local));
    const ReduceScatterArgs across{region.data(), a.recv, within, a.reduction, across_nodes};
    co_await reduce_scatter_task(op, across, flat_reduce_scatter(within.back() * elem));
  }
}

Task reduce_scatter_hierarchical(Operation& op, ReduceScatterArgs a) {
  return with_node_arena<ReduceScatterArgs, reduce_scatter_hierarchical_in>(op, std::move(a));
}

}  // namespace

std::span<const AlgorithmRow> reduce_scatter_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::reduce_scatter>(Algorithm::ring, reduce_scatter_ring,
                                      model::reduce_scatter_ring, 2),
      row<Collective::reduce_scatter>(Algorithm::recursive_halving,
                                      reduce_scatter_recursive_halving,
                                      model::reduce_scatter_recursive_halving, 2),
      row<Collective::reduce_scatter>(Algorithm::butterfly, reduce_scatter_butterfly,
                                      model::reduce_scatter_butterfly, 2),
      row<Collective::reduce_scatter>(Algorithm::shared_memory, reduce_scatter_shared_memory,
                                      model::reduce_scatter_shared_memory, 2, Algorithm::ring),
      row<Collective::reduce_scatter>(Algorithm::hierarchical, reduce_scatter_hierarchical,
                                      model::reduce_scatter_hierarchical, 4),
  };
  return rows;
}

}  // namespace collx::detail
