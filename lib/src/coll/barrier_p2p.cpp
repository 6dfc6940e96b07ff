// Barrier (dissemination, hierarchical) and point-to-point (direct).
#include <array>

#include "collectives.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

namespace {

// ceil(log2 p) rounds; a one-byte token per round (a zero-byte message would be skipped).
Task barrier_dissemination(Operation& op, BarrierArgs a) {
  const int phase = a.phases[0];
  const int p = op.size();
  std::byte out{1};
  std::byte in{0};
  for (int distance = 1; distance < p; distance *= 2) {
    Transfer send;
    Transfer recv;
    op.recv(recv, &in, 1, patterns::wrap(op.rank() - distance, p), phase);
    op.send(send, &out, 1, patterns::wrap(op.rank() + distance, p), phase);
    co_await op.wait(send, recv);
  }
}

// Hierarchical: inside each node a k-nomial tree (radix kNodeBarrierRadix) gathers a token to
// the node's leader, the leaders run the dissemination barrier, and each node's tree releases
// its ranks. Across nodes ceil(log2 nodes) rounds of one message a node, where dissemination on
// every rank takes ceil(log2 p) rounds whose messages cross from every rank of a node at once.
// On one node, or one rank per node, dissemination.
Task barrier_hierarchical(Operation& op, BarrierArgs a) {
  const auto [inside, across] = a.phases.split({{"inside node", 1}, {"across nodes", 1}});
  const BarrierArgs leaders_args{across};
  const patterns::NodeLayout* layout = node_split(op);
  if (layout == nullptr) {
    co_await barrier_dissemination(op, leaders_args);
    co_return;
  }
  const std::span<const int> members = layout->members(layout->node_of(op.rank()));
  const std::byte token{1};
  std::byte from_parent{0};
  std::array<std::byte, 32> from_children{};
  // One Transfer per child: its token up, then the release down (the ups are done by then).
  std::array<Transfer, 32> links;
  patterns::TreePlace place;
  std::span<const int> children;
  {
    const Operation::Group group(op, members);
    place = patterns::knomial_place(op.rank(), 0, op.size(), patterns::kNodeBarrierRadix);
    children = place.children.span();
    for (std::size_t c = 0; c < children.size(); ++c)
      op.recv(links[c], &from_children[c], 1, children[c], inside[0]);
    for (std::size_t c = 0; c < children.size(); ++c)
      co_await op.wait(links[c]);
    if (place.parent >= 0) {
      Transfer up;
      Transfer down;
      op.recv(down, &from_parent, 1, place.parent, inside[0]);
      op.send(up, &token, 1, place.parent, inside[0]);
      co_await op.wait(up, down);
    }
  }
  if (place.parent < 0) {
    const Operation::Group group(op, layout->leaders());
    co_await barrier_dissemination(op, leaders_args);
  }
  const Operation::Group group(op, members);
  for (std::size_t c = 0; c < children.size(); ++c)
    op.send(links[c], &token, 1, children[c], inside[0]);
  for (std::size_t c = 0; c < children.size(); ++c)
    co_await op.wait(links[c]);
}

}  // namespace

Task point_to_point_task(Operation& op, PointToPointArgs a) {
  Transfer send;
  Transfer recv;
  if (a.source >= 0) op.recv_message(recv, a.recv, a.recv_bytes, a.source, a.tag);
  if (a.dest >= 0) op.send_message(send, a.send, a.send_bytes, a.dest, a.tag);
  co_await op.wait(send, recv);
}

std::span<const AlgorithmRow> barrier_sendrecv_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(barrier, dissemination, barrier_dissemination, 1),
      COLLX_ROW(barrier, hierarchical, barrier_hierarchical, 2),
      COLLX_ROW(sendrecv, direct, point_to_point_task, 0),
  };
  return rows;
}

}  // namespace collx::detail
