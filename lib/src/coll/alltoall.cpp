// Alltoall: pairwise exchange (any size) and Bruck (small blocks, ceil(log2 p) messages); the
// arena's row (one node) is in shm_collectives.cpp.
#include <vector>

#include "bruck.hpp"
#include "collectives.hpp"
#include "registry.hpp"
#include "tree.hpp"

namespace collx::detail {

const std::byte* stable_input(Operation& op, const AlltoallArgs& a, ScratchBuffer& copy) {
  if (a.send != a.recv) return a.send;
  const std::size_t total = a.count * a.element_size * static_cast<std::size_t>(op.size());
  copy = op.scratch(total);
  op.copy(copy.data(), a.recv, total);
  return copy.data();
}

namespace {

Task alltoall_pairwise(Operation& op, AlltoallArgs a) {
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t block = a.count * a.element_size;
  if (block == 0) co_return;
  ScratchBuffer copy;
  const std::byte* input = stable_input(op, a, copy);
  // Several steps in flight: step s+depth is posted once step s is done.
  const int depth = std::max(1, op.pipeline_depth());
  std::vector<Transfer> sends(static_cast<std::size_t>(p));
  std::vector<Transfer> recvs(static_cast<std::size_t>(p));
  auto at = [&](auto* base, int r) { return base + static_cast<std::size_t>(r) * block; };
  auto post = [&](int step) {
    const auto pair = patterns::pairwise_step(rank, p, step);
    op.recv(recvs[step], at(a.recv, pair.recv_from), block, pair.recv_from, a.phases[0]);
    op.send(sends[step], at(input, pair.send_to), block, pair.send_to, a.phases[0]);
  };
  for (int step = 1; step < p && step <= depth; ++step)
    post(step);
  // The own block while the first steps' messages move (they touch other blocks).
  op.copy(at(a.recv, rank), at(input, rank), block);
  for (int step = 1; step < p; ++step) {
    co_await op.wait(sends[step], recvs[step]);
    if (step + depth < p) post(step + depth);
  }
}

// Bruck: rotate so that block i is the one for rank + i; in step k every block with bit k set
// moves 2^k ranks on, packed in one message; at the end block i holds what rank - i sent.
Task alltoall_bruck(Operation& op, AlltoallArgs a) {
  const int p = op.size();
  const int rank = op.rank();
  const std::size_t block = a.count * a.element_size;
  if (block == 0) co_return;
  const auto n = static_cast<std::size_t>(p);
  ScratchBuffer work = op.scratch(3 * n * block);
  std::byte* rotated = work.data();
  std::byte* outgoing = rotated + n * block;
  std::byte* incoming = outgoing + n * block;
  auto at = [&](auto* base, int index) { return base + static_cast<std::size_t>(index) * block; };
  for (int i = 0; i < p; ++i)
    op.copy(at(rotated, i), at(a.send, patterns::bruck_block_at(rank, i, p)), block);
  for (int distance = 1; distance < p; distance *= 2) {
    std::size_t packed = 0;
    for (int i = 1; i < p; ++i) {
      if (patterns::bruck_alltoall_moves(i, distance)) {
        op.copy(outgoing + packed, at(rotated, i), block);
        packed += block;
      }
    }
    const auto step = patterns::bruck_alltoall_step(rank, p, distance);
    Transfer send;
    Transfer recv;
    op.recv(recv, incoming, packed, step.recv_from, a.phases[0]);
    op.send(send, outgoing, packed, step.send_to, a.phases[0]);
    co_await op.wait(send, recv);
    std::size_t unpacked = 0;
    for (int i = 1; i < p; ++i) {
      if (patterns::bruck_alltoall_moves(i, distance)) {
        op.copy(at(rotated, i), incoming + unpacked, block);
        unpacked += block;
      }
    }
  }
  for (int i = 0; i < p; ++i)
    op.copy(at(a.recv, patterns::bruck_alltoall_source(rank, i, p)), at(rotated, i), block);
}

}  // namespace

std::span<const AlgorithmRow> alltoall_rows() {
  static const AlgorithmRow rows[] = {
      COLLX_ROW(alltoall, pairwise, alltoall_pairwise, 1),
      COLLX_ROW(alltoall, bruck, alltoall_bruck, 1),
      COLLX_ROW(alltoall, shared_memory, alltoall_shared_memory, 1, Algorithm::pairwise),
  };
  return rows;
}

}  // namespace collx::detail
