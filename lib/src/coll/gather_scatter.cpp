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
  template <class Byte>
  Byte* block_of(int u, Byte* full, Byte* window) const {
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

template <TreeShape kShape>
Task gather_tree(Operation& op, GatherArgs a) {
  const BlockLayout blocks(a.offsets);
  const RootedTree t(kShape, blocks, a.element_size, a.root, op.rank(), op.size());
  const TreeWindows& w = t.windows;
  ScratchBuffer window;
  if (t.relays()) {
    window = op.scratch(t.window_bytes());
    op.copy(window.data(), a.send, t.own_bytes());
  }
  std::deque<Transfer> recvs;
  t.post_to_children(recvs, true, [&](Transfer& recv, int lo, int hi, int child) {
    op.recv(recv, t.block_of(lo, a.recv, window.data()), w.bytes(lo, hi), child, a.phases[0]);
  });
  if (t.is_root()) {
    // The root's own block while the others' arrive (they land in other blocks).
    const bool in_place = a.send == nullptr || a.send == a.recv + w.offset(op.rank());
    if (!in_place) op.copy(a.recv + w.offset(op.rank()), a.send, t.own_bytes());
  }
  for (auto& r : recvs)
    co_await op.wait(r);
  if (t.is_root()) co_return;
  std::array<Transfer, 2> sends;
  t.post_to_parent(sends, [&](Transfer& send, int lo, int hi, int parent) {
    const std::byte* from = t.relays() ? window.data() + t.in_window(lo) : a.send;
    op.send(send, from, w.bytes(lo, hi), parent, a.phases[0]);
  });
  co_await op.wait(sends[0], sends[1]);
}

template <TreeShape kShape>
Task scatter_tree(Operation& op, ScatterArgs a) {
  const BlockLayout blocks(a.offsets);
  const RootedTree t(kShape, blocks, a.element_size, a.root, op.rank(), op.size());
  const TreeWindows& w = t.windows;
  ScratchBuffer window;
  if (t.relays()) window = op.scratch(t.window_bytes());
  if (!t.is_root()) {
    // The whole window from the parent; a leaf's window is its own block.
    std::array<Transfer, 2> recvs;
    t.post_to_parent(recvs, [&](Transfer& recv, int lo, int hi, int parent) {
      std::byte* to = t.relays() ? window.data() + t.in_window(lo) : a.recv;
      op.recv(recv, to, w.bytes(lo, hi), parent, a.phases[0]);
    });
    co_await op.wait(recvs[0], recvs[1]);
  }
  std::deque<Transfer> sends;
  t.post_to_children(sends, false, [&](Transfer& send, int lo, int hi, int child) {
    const std::byte* from = t.block_of<const std::byte>(lo, a.send, window.data());
    op.send(send, from, w.bytes(lo, hi), child, a.phases[0]);
  });
  if (t.is_root() && a.recv != nullptr && a.recv != a.send + w.offset(op.rank())) {
    op.copy(a.recv, a.send + w.offset(op.rank()), t.own_bytes());
  }
  if (t.relays()) op.copy(a.recv, window.data(), t.own_bytes());
  for (auto& s : sends)
    co_await op.wait(s);
}

}  // namespace

std::span<const AlgorithmRow> gather_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::gather>(Algorithm::binomial_tree, gather_tree<TreeShape::binomial>,
                              model::gather_binomial_tree, 1),
      row<Collective::gather>(Algorithm::linear, gather_tree<TreeShape::flat>, model::gather_linear,
                              1),
      row<Collective::gather>(Algorithm::shared_memory, gather_shared_memory,
                              model::gather_shared_memory, 1, Algorithm::linear),
  };
  return rows;
}

std::span<const AlgorithmRow> scatter_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::scatter>(Algorithm::binomial_tree, scatter_tree<TreeShape::binomial>,
                               model::scatter_binomial_tree, 1),
      row<Collective::scatter>(Algorithm::linear, scatter_tree<TreeShape::flat>,
                               model::scatter_linear, 1),
      row<Collective::scatter>(Algorithm::shared_memory, scatter_shared_memory,
                               model::scatter_shared_memory, 1, Algorithm::linear),
  };
  return rows;
}

}  // namespace collx::detail
