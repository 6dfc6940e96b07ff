// Gather and scatter: binomial tree and linear (a flat tree). Block r (of any length) belongs to
// rank r. In the tree, a rank's subtree is a contiguous window of virtual ranks that travels as
// at most two messages (patterns::TreeWindows), landing at the root directly in place.
#include <array>
#include <deque>

#include "collectives.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;
using patterns::TreeWindows;

// Binomial, or flat (the linear algorithms: the root is every other rank's parent).
enum class TreeShape { binomial, flat };

// The tree as one rank sees it: its virtual rank, its parent's, its window of blocks
// [vrank, window_end) and its children with theirs.
struct RootedTree {
  TreeShape shape = TreeShape::binomial;
  TreeWindows windows;
  int vrank = 0;
  int parent = -1;  // virtual rank; -1 at the root
  int window_end = 1;

  RootedTree(TreeShape tree_shape, const BlockLayout& blocks, std::size_t element_size, int root,
             int rank, int size)
      : shape(tree_shape),
        windows{blocks, root, size, element_size},
        vrank(patterns::to_virtual(rank, root, size)) {
    const auto take = [&](const auto& tree) {
      parent = tree.parent();
      window_end = vrank + tree.subtree_size();
    };
    if (shape == TreeShape::binomial)
      take(patterns::BinomialTree{vrank, size});
    else
      take(patterns::FlatTree{vrank, size});
  }

  bool is_root() const { return vrank == 0; }
  // A rank below the root with children holds its window in scratch, in virtual-rank order.
  bool relays() const { return !is_root() && window_end - vrank > 1; }
  std::size_t own_bytes() const { return windows.bytes(vrank, vrank + 1); }
  std::size_t window_bytes() const { return windows.bytes(vrank, window_end); }
  // Where virtual rank u's block is within this rank's window.
  std::size_t in_window(int u) const { return windows.bytes(vrank, u); }
  // Where virtual rank u's block is: in the root's full buffer, else in the relayed window.
  std::byte* block_of(int u, std::byte* full, std::byte* window) const {
    return is_root() ? full + windows.offset(windows.real(u)) : window + in_window(u);
  }
  // post(transfer, lo, hi, child) for each piece of each child's window: binomial gathers take
  // the smallest subtree first, scatters the largest; the flat tree goes in real-rank order.
  template <class Post>
  void post_to_children(std::deque<Transfer>& transfers, bool gathering, Post post) const {
    auto child_window = [&](int child, int end) {
      for (const auto& [lo, hi] : windows.pieces(child, end)) {
        if (lo >= hi) continue;
        transfers.emplace_back();
        post(transfers.back(), lo, hi, windows.real(child));
      }
    };
    if (shape == TreeShape::flat) {
      if (!is_root()) return;
      for (int r = 0; r < windows.size; ++r) {
        if (r == windows.root) continue;
        const int child = patterns::to_virtual(r, windows.root, windows.size);
        child_window(child, child + 1);
      }
      return;
    }
    const patterns::BinomialTree tree{vrank, windows.size};
    for (int child : gathering ? tree.children_smallest_first() : tree.children_largest_first())
      child_window(child, child + patterns::BinomialTree{child, windows.size}.subtree_size());
  }
  // post(transfer, lo, hi, parent) for each piece of this rank's window (below the root).
  template <class Post>
  void post_to_parent(std::array<Transfer, 2>& transfers, Post post) const {
    std::size_t n = 0;
    for (const auto& [lo, hi] : windows.pieces(vrank, window_end)) {
      if (lo < hi) post(transfers[n++], lo, hi, windows.real(parent));
    }
  }
};

// Gather (kGather): each rank's window goes to its parent once its children's windows are in.
// Scatter: the window comes from the parent, then each child's goes on. The root's full buffer
// (gather's recv, scatter's send, which is only read) holds every block; the other buffer is the
// rank's own block (null at the root: in place).
template <TreeShape kShape, bool kGather>
Task rooted_tree(Operation& op, RootedArgs a) {
  const RootedTree t(kShape, BlockLayout(a.offsets), a.element_size, a.root, op.rank(), op.size());
  const TreeWindows& w = t.windows;
  std::byte* const full = kGather ? a.recv : const_cast<std::byte*>(a.send);
  std::byte* const own = kGather ? const_cast<std::byte*>(a.send) : a.recv;
  std::byte* const own_in_full = t.is_root() ? full + w.offset(op.rank()) : nullptr;
  ScratchBuffer window;
  if (t.relays()) window = op.scratch(t.window_bytes());
  const auto move = [&](Transfer& transfer, std::byte* at, int lo, int hi, int peer, bool in) {
    in ? op.recv(transfer, at, w.bytes(lo, hi), peer, a.phases[0])
       : op.send(transfer, at, w.bytes(lo, hi), peer, a.phases[0]);
  };
  std::array<Transfer, 2> parent;
  const auto with_parent = [&](Transfer& transfer, int lo, int hi, int peer) {
    move(transfer, t.relays() ? window.data() + t.in_window(lo) : own, lo, hi, peer, !kGather);
  };
  if (!kGather && !t.is_root()) {
    t.post_to_parent(parent, with_parent);
    co_await op.wait(parent[0], parent[1]);
  }
  if (kGather && t.relays()) op.copy(window.data(), own, t.own_bytes());
  std::deque<Transfer> children;
  t.post_to_children(children, kGather, [&](Transfer& transfer, int lo, int hi, int peer) {
    move(transfer, t.block_of(lo, full, window.data()), lo, hi, peer, kGather);
  });
  // The root's own block while the others move (they touch other blocks).
  if (own != nullptr && own != own_in_full && t.is_root()) {
    op.copy(kGather ? own_in_full : own, kGather ? own : own_in_full, t.own_bytes());
  }
  if (!kGather && t.relays()) op.copy(own, window.data(), t.own_bytes());
  for (auto& transfer : children)
    co_await op.wait(transfer);
  if (kGather && !t.is_root()) {
    t.post_to_parent(parent, with_parent);
    co_await op.wait(parent[0], parent[1]);
  }
}

}  // namespace

std::span<const AlgorithmRow> gather_scatter_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(gather, binomial_tree, (rooted_tree<TreeShape::binomial, true>), 1),
      COLLX_ROW(gather, linear, (rooted_tree<TreeShape::flat, true>), 1),
      COLLX_ROW(gather, shared_memory, rooted_shared_memory<true>, 1, Algorithm::linear),
      COLLX_ROW(scatter, binomial_tree, (rooted_tree<TreeShape::binomial, false>), 1),
      COLLX_ROW(scatter, linear, (rooted_tree<TreeShape::flat, false>), 1),
      COLLX_ROW(scatter, shared_memory, rooted_shared_memory<false>, 1, Algorithm::linear),
  };
  return rows;
}

}  // namespace collx::detail
