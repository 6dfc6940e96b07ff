// Trees and chains over "virtual ranks": v = (rank - root) mod p, so every tree is rooted at
// virtual rank 0 and a rooted collective only rotates.
#pragma once

#include <bit>

#include "ring.hpp"  // wrap()

namespace collx::patterns {

inline int to_virtual(int rank, int root, int size) {
  return wrap(rank - root, size);
}
inline int to_real(int vrank, int root, int size) {
  return wrap(vrank + root, size);
}

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
};

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

// Bruck: ceil(log2 p) steps; in step k (distance 2^k) rank r sends to r - 2^k and receives
// from r + 2^k. Allgather: the first min(2^k, p - 2^k) blocks of the rotated buffer go out.
// Alltoall: the blocks whose index has bit k set go out.
inline int bruck_steps(int size) {
  return dissemination_rounds(size);
}

}  // namespace collx::patterns
