#include "pipeline.hpp"

#include <algorithm>
#include <vector>

#include "collx/error.hpp"
#include "tree.hpp"

namespace collx::detail {

using patterns::BlockLayout;
using patterns::segment_count;

ExchangeReduceAwaiter::ExchangeReduceAwaiter(Operation& op, const ExchangeReduce& args)
    : op_(op), args_(args) {
  const std::size_t elem = args.reduction->element_size;
  // Both ends must agree on one segment each way, by the pipelined path's rule; the inline
  // buffer is host memory, so device calls always take the pipelined path.
  const std::size_t recv_bytes = args.recv_elems * elem;
  small_ = args.send_elems * elem <= op.segment_bytes() && recv_bytes <= op.segment_bytes() &&
           recv_bytes <= kInlineBytes && !op.device_memory();
}

bool ExchangeReduceAwaiter::await_ready() {
  if (!small_) return false;
  const std::size_t elem = args_.reduction->element_size;
  op_.recv(recv_, buffer_, args_.recv_elems * elem, args_.peer, args_.phases[0]);     // first, as
  op_.send(send_, args_.send, args_.send_elems * elem, args_.peer, args_.phases[0]);  // Sendrecv
  return op_.ready(transfers_);
}

std::coroutine_handle<> ExchangeReduceAwaiter::await_suspend(std::coroutine_handle<> waiting) {
  if (small_) {
    op_.suspend_on(waiting, transfers_);
    return std::noop_coroutine();
  }
  pipelined_ = exchange_reduce_pipelined(op_, args_);
  pipelined_.handle().promise().continuation = waiting;
  return pipelined_.handle();
}

void ExchangeReduceAwaiter::await_resume() {
  if (!small_) {
    pipelined_.rethrow_if_failed();
    return;
  }
  if (args_.recv_elems == 0) return;
  const std::byte* local = args_.local;
  const auto* received = reinterpret_cast<const std::byte*>(buffer_);
  args_.reduction->combine(args_.dst, args_.local_is_lower ? local : received,
                           args_.local_is_lower ? received : local, args_.recv_elems,
                           args_.finalize);
}

Task exchange_reduce_pipelined(Operation& op, ExchangeReduce a) {
  const std::size_t elem = a.reduction->element_size;
  const std::size_t send_bytes = a.send_elems * elem;
  const std::size_t recv_bytes = a.recv_elems * elem;
  // The same region sent and reduced into (recursive doubling in place); an empty region at
  // the same address is no alias.
  const bool send_is_dst = a.send == a.dst && send_bytes > 0 && recv_bytes > 0;
  if (send_is_dst && send_bytes != recv_bytes) {
    throw Error(ErrorCode::internal, "", op.rank(), "exchange_reduce: aliased regions differ");
  }
  const int send_segments = segment_count(send_bytes, op.segment_bytes());
  const int recv_segments = segment_count(recv_bytes, op.segment_bytes());
  const BlockLayout send_layout{a.send_elems, send_segments};
  const BlockLayout recv_layout{a.recv_elems, recv_segments};
  const int depth = std::max(1, op.pipeline_depth());
  const std::size_t buffer_bytes = recv_layout.length(0) * elem;
  const int buffers = std::min(depth, recv_segments);
  const ScratchBuffer pooled = op.scratch(buffer_bytes * static_cast<std::size_t>(buffers));
  std::byte* const scratch = pooled.data();

  TransferArray sends(static_cast<std::size_t>(send_segments));
  TransferArray recvs(static_cast<std::size_t>(recv_segments));
  auto post_send = [&](int k) {
    op.send(sends[k], a.send + send_layout.offset(k) * elem, send_layout.length(k) * elem, a.peer,
            a.phases[0]);
  };
  auto post_recv = [&](int k) {
    op.recv(recvs[k], scratch + static_cast<std::size_t>(k % buffers) * buffer_bytes,
            recv_layout.length(k) * elem, a.peer, a.phases[0]);
  };
  for (int k = 0; k < buffers; ++k)
    post_recv(k);
  for (int k = 0; k < std::min(depth, send_segments); ++k)
    post_send(k);

  for (int k = 0; k < std::max(send_segments, recv_segments); ++k) {
    if (k < recv_segments) {
      co_await op.wait(recvs[k]);
      if (send_is_dst) co_await op.wait(sends[k]);
      const std::size_t offset = recv_layout.offset(k) * elem;
      const std::byte* received = scratch + static_cast<std::size_t>(k % buffers) * buffer_bytes;
      const std::byte* local = a.local + offset;
      a.reduction->combine(a.dst + offset, a.local_is_lower ? local : received,
                           a.local_is_lower ? received : local, recv_layout.length(k), a.finalize);
      if (k + buffers < recv_segments) post_recv(k + buffers);
    }
    if (k + depth < send_segments) post_send(k + depth);
  }
  for (auto& s : sends)
    co_await op.wait(s);
}

std::size_t ring_partial_bytes(const BlockLayout& layout, std::size_t elem,
                               std::size_t segment_bytes) {
  const std::size_t longest = layout.max_length();
  const int nseg = segment_count(longest * elem, segment_bytes);
  return 2 * static_cast<std::size_t>(nseg) * BlockLayout{longest, nseg}.length(0) * elem;
}

Task ring_stream(Operation& op, RingStream a) {
  const auto& ring = a.ring;
  const int p = ring.size;
  if (p == 1 || a.first_step >= a.end_step) co_return;
  const std::size_t elem = a.element_size;
  const int last_reduce_step = ring.reduce_scatter_steps() - 1;
  // Every block is cut into the same number of segments (from the longest block), so both ends
  // of each message derive its length alone.
  const std::size_t longest = a.layout.max_length();
  const int nseg = segment_count(longest * elem, op.segment_bytes());
  const int units = (a.end_step - a.first_step) * nseg;
  // At most one step ahead: a receive for step t+1 is then posted only after the segment it
  // overwrites was forwarded, and a reduce never writes where a receive is pending.
  const int depth = std::min(std::max(1, op.pipeline_depth()), nseg);
  const std::size_t buffer_bytes = BlockLayout{longest, nseg}.length(0) * elem;
  const bool has_reduce = ring.is_reduce_step(a.first_step);
  // With one segment a block, a reduce step's receive (into scratch) is posted one step ahead
  // of the sends: the neighbour's next message finds its receive waiting (SMPI moves a message
  // only once its receive is posted; an MPI library matches it without its unexpected queue).
  // With more segments `depth` of them are in flight already, and one more would share their
  // link and delay the one awaited.
  const int recv_ahead = nseg == 1 ? 1 : 0;
  const int recv_buffers = depth + recv_ahead;
  ScratchBuffer scratch;
  if (has_reduce) scratch = op.scratch(buffer_bytes * static_cast<std::size_t>(recv_buffers));
  const int send_peer = patterns::to_real(ring.send_peer(), a.rotation, p);
  const int recv_peer = patterns::to_real(ring.recv_peer(), a.rotation, p);

  auto step_of = [&](int u) { return a.first_step + u / nseg; };
  auto unit_of = [&](int step, int k) { return (step - a.first_step) * nseg + k; };
  auto segment = [&](int block) { return BlockLayout{a.layout.length(block), nseg}; };
  // Where step t leaves segment k of `block` (and where step t+1 sends it from).
  auto written = [&](int t, int block, int k) -> std::byte* {
    const std::size_t in_block = segment(block).offset(k) * elem;
    if (ring.is_reduce_step(t)) {
      if (t == last_reduce_step && a.owned_output != nullptr) return a.owned_output + in_block;
      if (t < last_reduce_step && a.partial != nullptr) {
        // One fixed buffer per segment and step parity, so the hazard wait on segment k's
        // previous send covers what is overwritten even where block lengths differ.
        return a.partial + (static_cast<std::size_t>(t % 2) * static_cast<std::size_t>(nseg) +
                            static_cast<std::size_t>(k)) *
                               buffer_bytes;
      }
    }
    return a.output + a.layout.offset(block) * elem + in_block;
  };
  // Adjacent steps interleave their sends on one link; alternating the tag by step parity
  // keeps MPI's in-order matching from pairing a step's receive with the next step's send.
  auto phase_of = [&](int step) { return a.phases[step & 1]; };

  TransferArray sends(static_cast<std::size_t>(units));
  TransferArray recvs(static_cast<std::size_t>(units));
  // Per output segment, the last send that reads it: a receive into that segment waits for it.
  std::vector<int> last_send(static_cast<std::size_t>(p) * static_cast<std::size_t>(nseg), -1);

  auto post_send = [&](int u) {
    const int t = step_of(u);
    const int k = u % nseg;
    const int block = ring.send_block(t);
    const std::byte* source =
        t == 0 ? a.input + (a.layout.offset(block) + segment(block).offset(k)) * elem
               : written(t - 1, block, k);
    if (a.output != nullptr && source >= a.output && source < a.output + a.layout.count() * elem) {
      last_send[static_cast<std::size_t>(block * nseg + k)] = u;
    }
    op.send(sends[u], source, segment(block).length(k) * elem, send_peer, phase_of(t));
  };
  // The send that must finish before unit u's receive may be posted, if any.
  auto recv_hazard = [&](int u) -> Transfer* {
    const int t = step_of(u);
    if (ring.is_reduce_step(t)) return nullptr;  // reduce-scatter receives go to scratch
    const int h = last_send[static_cast<std::size_t>(ring.recv_block(t) * nseg + u % nseg)];
    return h >= 0 ? &sends[h] : nullptr;
  };
  auto received = [&](int u) {
    return scratch.data() + static_cast<std::size_t>(u % recv_buffers) * buffer_bytes;
  };
  auto post_recv = [&](int u) {
    const int t = step_of(u);
    const int k = u % nseg;
    const int block = ring.recv_block(t);
    std::byte* target = ring.is_reduce_step(t) ? received(u) : written(t, block, k);
    op.recv(recvs[u], target, segment(block).length(k) * elem, recv_peer, phase_of(t));
  };
  // The receives that may be posted once `sent` sends are: as many, and recv_ahead more where
  // that one is a reduce step's.
  auto receivable = [&](int sent) {
    return std::min(units,
                    sent + (sent < units && ring.is_reduce_step(step_of(sent)) ? recv_ahead : 0));
  };

  for (int u = 0; u < depth; ++u)
    post_send(u);
  int posted = 0;  // receives posted: units [0, posted)
  for (int u = 0; u < units; ++u) {
    for (const int end = receivable(std::min(units, u + depth)); posted < end; ++posted) {
      if (Transfer* hazard = recv_hazard(posted)) co_await op.wait(*hazard);
      post_recv(posted);
    }
    const int t = step_of(u);
    const int k = u % nseg;
    co_await op.wait(recvs[u]);
    if (ring.is_reduce_step(t)) {
      const int block = ring.recv_block(t);
      // A partial buffer is reused every other step: the send that read it must be done.
      if (a.partial != nullptr && t < last_reduce_step && t >= a.first_step + 2) {
        co_await op.wait(sends[unit_of(t - 1, k)]);
      }
      a.reduction->combine(written(t, block, k), received(u),
                           a.input + (a.layout.offset(block) + segment(block).offset(k)) * elem,
                           segment(block).length(k), /*finalize=*/t == last_reduce_step);
    }
    // Sends go out in unit order, `depth` ahead of the receives, as the peer posts them (sends
    // posted further ahead stalled the MPI library's rendezvous); unit u + depth reads what
    // unit u + depth - nseg <= u wrote.
    if (u + depth < units) post_send(u + depth);
  }
  for (auto& s : sends)
    co_await op.wait(s);
}

}  // namespace collx::detail
