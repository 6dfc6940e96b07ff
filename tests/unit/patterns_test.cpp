// The algorithms' patterns, executed symbolically for p = 1..64 without MPI: every message's
// two ends agree, every contribution reaches every rank exactly once.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "blocks.hpp"
#include "recursive.hpp"
#include "ring.hpp"
#include "tree.hpp"

namespace {

using namespace collx::patterns;
using Contributors = std::uint64_t;  // bit r: rank r's data is in there

Contributors all_of(int p) {
  return p == 64 ? ~Contributors{0} : (Contributors{1} << p) - 1;
}

// Adds `incoming` to `into`, failing if any contribution would be counted twice.
void merge(Contributors& into, Contributors incoming) {
  ASSERT_EQ(into & incoming, 0u) << "a contribution is combined twice";
  into |= incoming;
}

TEST(BlockLayout, CoversExactlyAndEvenly) {
  for (std::size_t count : {0u, 1u, 5u, 63u, 64u, 65u, 1000003u}) {
    for (int n = 1; n <= 64; ++n) {
      const BlockLayout layout{count, n};
      std::size_t total = 0;
      std::size_t smallest = count, largest = 0;
      for (int b = 0; b < n; ++b) {
        EXPECT_EQ(layout.offset(b), total);
        total += layout.length(b);
        smallest = std::min(smallest, layout.length(b));
        largest = std::max(largest, layout.length(b));
      }
      EXPECT_EQ(total, count);
      EXPECT_EQ(layout.offset(n), count);
      EXPECT_LE(largest - smallest, 1u);
      EXPECT_EQ(layout.length(0), largest);  // block 0 is a longest block
      if (n >= 2) {
        EXPECT_EQ(layout.length(0, 2), layout.length(0) + layout.length(1));
      }
    }
  }
}

// wrap's compare paths (within one size of [0, size)) and its division (further out) agree
// with the mathematical modulus.
TEST(Wrap, IsTheModulusInsideAndOutsideOneSizeOfTheRange) {
  for (int size = 1; size <= 9; ++size) {
    for (int value = -4 * size - 3; value <= 4 * size + 3; ++value) {
      const int expected = ((value % size) + size) % size;
      ASSERT_EQ(wrap(value, size), expected) << "value " << value << " size " << size;
    }
  }
  EXPECT_EQ(wrap(-2147483647, 7), ((-2147483647 % 7) + 7) % 7);
  EXPECT_EQ(wrap(2147483647, 7), 2147483647 % 7);
}

TEST(Segments, CountCoversTheBlock) {
  EXPECT_EQ(segment_count(0, 1024), 1);
  EXPECT_EQ(segment_count(1024, 1024), 1);
  EXPECT_EQ(segment_count(1025, 1024), 2);
  EXPECT_EQ(segment_count(1 << 20, 0), 1);
}

class PatternSizes : public ::testing::TestWithParam<int> {};

TEST_P(PatternSizes, RingAllreduceDeliversEveryContributionOnce) {
  const int p = GetParam();
  for (int shift : {0, 1}) {
    // blocks[r][b]: the contributors rank r holds for block b.
    std::vector<std::vector<Contributors>> blocks(p, std::vector<Contributors>(p, 0));
    for (int r = 0; r < p; ++r)
      blocks[r][RingPattern{r, p, shift}.send_block(0)] = Contributors{1} << r;
    for (int step = 0; step < 2 * (p - 1); ++step) {
      std::vector<std::vector<Contributors>> next = blocks;
      for (int r = 0; r < p; ++r) {
        const RingPattern me{r, p, shift};
        const RingPattern left{me.recv_peer(), p, shift};
        ASSERT_EQ(left.send_peer(), r);
        ASSERT_EQ(left.send_block(step), me.recv_block(step)) << "p=" << p << " step " << step;
        const int b = me.recv_block(step);
        const Contributors incoming = blocks[left.rank][b];
        if (me.is_reduce_step(step)) {
          // received + this rank's own input for the block
          Contributors value = incoming;
          merge(value, Contributors{1} << r);
          next[r][b] = value;
        } else {
          ASSERT_EQ(incoming, all_of(p)) << "allgather forwards only complete blocks";
          next[r][b] = incoming;
        }
        if (step + 1 == p - 1) {
          // after the last reduce-scatter step the owned block is complete
          EXPECT_EQ(me.recv_block(step), me.owned_block());
        }
      }
      blocks = next;
    }
    for (int r = 0; r < p; ++r) {
      for (int b = 0; b < p; ++b) {
        if (p > 1) {
          EXPECT_EQ(blocks[r][b], all_of(p)) << "rank " << r << " block " << b;
        }
      }
      EXPECT_EQ(RingPattern(r, p, shift).owned_block(), (r + shift) % p);
    }
  }
}

TEST_P(PatternSizes, FoldIsAConsistentRenumbering) {
  const int p = GetParam();
  const Fold fold{p};
  EXPECT_EQ(fold.core_size() & (fold.core_size() - 1), 0);
  EXPECT_LE(fold.core_size(), p);
  EXPECT_GT(2 * fold.core_size(), p);
  std::vector<int> seen(fold.core_size(), 0);
  int previous = -1;
  for (int r = 0; r < p; ++r) {
    const FoldRole role = fold.role(r);
    if (role == FoldRole::folded) {
      EXPECT_EQ(fold.core_rank(r), -1);
      EXPECT_EQ(fold.role(fold.fold_partner(r)), FoldRole::proxy);
      EXPECT_EQ(fold.fold_partner(fold.fold_partner(r)), r);
      continue;
    }
    const int c = fold.core_rank(r);
    ASSERT_GE(c, 0);
    ASSERT_LT(c, fold.core_size());
    EXPECT_GT(c, previous) << "core ranks keep the rank order";
    previous = c;
    EXPECT_EQ(fold.rank_of_core(c), r);
    ++seen[c];
  }
  for (int s : seen)
    EXPECT_EQ(s, 1);
}

TEST_P(PatternSizes, RecursiveDoublingDeliversEveryContributionOnce) {
  const int p = GetParam();
  const Fold fold{p};
  std::vector<Contributors> value(p);
  for (int r = 0; r < p; ++r)
    value[r] = Contributors{1} << r;
  for (int r = 0; r < p; ++r) {
    if (fold.role(r) == FoldRole::proxy) merge(value[r], value[fold.fold_partner(r)]);
  }
  const int steps = log2_exact(fold.core_size());
  for (int s = 0; s < steps; ++s) {
    std::vector<Contributors> next = value;
    for (int c = 0; c < fold.core_size(); ++c) {
      const DoublingStep me = doubling_step(c, s);
      const DoublingStep peer = doubling_step(me.peer_core, s);
      ASSERT_EQ(peer.peer_core, c);
      ASSERT_NE(peer.lower, me.lower);
      const int r = fold.rank_of_core(c);
      Contributors combined = value[r];
      merge(combined, value[fold.rank_of_core(me.peer_core)]);
      next[r] = combined;
    }
    value = next;
  }
  for (int r = 0; r < p; ++r) {
    if (fold.role(r) == FoldRole::folded) value[r] = value[fold.fold_partner(r)];
    EXPECT_EQ(value[r], all_of(p)) << "rank " << r;
  }
}

TEST_P(PatternSizes, RabenseifnerDeliversEveryContributionOnce) {
  const int p = GetParam();
  const Fold fold{p};
  const int n = fold.core_size();
  // blocks[r][b] over the core's n blocks
  std::vector<std::vector<Contributors>> blocks(p, std::vector<Contributors>(n, 0));
  for (int r = 0; r < p; ++r) {
    for (int b = 0; b < n; ++b)
      blocks[r][b] = Contributors{1} << r;
  }
  for (int r = 0; r < p; ++r) {
    if (fold.role(r) != FoldRole::proxy) continue;
    for (int b = 0; b < n; ++b)
      merge(blocks[r][b], blocks[fold.fold_partner(r)][b]);
  }
  const int steps = log2_exact(n);
  for (int s = 0; s < steps; ++s) {
    auto next = blocks;
    for (int c = 0; c < n; ++c) {
      const HalvingStep me = halving_step(c, n, s);
      const HalvingStep peer = halving_step(me.peer_core, n, s);
      ASSERT_EQ(peer.peer_core, c);
      ASSERT_EQ(peer.send_first, me.keep_first) << "the peer sends what this rank keeps";
      ASSERT_EQ(peer.blocks, me.blocks);
      ASSERT_NE(peer.lower, me.lower);
      const int r = fold.rank_of_core(c);
      const int pr = fold.rank_of_core(me.peer_core);
      for (int b = me.keep_first; b < me.keep_first + me.blocks; ++b) {
        Contributors combined = blocks[r][b];
        merge(combined, blocks[pr][b]);
        next[r][b] = combined;
      }
    }
    blocks = next;
  }
  for (int c = 0; c < n; ++c) {
    EXPECT_EQ(blocks[fold.rank_of_core(c)][c], all_of(p)) << "core " << c << " owns block " << c;
  }
  for (int s = 0; s < steps; ++s) {
    auto next = blocks;
    for (int c = 0; c < n; ++c) {
      const GatherStep me = doubling_gather_step(c, s);
      const GatherStep peer = doubling_gather_step(me.peer_core, s);
      ASSERT_EQ(peer.peer_core, c);
      ASSERT_EQ(peer.send_first, me.recv_first);
      ASSERT_EQ(peer.blocks, me.blocks);
      const int pr = fold.rank_of_core(me.peer_core);
      for (int b = me.recv_first; b < me.recv_first + me.blocks; ++b) {
        ASSERT_EQ(blocks[pr][b], all_of(p)) << "only complete blocks are gathered";
        next[fold.rank_of_core(c)][b] = blocks[pr][b];
      }
    }
    blocks = next;
  }
  for (int r = 0; r < p; ++r) {
    const int holder = fold.role(r) == FoldRole::folded ? fold.fold_partner(r) : r;
    for (int b = 0; b < n; ++b)
      EXPECT_EQ(blocks[holder][b], all_of(p)) << "rank " << r;
  }
}

// near_first (coll/fold.hpp): the same steps on bit-reversed core numbers. Every real core rank
// meets its neighbour c ^ 1 in the first (largest) halving step, and the allgather over the same
// numbering completes every block on every core rank.
TEST_P(PatternSizes, RabenseifnerNearFirstDeliversEveryContributionOnce) {
  const int p = GetParam();
  const Fold fold{p};
  const int n = fold.core_size();
  const int steps = log2_exact(n);
  for (int c = 0; c < n; ++c) {
    ASSERT_EQ(reverse_bits(reverse_bits(c, steps), steps), c);
    if (steps > 0) {
      const HalvingStep first = halving_step(reverse_bits(c, steps), n, 0);
      EXPECT_EQ(reverse_bits(first.peer_core, steps), c ^ 1) << "neighbours first";
    }
  }
  // held[c][b]: what real core rank c holds of block b (blocks in the ordered numbering).
  std::vector<std::vector<Contributors>> held(n, std::vector<Contributors>(n, 0));
  for (int c = 0; c < n; ++c) {
    for (int b = 0; b < n; ++b)
      held[c][b] = Contributors{1} << c;
  }
  for (int s = 0; s < steps; ++s) {
    auto next = held;
    for (int c = 0; c < n; ++c) {
      const HalvingStep me = halving_step(reverse_bits(c, steps), n, s);
      const int peer = reverse_bits(me.peer_core, steps);
      for (int b = me.keep_first; b < me.keep_first + me.blocks; ++b) {
        ASSERT_EQ(held[c][b] & held[peer][b], 0u) << "a contribution twice";
        next[c][b] = held[c][b] | held[peer][b];
      }
    }
    held = next;
  }
  const Contributors everyone = all_of(n);
  for (int c = 0; c < n; ++c)
    EXPECT_EQ(held[c][reverse_bits(c, steps)], everyone) << "core " << c;
  for (int s = 0; s < steps; ++s) {
    auto next = held;
    for (int c = 0; c < n; ++c) {
      const GatherStep me = doubling_gather_step(reverse_bits(c, steps), s);
      const int peer = reverse_bits(me.peer_core, steps);
      for (int b = me.recv_first; b < me.recv_first + me.blocks; ++b) {
        ASSERT_EQ(held[peer][b], everyone) << "only complete blocks are gathered";
        next[c][b] = held[peer][b];
      }
    }
    held = next;
  }
  for (int c = 0; c < n; ++c) {
    for (int b = 0; b < n; ++b)
      EXPECT_EQ(held[c][b], everyone) << "core " << c << " block " << b;
  }
}

TEST_P(PatternSizes, BinomialTreeIsASpanningTreeWithContiguousSubtrees) {
  const int p = GetParam();
  std::vector<int> parent_of(p, -2);
  for (int v = 0; v < p; ++v) {
    const BinomialTree t{v, p};
    parent_of[v] = t.parent();
    if (v == 0) {
      EXPECT_EQ(t.parent(), -1);
      EXPECT_EQ(t.subtree_size(), p);
    } else {
      ASSERT_GE(t.parent(), 0);
      ASSERT_LT(t.parent(), v);
    }
    // The children listed by the masks are exactly the ranks whose parent is v, and the
    // subtree of v is [v, v + subtree_size).
    int covered = 1;
    for (int mask = t.first_child_mask(); mask > 0; mask >>= 1) {
      if (!t.has_child(mask)) continue;
      const BinomialTree child{v + mask, p};
      EXPECT_EQ(child.parent(), v);
      EXPECT_LE(child.vrank + child.subtree_size(), v + t.subtree_size()) << "inside v's subtree";
      covered += child.subtree_size();
    }
    EXPECT_EQ(covered, t.subtree_size()) << "v=" << v << " p=" << p;
  }
  // Every rank reaches the root.
  for (int v = 0; v < p; ++v) {
    int hops = 0;
    for (int u = v; u != 0; u = parent_of[u])
      ASSERT_LT(++hops, 64);
  }
  for (int r = 0; r < p; ++r) {
    for (int root = 0; root < p; ++root) {
      EXPECT_EQ(to_real(to_virtual(r, root, p), root, p), r);
    }
  }
}

TEST_P(PatternSizes, BinaryTreesAreSpanningAndDoubleTreeLeavesDiffer) {
  const int p = GetParam();
  int children = 0;
  for (int v = 0; v < p; ++v) {
    const BinaryTree t{v, p};
    for (int i = 0; i < 2; ++i) {
      if (t.child(i) >= 0) {
        EXPECT_EQ(BinaryTree(t.child(i), p).parent(), v);
        ++children;
      }
    }
  }
  EXPECT_EQ(children, p - 1);
  // The point of the mirrored second tree: (almost) no rank is an inner node of both.
  int inner_in_both = 0;
  for (int r = 0; r < p; ++r) {
    const bool inner_a = BinaryTree{r, p}.child_count() > 0;
    const bool inner_b = BinaryTree{mirror(r, p), p}.child_count() > 0;
    inner_in_both += inner_a && inner_b;
  }
  EXPECT_LE(inner_in_both, 1) << "p=" << p;
}

TEST_P(PatternSizes, DisseminationReachesEveryone) {
  const int p = GetParam();
  // heard[r]: ranks whose arrival r knows about after the rounds.
  std::vector<Contributors> heard(p);
  for (int r = 0; r < p; ++r)
    heard[r] = Contributors{1} << r;
  int distance = 1;
  for (int round = 0; round < dissemination_rounds(p); ++round, distance *= 2) {
    auto next = heard;
    for (int r = 0; r < p; ++r)
      next[r] |= heard[wrap(r - distance, p)];
    heard = next;
  }
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(heard[r], all_of(p)) << "rank " << r;
}

TEST_P(PatternSizes, PairwiseMeetsEveryOrderedPairOnce) {
  const int p = GetParam();
  std::vector<int> met(static_cast<std::size_t>(p * p), 0);
  for (int step = 1; step < p; ++step) {
    for (int r = 0; r < p; ++r) {
      const auto s = pairwise_step(r, p, step);
      EXPECT_EQ(pairwise_step(s.send_to, p, step).recv_from, r);
      ++met[static_cast<std::size_t>(r * p + s.send_to)];
    }
  }
  for (int a = 0; a < p; ++a) {
    for (int b = 0; b < p; ++b)
      EXPECT_EQ(met[static_cast<std::size_t>(a * p + b)], a == b ? 0 : 1);
  }
}

INSTANTIATE_TEST_SUITE_P(P1to64, PatternSizes, ::testing::Range(1, 65));

}  // namespace
