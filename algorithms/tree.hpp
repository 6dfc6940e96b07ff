// Trees and chains over "virtual ranks": v = (rank - root) mod p, so every tree is rooted at
// virtual rank 0 and a rooted collective only rotates.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <span>

#include "blocks.hpp"
#include "ring.hpp"  // wrap()

namespace collx::patterns {

inline int to_virtual(int rank, int root, int size) {
  return wrap(rank - root, size);
}
inline int to_real(int vrank, int root, int size) {
  return wrap(vrank + root, size);
}

// Ranks of a tree node's neighbours (its children, say), in a fixed order. A tree over int rank
// counts has at most 31 children per node.
struct RankList {
  // Not zeroed, and copied only up to `count` (the rest is never written or read): this is on
  // the latency path.
  std::array<int, 32> ranks;
  int count = 0;

  RankList() = default;
  RankList(const RankList& other) : count(other.count) {
    std::copy_n(other.ranks.data(), count, ranks.data());
  }
  RankList& operator=(const RankList& other) {
    count = other.count;
    std::copy_n(other.ranks.data(), count, ranks.data());
    return *this;
  }

  void push_back(int rank) { ranks[static_cast<std::size_t>(count++)] = rank; }
  const int* begin() const { return ranks.data(); }
  const int* end() const { return ranks.data() + count; }
  int operator[](int i) const { return ranks[static_cast<std::size_t>(i)]; }
  int size() const { return count; }
  bool empty() const { return count == 0; }
  std::span<const int> span() const { return {ranks.data(), static_cast<std::size_t>(count)}; }
};

// Binomial tree (MPICH's): the parent of v clears v's lowest set bit; v's children are
// v + m for the powers of two m below that bit (below the tree's size for the root). The
// subtree of v > 0 is the virtual ranks [v, v + lowbit(v)) within [0, p): contiguous, which is
// what lets gather and scatter move a subtree's blocks as one message.
struct BinomialTree {
  int vrank = 0;
  int size = 1;

