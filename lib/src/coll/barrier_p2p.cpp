// Barrier (dissemination) and point-to-point (direct).
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

}  // namespace

std::span<const AlgorithmRow> barrier_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::barrier>(Algorithm::dissemination, barrier_dissemination,
                               model::barrier_dissemination, 1),
  };
  return rows;
}

Task point_to_point_task(Operation& op, PointToPointArgs a) {
  Transfer send;
  Transfer recv;
  if (a.source >= 0) op.recv_message(recv, a.recv, a.recv_bytes, a.source, a.tag);
  if (a.dest >= 0) op.send_message(send, a.send, a.send_bytes, a.dest, a.tag);
  co_await op.wait(send, recv);
}

std::span<const AlgorithmRow> sendrecv_rows() {
  static const AlgorithmRow rows[] = {
      row<Collective::sendrecv>(Algorithm::direct, point_to_point_task, model::sendrecv_direct, 0),
  };
  return rows;
}

}  // namespace collx::detail
