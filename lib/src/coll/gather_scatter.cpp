// Gather and scatter: binomial tree and linear. Block r (of any length) belongs to rank r.
// In the tree, a rank's subtree is a contiguous window of virtual ranks that travels as at most
// two messages (patterns::TreeWindows), landing at the root directly in place.
#include <array>
#include <cstring>

#include "collectives.hpp"
#include "collx/error.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

using patterns::BlockLayout;
using patterns::TreeWindows;

bool gather_in_place(const GatherArgs& a, const BlockLayout& blocks, int rank) {
  return a.send == nullptr || a.send == a.recv + blocks.offset(rank) * a.element_size;
}

Task gather_binomial(Operation& op, GatherArgs a) {
  const int p = op.size();
  const BlockLayout blocks(a.offsets);
  const TreeWindows w{blocks, a.root, p, a.element_size};
  const patterns::BinomialTree tree{patterns::to_virtual(op.rank(), a.root, p), p};
  const bool is_root = tree.vrank == 0;
  const int window_end = tree.vrank + tree.subtree_size();
  const std::size_t own_bytes = blocks.length(op.rank()) * a.element_size;
  if (is_root) {
    if (!gather_in_place(a, blocks, op.rank())) {
      op.copy(a.recv + w.offset(op.rank()), a.send, own_bytes);
    }
  }
  // A non-root rank with children collects its window in virtual-rank order.
  ScratchBuffer window;
  const bool collects = !is_root && tree.subtree_size() > 1;
  if (collects) {
    window = op.scratch(w.bytes(tree.vrank, window_end));
    op.copy(window.data(), a.send, own_bytes);
  }
  auto local = [&](int vrank) -> std::byte* {  // where vrank's block goes on this rank
    return is_root ? a.recv + w.offset(w.real(vrank)) : window.data() + w.bytes(tree.vrank, vrank);
  };
  std::vector<Transfer> recvs;
  recvs.reserve(64);
  for (int child_vrank : tree.children_smallest_first()) {
    const patterns::BinomialTree child{child_vrank, p};
    for (const auto& [lo, hi] : w.pieces(child.vrank, child.vrank + child.subtree_size())) {
      if (lo >= hi) continue;
      recvs.emplace_back();
      op.recv(recvs.back(), local(lo), w.bytes(lo, hi), w.real(child.vrank), a.phases[0]);
    }
  }
  for (auto& r : recvs)
    co_await op.wait(r);
  if (is_root) co_return;
  const int parent = w.real(tree.parent());
  std::array<Transfer, 2> sends;
  int n = 0;
  for (const auto& [lo, hi] : w.pieces(tree.vrank, window_end)) {
    if (lo >= hi) continue;
    const std::byte* from = collects ? window.data() + w.bytes(tree.vrank, lo) : a.send;
    op.send(sends[static_cast<std::size_t>(n++)], from, w.bytes(lo, hi), parent, a.phases[0]);
  }
  co_await op.wait(sends[0], sends[1]);
}

Task scatter_binomial(Operation& op, ScatterArgs a) {
  const int p = op.size();
  const BlockLayout blocks(a.offsets);
  const TreeWindows w{blocks, a.root, p, a.element_size};
  const patterns::BinomialTree tree{patterns::to_virtual(op.rank(), a.root, p), p};
  const bool is_root = tree.vrank == 0;
  const int window_end = tree.vrank + tree.subtree_size();
  const std::size_t own_bytes = blocks.length(op.rank()) * a.element_size;
  ScratchBuffer window;
  const bool forwards = !is_root && tree.subtree_size() > 1;
  if (forwards) window = op.scratch(w.bytes(tree.vrank, window_end));
  auto local = [&](int vrank) -> const std::byte* {  // where vrank's block is on this rank
    return is_root ? a.send + w.offset(w.real(vrank)) : window.data() + w.bytes(tree.vrank, vrank);
  };
  if (!is_root) {
    // The whole window from the parent; a leaf's window is its own block.
    std::array<Transfer, 2> recvs;
    int n = 0;
    for (const auto& [lo, hi] : w.pieces(tree.vrank, window_end)) {
      if (lo >= hi) continue;
      std::byte* to = forwards ? window.data() + w.bytes(tree.vrank, lo) : a.recv;
      op.recv(recvs[static_cast<std::size_t>(n++)], to, w.bytes(lo, hi), w.real(tree.parent()),
              a.phases[0]);
    }
    co_await op.wait(recvs[0], recvs[1]);
  }
  std::vector<Transfer> sends;
  sends.reserve(64);
  for (int child_vrank : tree.children_largest_first()) {
    const patterns::BinomialTree child{child_vrank, p};
    for (const auto& [lo, hi] : w.pieces(child.vrank, child.vrank + child.subtree_size())) {
      if (lo >= hi) continue;
      sends.emplace_back();
      op.send(sends.back(), local(lo), w.bytes(lo, hi), w.real(child.vrank), a.phases[0]);
    }
  }
  if (is_root && a.recv != nullptr && a.recv != a.send + w.offset(op.rank())) {
    op.copy(a.recv, a.send + w.offset(op.rank()), own_bytes);
  }
  if (forwards) op.copy(a.recv, window.data(), own_bytes);
  for (auto& s : sends)
    co_await op.wait(s);
}

Task gather_linear(Operation& op, GatherArgs a) {
  const int p = op.size();
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.element_size;
  if (op.rank() != a.root) {
    Transfer send;
    op.send(send, a.send, blocks.length(op.rank()) * elem, a.root, a.phases[0]);
    co_await op.wait(send);
    co_return;
  }
  if (!gather_in_place(a, blocks, op.rank())) {
    op.copy(a.recv + blocks.offset(op.rank()) * elem, a.send, blocks.length(op.rank()) * elem);
  }
  std::vector<Transfer> recvs(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    if (r != a.root)
      op.recv(recvs[r], a.recv + blocks.offset(r) * elem, blocks.length(r) * elem, r, a.phases[0]);
  }
  for (auto& r : recvs)
    co_await op.wait(r);
}

Task scatter_linear(Operation& op, ScatterArgs a) {
  const int p = op.size();
  const BlockLayout blocks(a.offsets);
  const std::size_t elem = a.element_size;
  if (op.rank() != a.root) {
    Transfer recv;
    op.recv(recv, a.recv, blocks.length(op.rank()) * elem, a.root, a.phases[0]);
    co_await op.wait(recv);
    co_return;
  }
  std::vector<Transfer> sends(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    if (r != a.root)
      op.send(sends[r], a.send + blocks.offset(r) * elem, blocks.length(r) * elem, r, a.phases[0]);
  }
  const std::byte* own = a.send + blocks.offset(op.rank()) * elem;
  if (a.recv != nullptr && a.recv != own) op.copy(a.recv, own, blocks.length(op.rank()) * elem);
  for (auto& s : sends)
    co_await op.wait(s);
}

}  // namespace

std::span<const AlgorithmRow> gather_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::gather>(Algorithm::binomial_tree, gather_binomial),
      row<Collective::gather>(Algorithm::linear, gather_linear),
  };
  return rows;
}

std::span<const AlgorithmRow> scatter_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::scatter>(Algorithm::binomial_tree, scatter_binomial),
      row<Collective::scatter>(Algorithm::linear, scatter_linear),
  };
  return rows;
}

}  // namespace collx::detail