  // Lowest set bit of vrank; for the root, the first power of two >= size.
  int span() const {
    if (vrank == 0) return static_cast<int>(std::bit_ceil(static_cast<unsigned>(size)));
    return vrank & -vrank;
  }
  int parent() const { return vrank == 0 ? -1 : vrank - span(); }
  // Number of virtual ranks in the subtree rooted here (this rank included).
  int subtree_size() const {
    const int end = vrank + span();
    return (end < size ? end : size) - vrank;
  }
  // Children are vrank + m for m = first_child_mask(), first_child_mask()/2, ..., 1, skipping
  // those >= size. Largest subtree first: the order a broadcast sends in.
  int first_child_mask() const { return span() >> 1; }
  bool has_child(int mask) const { return mask > 0 && vrank + mask < size; }
  // The children's virtual ranks, largest subtree first: the order a broadcast or scatter sends
  // in, so the subtree with the longest way to go starts first.
  RankList children_largest_first() const {
    RankList children;
    for (int mask = first_child_mask(); mask > 0; mask >>= 1) {
      if (has_child(mask)) children.push_back(vrank + mask);
    }
    return children;
  }
  // The reverse: the order a reduce or gather takes them in, so what arrives next always stands
  // for the virtual ranks just above those already combined ("lower op upper").
  RankList children_smallest_first() const {
    RankList children;
    for (int mask = 1; mask < span() && vrank + mask < size; mask <<= 1)
      children.push_back(vrank + mask);
    return children;
  }
};

// Flat tree (the linear algorithms): the root is every other rank's parent, and a rank's subtree
// is itself alone.
struct FlatTree {
  int vrank = 0;
  int size = 1;
  int parent() const { return vrank == 0 ? -1 : 0; }
  int subtree_size() const { return vrank == 0 ? size : 1; }
};

// k-nomial tree over virtual ranks (radix k >= 2; k = 2 is the binomial tree): write v in base
// k; its parent clears v's lowest nonzero digit (v - d k^i), its children set one digit below
// that one (v + j k^m, m < i, j = 1 .. k-1), the root's any digit. ceil(log_k p) levels, a rank
// sending up to k - 1 messages a level: fewer levels than the binomial tree's log2 p where a
// level costs a latency and the messages of one level overlap (what Open MPI's and MVAPICH2's
// small broadcasts run, radix 4).
struct KnomialTree {
  int vrank = 0;
  int size = 1;
  int radix = 4;
  // The place value of v's lowest nonzero digit (k^i); at the root the smallest power of the
  // radix that is >= size. Its children lie at distances below it.
  long long span() const {
    long long s = 1;
    if (vrank == 0) {
      while (s < size)
        s *= radix;
      return s;
    }
    while (vrank % (s * radix) == 0)
      s *= radix;
    return s;
  }
  int parent() const {
    if (vrank == 0) return -1;
    const long long s = span();
    return static_cast<int>(vrank - (vrank / s) % radix * s);
  }
  // The children's virtual ranks, farthest (largest subtree) first.
  RankList children_largest_first() const {
    RankList children;
    for (long long m = span() / radix; m >= 1; m /= radix) {
      for (long long j = radix - 1; j >= 1; --j) {
        if (vrank + j * m < size) children.push_back(static_cast<int>(vrank + j * m));
      }
    }
    return children;
  }
};

// A rank's place in a rooted tree, in real ranks: its parent (-1 at the root) and its children
// in the order it sends to them.
struct TreePlace {
  int parent = -1;
  RankList children;
};

inline TreePlace binomial_place(int rank, int root, int size) {
  const BinomialTree tree{to_virtual(rank, root, size), size};
  TreePlace place;
  for (int child : tree.children_largest_first())
    place.children.push_back(to_real(child, root, size));
  place.parent = tree.parent() < 0 ? -1 : to_real(tree.parent(), root, size);
  return place;
}

// The radix of collx's k-nomial broadcast (the schedule's and the cost model's).
inline constexpr int kKnomialRadix = 4;
// The radix of the hierarchical barrier's tree inside a node (its schedule's and the cost
// model's): one level up to 8 ranks on a node, where a token's latency, not the root's count of
// them, is what a level costs.
inline constexpr int kNodeBarrierRadix = 8;
// ceil(log_radix size): the levels of a k-nomial tree.
inline int knomial_levels(int size, int radix) {
  int levels = 0;
  for (long long reach = 1; radix >= 2 && reach < size; reach *= radix)
    ++levels;
  return levels;
}
// A rank has at most (k - 1) x ceil(log_k p) children, which RankList's 32 must hold (radix 4:
// 4^10 ranks); beyond that, and for a radix below 2, the binomial tree.
inline TreePlace knomial_place(int rank, int root, int size, int radix) {
  const int levels = knomial_levels(size, radix);
  if (radix < 2 || (radix - 1) * levels > 32) return binomial_place(rank, root, size);
  const KnomialTree tree{to_virtual(rank, root, size), size, radix};
  TreePlace place;
  for (int child : tree.children_largest_first())
    place.children.push_back(to_real(child, root, size));
  place.parent = tree.parent() < 0 ? -1 : to_real(tree.parent(), root, size);
  return place;
}

// Binary tree in heap order over virtual ranks: parent (v-1)/2, children 2v+1, 2v+2.
struct BinaryTree {
  int vrank = 0;
  int size = 1;
  int parent() const { return vrank == 0 ? -1 : (vrank - 1) / 2; }
  int child(int i) const {
    const int c = 2 * vrank + 1 + i;
    return c < size ? c : -1;
  }
  int child_count() const { return (child(0) >= 0) + (child(1) >= 0); }
};

// The two trees of a double binary tree: the first is BinaryTree over v, the second the same
// shape over the mirrored numbering p-1-v, so the leaves of one (about half the ranks) are the
// inner nodes of the other and every rank's links carry about the same load.
inline int mirror(int vrank, int size) {
  return size - 1 - vrank;
}

// Chain: v receives from v-1 and sends to v+1.
struct Chain {
  int vrank = 0;
  int size = 1;
  int previous() const { return vrank == 0 ? -1 : vrank - 1; }
  int next() const { return vrank + 1 < size ? vrank + 1 : -1; }
};

inline TreePlace chain_place(int rank, int root, int size) {
  const Chain chain{to_virtual(rank, root, size), size};
  TreePlace place;
  if (chain.next() >= 0) place.children.push_back(to_real(chain.next(), root, size));
  place.parent = chain.previous() < 0 ? -1 : to_real(chain.previous(), root, size);
  return place;
}

// The blocks (one per real rank) of a binomial tree's subtrees, for gather and scatter. A
// subtree is a window of virtual ranks [lo, hi); it maps to at most two contiguous ranges of real
// ranks (split where the numbering wraps past rank size-1), so a window travels as at most two
// messages and lands at the root in place.
struct TreeWindows {
  BlockLayout blocks;  // block r belongs to real rank r
  int root = 0;
  int size = 1;
  std::size_t element_size = 1;

  int real(int vrank) const { return to_real(vrank, root, size); }
  // [lo, hi) split where real rank size-1 is followed by 0; an empty second piece is {hi, hi}.
  std::array<std::array<int, 2>, 2> pieces(int lo, int hi) const {
    const int wrap_at = size - root;  // virtual rank of real rank 0
    if (root == 0 || hi <= wrap_at || lo >= wrap_at) return {{{lo, hi}, {hi, hi}}};
    return {{{lo, wrap_at}, {wrap_at, hi}}};
  }
  // Bytes of the blocks of virtual ranks [lo, hi).
  std::size_t bytes(int lo, int hi) const {
    std::size_t total = 0;
    for (const auto& [a, b] : pieces(lo, hi)) {
      if (a < b) total += (blocks.offset(real(b - 1) + 1) - blocks.offset(real(a))) * element_size;
    }
    return total;
  }
  // Offset in bytes of real rank r's block in the full buffer.
  std::size_t offset(int real_rank) const { return blocks.offset(real_rank) * element_size; }
};

// Dissemination barrier: ceil(log2 p) rounds; in round k rank r signals r + 2^k and waits for
// r - 2^k (mod p).
inline int dissemination_rounds(int size) {
  return size <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(size - 1)));
}

// Pairwise exchange (alltoall): in step s (1 .. p-1) rank r sends to r + s and receives from
// r - s (mod p); every ordered pair meets exactly once.
struct PairwiseStep {
  int send_to = 0;
  int recv_from = 0;
};
inline PairwiseStep pairwise_step(int rank, int size, int step) {
  return {wrap(rank + step, size), wrap(rank - step, size)};
}

}  // namespace collx::patterns
