// The pure pattern maths the schedules are built on (algorithms/), checked property by property
// for every communicator size p = 1..1024: tree placement and windows, binomial child order, the
// fold's core layout, Bruck's rotation and steps, floor_pow2. Where every (rank, root) pair
// would cost p^2 per size, every pair is checked up to kAllRanksUpTo and a sample (the first,
// second, middle and last) above it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "blocks.hpp"
#include "bruck.hpp"
#include "pieces.hpp"
#include "recursive.hpp"
#include "tree.hpp"

namespace {

using namespace collx::patterns;

constexpr int kMaxSize = 1024;
constexpr int kAllRanksUpTo = 48;

// Every rank for small p, a sample for large p (duplicates removed).
std::vector<int> ranks_to_check(int p) {
  std::vector<int> ranks;
  if (p <= kAllRanksUpTo) {
    for (int r = 0; r < p; ++r)
      ranks.push_back(r);
    return ranks;
  }
  ranks = {0, 1, p / 2, p - 1};
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// Block lengths that differ from rank to rank, zero included: an even layout would hide an
// offset taken from the wrong rank.
std::vector<std::size_t> uneven_offsets(int p) {
  std::vector<std::size_t> offsets(static_cast<std::size_t>(p) + 1, 0);
  for (int r = 0; r < p; ++r) {
    const auto i = static_cast<std::size_t>(r);
    offsets[i + 1] = offsets[i] + static_cast<std::size_t>((r * 7 + 3) % 5);
  }
  return offsets;
}

TEST(FloorPow2, IsTheLargestPowerOfTwoNotAbove) {
  for (int n = 1; n <= 4 * kMaxSize; ++n) {
    const int f = floor_pow2(n);
    ASSERT_GT(f, 0);
    EXPECT_EQ(f & (f - 1), 0) << "n=" << n;
    EXPECT_LE(f, n);
    EXPECT_GT(2 * f, n);
    EXPECT_EQ(1 << log2_exact(f), f);
    EXPECT_EQ(Fold{n}.core_size(), f);
  }
}

TEST(BinomialOrder, EveryChildOnceInBothOrders) {
  for (int p = 1; p <= kMaxSize; ++p) {
    std::vector<int> listed(static_cast<std::size_t>(p), 0);
    for (int v = 0; v < p; ++v) {
      const BinomialTree tree{v, p};
      const RankList largest = tree.children_largest_first();
      const RankList smallest = tree.children_smallest_first();
      ASSERT_EQ(largest.size(), smallest.size()) << "p=" << p << " v=" << v;
      for (int i = 0; i < largest.size(); ++i) {
        EXPECT_EQ(largest[i], smallest[smallest.size() - 1 - i]) << "one is the other reversed";
        if (i > 0) {
          EXPECT_LT(largest[i], largest[i - 1]) << "largest subtree (span) first";
        }
      }
      // Smallest first, the children's subtrees follow v without gap or overlap and end where
      // v's subtree ends: a gather's window fills in virtual-rank order.
      int next = v + 1;
      for (int child : smallest) {
        ASSERT_GE(child, 0);
        ASSERT_LT(child, p);
        const BinomialTree sub{child, p};
        EXPECT_EQ(sub.parent(), v) << "p=" << p << " child " << child << " of " << v;
        EXPECT_EQ(child, next) << "p=" << p << " v=" << v;
        next = child + sub.subtree_size();
        ++listed[static_cast<std::size_t>(child)];
      }
      EXPECT_EQ(next, v + tree.subtree_size()) << "p=" << p << " v=" << v;
    }
    EXPECT_EQ(listed[0], 0) << "the root is nobody's child";
    for (int v = 1; v < p; ++v)
      EXPECT_EQ(listed[static_cast<std::size_t>(v)], 1) << "p=" << p << " v=" << v;
  }
}

// A placement of every rank: a tree over all ranks rooted at `root`.
void expect_tree(const std::vector<TreePlace>& places, int root, int max_depth, const char* what) {
  const int p = static_cast<int>(places.size());
  std::vector<int> listed(places.size(), 0);
  for (int r = 0; r < p; ++r) {
    const TreePlace& place = places[static_cast<std::size_t>(r)];
    if (r == root) {
      EXPECT_EQ(place.parent, -1) << what << " p=" << p << " root " << root;
    } else {
      ASSERT_GE(place.parent, 0) << what << " p=" << p << " rank " << r;
      ASSERT_LT(place.parent, p);
      ASSERT_NE(place.parent, r);
    }
    for (int child : place.children) {
      ASSERT_GE(child, 0);
      ASSERT_LT(child, p);
      EXPECT_EQ(places[static_cast<std::size_t>(child)].parent, r)
          << what << " p=" << p << " root " << root << ": parent and child disagree";
      ++listed[static_cast<std::size_t>(child)];
    }
  }
  // The root and the children listed are every rank exactly once: a permutation of the ranks.
  ++listed[static_cast<std::size_t>(root)];
  for (int r = 0; r < p; ++r)
    ASSERT_EQ(listed[static_cast<std::size_t>(r)], 1) << what << " p=" << p << " rank " << r;
  // No cycles: going down from the root reaches every rank, within the tree's depth.
  std::vector<int> level{root};
  int reached = 1;
  for (int depth = 0; !level.empty(); ++depth) {
    ASSERT_LE(depth, max_depth) << what << " p=" << p << " root " << root;
    std::vector<int> next;
    for (int r : level) {
      for (int child : places[static_cast<std::size_t>(r)].children)
        next.push_back(child);
    }
    reached += static_cast<int>(next.size());
    level = std::move(next);
  }
  EXPECT_EQ(reached, p) << what << " p=" << p << " root " << root;
}

TEST(TreePlacement, BinomialAndChainAreTreesOverEveryRank) {
  for (int p = 1; p <= kMaxSize; ++p) {
    const int depth = dissemination_rounds(p);  // ceil(log2 p)
    for (int root : ranks_to_check(p)) {
      std::vector<TreePlace> binomial;
      std::vector<TreePlace> chain;
      for (int r = 0; r < p; ++r) {
        binomial.push_back(binomial_place(r, root, p));
        chain.push_back(chain_place(r, root, p));
        EXPECT_LE(binomial.back().children.size(), depth);
        EXPECT_LE(chain.back().children.size(), 1);
      }
      expect_tree(binomial, root, depth, "binomial");
      expect_tree(chain, root, p - 1, "chain");
      if (p > 1) {
        EXPECT_EQ(binomial[static_cast<std::size_t>(root)].children.size(), depth)
            << "the root of a binomial tree has ceil(log2 p) children";
      }
    }
    for (int r = 0; r < p; ++r) {
      for (int root : ranks_to_check(p))
        ASSERT_EQ(to_real(to_virtual(r, root, p), root, p), r);
    }
  }
}

// The k-nomial tree reaches every rank once in ceil(log_k p) levels, a rank sending at most
// k - 1 messages a level; radix 2 is the binomial tree.
TEST(TreePlacement, KnomialIsATreeOverEveryRank) {
  for (int radix : {2, 3, 4, 8}) {
    for (int p = 1; p <= kMaxSize; ++p) {
      int depth = 0;
      for (long long reach = 1; reach < p; reach *= radix)
        ++depth;
      for (int root : ranks_to_check(p)) {
        std::vector<TreePlace> knomial;
        for (int r = 0; r < p; ++r) {
          knomial.push_back(knomial_place(r, root, p, radix));
          EXPECT_LE(knomial.back().children.size(), depth * (radix - 1));
          if (radix == 2) {
            const TreePlace binomial = binomial_place(r, root, p);
            EXPECT_EQ(knomial.back().parent, binomial.parent);
            EXPECT_EQ(
                std::vector<int>(knomial.back().children.begin(), knomial.back().children.end()),
                std::vector<int>(binomial.children.begin(), binomial.children.end()));
          }
        }
        expect_tree(knomial, root, depth, "knomial");
      }
    }
  }
}

TEST(FlatTree, TheRootIsEveryRanksParent) {
  for (int p = 1; p <= kMaxSize; ++p) {
    const FlatTree root{0, p};
    EXPECT_EQ(root.parent(), -1);
    EXPECT_EQ(root.subtree_size(), p);
    int covered = 1;  // the root's own block, then each child's window
    for (int v = 1; v < p; ++v) {
      const FlatTree tree{v, p};
      EXPECT_EQ(tree.parent(), 0) << "p=" << p << " v=" << v;
      covered += tree.subtree_size();
    }
    EXPECT_EQ(covered, root.subtree_size()) << "every rank once";
  }
}

TEST(TreeWindows, EachSubtreeIsCoveredExactlyOnce) {
  for (int p = 1; p <= kMaxSize; ++p) {
    const std::vector<std::size_t> offsets = uneven_offsets(p);
    const BlockLayout blocks{offsets};
    constexpr std::size_t kElement = 3;
    for (int root : ranks_to_check(p)) {
      const TreeWindows w{blocks, root, p, kElement};
      std::vector<int> covered(static_cast<std::size_t>(p), 0);
      for (int v = 0; v < p; ++v) {
        const BinomialTree tree{v, p};
        const int lo = v;
        const int hi = v + tree.subtree_size();
        // The pieces split [lo, hi) in order; each is a run of consecutive real ranks.
        const auto pieces = w.pieces(lo, hi);
        EXPECT_EQ(pieces[0][0], lo);
        EXPECT_EQ(pieces[0][1], pieces[1][0]);
        EXPECT_EQ(pieces[1][1], hi);
        int total = 0;
        std::size_t piece_bytes = 0;
        for (const auto& [a, b] : pieces) {
          ASSERT_LE(a, b);
          for (int u = a; u < b; ++u) {
            if (u > a) {
              EXPECT_EQ(w.real(u), w.real(u - 1) + 1) << "a piece is contiguous";
            }
            ++covered[static_cast<std::size_t>(w.real(u))];
            ++total;
          }
          if (a < b) {
            piece_bytes += (blocks.offset(w.real(b - 1) + 1) - blocks.offset(w.real(a))) * kElement;
          }
        }
        // Exactly the window's real ranks, once each (real() is a bijection, so a count of
        // hi - lo leaves nothing outside the window).
        EXPECT_EQ(total, hi - lo);
        for (int u = lo; u < hi; ++u) {
          auto& count = covered[static_cast<std::size_t>(w.real(u))];
          EXPECT_EQ(count, 1) << "p=" << p << " root " << root << " v=" << v << " u=" << u;
          count = 0;
        }
        // bytes() counts the window's blocks, and prefixes of it add up block by block (where
        // a gather puts each rank's block inside its window).
        std::size_t expected = 0;
        for (int u = lo; u < hi; ++u) {
          EXPECT_EQ(w.bytes(lo, u), expected);
          expected += blocks.length(w.real(u)) * kElement;
        }
        EXPECT_EQ(w.bytes(lo, hi), expected);
        EXPECT_EQ(piece_bytes, expected);
        EXPECT_EQ(w.offset(w.real(v)), blocks.offset(w.real(v)) * kElement);
        // The window is this rank's block plus its children's windows.
        std::size_t children_bytes = 0;
        for (int child : tree.children_smallest_first())
          children_bytes += w.bytes(child, child + BinomialTree{child, p}.subtree_size());
        EXPECT_EQ(blocks.length(w.real(v)) * kElement + children_bytes, expected);
      }
      EXPECT_EQ(w.bytes(0, p), blocks.count() * kElement) << "the root's window is everything";
    }
  }
}

TEST(FoldLayout, CoreBlocksAreDisjointAndCoverTheCount) {
  for (int p = 1; p <= kMaxSize; ++p) {
    const Fold fold{p};
    const int core_size = fold.core_size();
    // The ranks each core rank stands for partition [0, p).
    EXPECT_EQ(fold.first_rank_of_core(0), 0);
    for (int c = 0; c < core_size; ++c) {
      const int first = fold.first_rank_of_core(c);
      const int end = fold.first_rank_of_core(c + 1);
      EXPECT_EQ(end - first, c < fold.extra() ? 2 : 1) << "p=" << p << " core " << c;
      const int r = fold.rank_of_core(c);
      EXPECT_TRUE(r >= first && r < end);
    }
    EXPECT_EQ(fold.first_rank_of_core(core_size), p);

    const std::vector<std::size_t> uneven = uneven_offsets(p);
    for (const BlockLayout& blocks : {BlockLayout{uneven}, BlockLayout{0, p},
                                      BlockLayout{std::size_t(p) - 1, p}, BlockLayout{1000, p}}) {
      std::vector<std::size_t> core_offsets(static_cast<std::size_t>(core_size) + 1);
      const BlockLayout core = fold.core_layout(blocks, core_offsets);
      ASSERT_EQ(core.nblocks(), core_size);
      EXPECT_EQ(core.offset(0), 0u);
      EXPECT_EQ(core.count(), blocks.count()) << "the core blocks cover the count";
      for (int c = 0; c < core_size; ++c)
        ASSERT_LE(core.offset(c), core.offset(c + 1)) << "core blocks are disjoint";
      // Every rank's block lies inside the core block of the core rank holding its data, and a
      // core block holds nothing else.
      std::vector<std::size_t> held(static_cast<std::size_t>(core_size), 0);
      for (int r = 0; r < p; ++r) {
        const int holder = fold.role(r) == FoldRole::folded ? fold.fold_partner(r) : r;
        const int c = fold.core_rank(holder);
        ASSERT_GE(c, 0);
        EXPECT_GE(blocks.offset(r), core.offset(c));
        EXPECT_LE(blocks.offset(r) + blocks.length(r), core.offset(c + 1));
        held[static_cast<std::size_t>(c)] += blocks.length(r);
      }
      for (int c = 0; c < core_size; ++c)
        EXPECT_EQ(held[static_cast<std::size_t>(c)], core.length(c)) << "p=" << p << " core " << c;
    }
  }
}

TEST(BruckRotation, IsABijectionUndoneByItsInverse) {
  for (int p = 1; p <= kMaxSize; ++p) {
    const std::vector<std::size_t> offsets = uneven_offsets(p);
    const BlockLayout blocks{offsets};
    for (int rank : ranks_to_check(p)) {
      std::vector<int> hit(static_cast<std::size_t>(p), 0);
      for (int i = 0; i < p; ++i) {
        const int block = bruck_block_at(rank, i, p);
        ASSERT_GE(block, 0);
        ASSERT_LT(block, p);
        ++hit[static_cast<std::size_t>(block)];
        EXPECT_EQ(bruck_position_of(rank, block, p), i);
        EXPECT_EQ(bruck_block_at(rank, bruck_position_of(rank, i, p), p), i);
      }
      for (int b = 0; b < p; ++b)
        ASSERT_EQ(hit[static_cast<std::size_t>(b)], 1) << "p=" << p << " rank " << rank;
      EXPECT_EQ(bruck_block_at(rank, 0, p), rank) << "the own block comes first";
      // The rotated copy's layout: position i has block_at(i)'s length, and it covers the count.
      std::vector<std::size_t> rotated_offsets(static_cast<std::size_t>(p) + 1);
      const BlockLayout rotated = bruck_rotated_layout(rank, blocks, rotated_offsets);
      EXPECT_EQ(rotated.count(), blocks.count());
      for (int i = 0; i < p; ++i)
        EXPECT_EQ(rotated.length(i), blocks.length(bruck_block_at(rank, i, p)));
    }
  }
}

TEST(BruckAllgather, EveryPositionArrivesOnceFromTheRightPeer) {
  for (int p = 1; p <= kMaxSize; ++p) {
    EXPECT_EQ(bruck_steps(p), dissemination_rounds(p));
    for (int rank : ranks_to_check(p)) {
      int held = 1;  // positions [0, held): the own block first
      int steps = 0;
      for (int distance = 1; distance < p; distance *= 2, ++steps) {
        ASSERT_EQ(held, distance) << "positions [0, distance) are held before the step";
        const BruckGatherStep step = bruck_allgather_step(rank, p, distance);
        const BruckGatherStep sender = bruck_allgather_step(step.recv_from, p, distance);
        ASSERT_EQ(sender.send_to, rank) << "p=" << p << " rank " << rank;
        ASSERT_EQ(sender.blocks, step.blocks);
        ASSERT_GE(step.blocks, 1);
        ASSERT_LE(step.blocks, distance) << "only positions the sender holds";
        // The sender's positions [0, n) are this rank's positions [distance, distance + n).
        for (int j = 0; j < step.blocks; ++j) {
          ASSERT_EQ(bruck_block_at(step.recv_from, j, p), bruck_block_at(rank, distance + j, p));
        }
        held += step.blocks;
      }
      EXPECT_EQ(held, p) << "every position, none twice (p=" << p << ")";
      EXPECT_EQ(steps, bruck_steps(p));
    }
  }
}

TEST(BruckAlltoall, EveryBlockReachesItsDestinationAtTheRightPosition) {
  for (int p = 1; p <= kMaxSize; ++p) {
    for (int source : ranks_to_check(p)) {
      // Follow each of source's blocks: position i starts as the block for rank source + i.
      for (int i = 0; i < p; ++i) {
        const int destination = bruck_block_at(source, i, p);
        int at = source;
        for (int distance = 1; distance < p; distance *= 2) {
          if (!bruck_alltoall_moves(i, distance)) continue;
          const PairwiseStep step = bruck_alltoall_step(at, p, distance);
          ASSERT_EQ(bruck_alltoall_step(step.send_to, p, distance).recv_from, at);
          at = step.send_to;
        }
        ASSERT_EQ(at, destination) << "p=" << p << " source " << source << " position " << i;
        EXPECT_EQ(bruck_alltoall_source(destination, i, p), source);
      }
    }
  }
}

// The shared-memory reductions' pieces: the blocks cover the count once, in order, start on
// whole lines where the element size divides one, and differ by at most one line but for the
// ragged tail; the pieces of every round cover each block once, and the rounds are exactly
// those of the longest block.
TEST(SliceLayout, BlocksAndPiecesCoverTheCountOnce) {
  for (int p = 1; p <= kMaxSize; p += p < 64 ? 1 : 61) {
    for (std::size_t elem : {1, 2, 4, 8, 16, 24}) {
      const std::size_t unit = 64 % elem == 0 ? 64 / elem : 1;
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(p - 1),
                                static_cast<std::size_t>(p + 1), std::size_t{1000003}}) {
        const std::vector<std::size_t> offsets = line_aligned_offsets(count, elem, p);
        ASSERT_EQ(offsets.size(), static_cast<std::size_t>(p) + 1);
        ASSERT_EQ(offsets.front(), 0u);
        ASSERT_EQ(offsets.back(), count);
        std::size_t shortest = count, longest = 0;
        for (int b = 0; b < p; ++b) {
          ASSERT_LE(offsets[b], offsets[b + 1]) << "p=" << p << " block " << b;
          if (offsets[b] < count) {
            ASSERT_EQ(offsets[b] % unit, 0u) << "p=" << p << " b=" << b;
          }
          const std::size_t length = offsets[b + 1] - offsets[b];
          longest = std::max(longest, length);
          if (b + 1 < p) shortest = std::min(shortest, length);
        }
        // Whole lines shared out as evenly as the count allows.
        if (count >= unit * static_cast<std::size_t>(p) && p > 1) {
          ASSERT_LE(longest - shortest, unit) << "p=" << p << " count=" << count;
        }
        for (std::size_t piece : {std::size_t{1}, std::size_t{3}, std::size_t{16384}}) {
          if (piece < 16 && count > 1000) continue;  // a million rounds say nothing more
          const std::size_t rounds = rounds_of(offsets, piece);
          ASSERT_EQ(rounds, (longest + piece - 1) / piece);
          for (int b = 0; b < p; b += std::max(1, p / 16)) {
            std::size_t next = offsets[b];
            for (std::size_t k = 0; k < rounds; ++k) {
              const ElementRange r = piece_of(offsets, b, k, piece);
              ASSERT_LE(r.length(), piece);
              if (r.length() == 0) {
                ASSERT_EQ(next, offsets[b + 1]);
                continue;
              }
              ASSERT_EQ(r.begin, next) << "p=" << p << " block " << b << " round " << k;
              next = r.end;
            }
            ASSERT_EQ(next, offsets[b + 1]) << "p=" << p << " block " << b;
          }
        }
      }
    }
  }
}

TEST(SliceLayout, PiecesFitOnePerBlockInTheSlot) {
  EXPECT_EQ(piece_elements(64 << 10, 512 << 10, 2, 4), (64u << 10) / 4);
  EXPECT_EQ(piece_elements(64 << 10, 512 << 10, 16, 4), (32u << 10) / 4);
  EXPECT_EQ(piece_elements(64 << 10, 512, 33, 8), 1u);
  EXPECT_EQ(piece_elements(64 << 10, 512, 33, 16), 0u);  // not one element per block
  for (int p = 1; p <= 64; ++p)
    for (std::size_t elem : {1, 2, 4, 8})
      EXPECT_LE(piece_elements(64 << 10, 4096, p, elem) * elem * static_cast<std::size_t>(p),
                4096u);
}

}  // namespace
