// Ring: reduce-scatter and allgather as one stream of steps around the ring.
//
// At step t every rank sends one block to rank+1 and receives one from rank-1. The block a
// rank sends at step t is the block it received at step t-1 (after reducing it during the
// reduce-scatter steps), so segments can flow on as soon as they arrive. After the p-1
// reduce-scatter steps, rank r holds the complete reduction of block owned_block(); the p-1
// allgather steps then pass the completed blocks once around the ring.
#pragma once

namespace collx::patterns {

// value mod size in [0, size). The callers' values lie within one size of that range (a rank
// plus or minus an offset below size): those take a compare, not a division, which costs more
// than the rest of a small message's schedule arithmetic.
inline int wrap(int value, int size) {
  if (value >= 0 && value < size) [[likely]]
    return value;
  if (value < 0 && value >= -size) return value + size;
  if (value >= size && value - size < size) return value - size;
  const int r = value % size;
  return r < 0 ? r + size : r;
}

struct RingPattern {
  int rank = 0;
  int size = 1;
  // Which block the rank completes: shift 1 suits allreduce (its first send is its own block),
  // shift 0 gives MPI reduce_scatter's "rank r gets block r".
  int shift = 1;

  int send_peer() const { return wrap(rank + 1, size); }
  int recv_peer() const { return wrap(rank - 1, size); }
  int owned_block() const { return wrap(rank + shift, size); }
  int reduce_scatter_steps() const { return size - 1; }
  int allgather_steps() const { return size - 1; }
  // Steps are numbered 0 .. 2(p-1)-1: reduce-scatter first, then allgather.
  int send_block(int step) const { return wrap(owned_block() - step - 1, size); }
  int recv_block(int step) const { return wrap(owned_block() - step - 2, size); }
  bool is_reduce_step(int step) const { return step < size - 1; }
};

}  // namespace collx::patterns
