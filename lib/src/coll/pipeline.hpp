// Pipelined building blocks: segmented exchange-and-reduce with a peer, and the segmented ring
// stream; each received segment is reduced while in cache (received + local -> output).
#pragma once

#include <array>
#include <coroutine>
#include <cstddef>
#include <cstdint>

#include "blocks.hpp"
#include "operation.hpp"
#include "reduction.hpp"
#include "ring.hpp"

namespace collx::detail {

// Sends `send_elems` elements at `send` to `peer` while receiving `recv_elems` elements from
// it; each received segment r is combined as dst = local op r (local_is_lower) or r op local.
// `send` may be the same region as `dst` (recursive doubling in place); each segment is then
// overwritten only after its send completed. Otherwise the regions must not overlap.
struct ExchangeReduce {
  int peer = 0;
  const std::byte* send = nullptr;
  std::size_t send_elems = 0;
  std::byte* dst = nullptr;
  const std::byte* local = nullptr;
  std::size_t recv_elems = 0;
  bool local_is_lower = true;
  bool finalize = false;
  const Reduction* reduction = nullptr;
  Phases phases;
};

// The segmented, pipelined exchange (any size).
Task exchange_reduce_pipelined(Operation& op, ExchangeReduce args);

// co_await exchange_reduce(op, args): a message of one segment that fits the inline buffer is
// exchanged by the awaiter itself, with no coroutine frame; larger ones run the pipelined task.
class [[nodiscard]] ExchangeReduceAwaiter {
 public:
  static constexpr std::size_t kInlineBytes = 1024;
  ExchangeReduceAwaiter(Operation& op, const ExchangeReduce& args);
  bool await_ready();
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> waiting);
  void await_resume();

 private:
  Operation& op_;
  ExchangeReduce args_;
  bool small_;
  Task pipelined_;
  Transfer send_;
  Transfer recv_;
  std::array<Transfer*, 2> transfers_{&send_, &recv_};
  // Words, not alignas'd bytes: GCC 12 ignores alignas in a coroutine frame (where this awaiter
  // lives), but keeps a type's natural alignment, which the kernels' loads need.
  std::uint64_t buffer_[kInlineBytes / sizeof(std::uint64_t)];
};
inline ExchangeReduceAwaiter exchange_reduce(Operation& op, const ExchangeReduce& args) {
  return ExchangeReduceAwaiter(op, args);
}

// The sending side of a reduction: `count` elements to `peer`, in the segments that peer's
// exchange_reduce receives and reduces.
inline ExchangeReduceAwaiter send_for_reduction(Operation& op, int peer, const std::byte* send,
                                                std::size_t count, const Reduction& reduction,
                                                const Phases& phases) {
  return exchange_reduce(
      op,
      {.peer = peer, .send = send, .send_elems = count, .reduction = &reduction, .phases = phases});
}

// Steps [first_step, end_step) of a RingPattern over `layout`, in virtual ranks (real = virtual
// + rotation, mod p). Reduce-scatter steps receive each segment into scratch and combine it with
// `input` while hot; allgather steps receive into `output` and forward. A rank's first send comes
// from `input`; intermediate results go to `partial` (two blocks, by step parity) or `output`;
// the completed owned block to `owned_output` or `output` (where an allgather-only stream expects
// it). `input` may equal `output`. Uses phases 0 and 1 of its share.
struct RingStream {
  patterns::RingPattern ring;
  int rotation = 0;
  patterns::BlockLayout layout;
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::byte* partial = nullptr;          // ring_partial_bytes(...) bytes, or null
  std::byte* owned_output = nullptr;     // layout.length(owned) elements, or null
  const Reduction* reduction = nullptr;  // required when the stream has reduce-scatter steps
  std::size_t element_size = 1;
  int first_step = 0;
  int end_step = 0;
  Phases phases;
};
Task ring_stream(Operation& op, RingStream args);
// Size of RingStream::partial for a layout: two step-parities of one buffer per segment.
std::size_t ring_partial_bytes(const patterns::BlockLayout& layout, std::size_t element_size,
                               std::size_t segment_bytes);

// Node segment c of `segments` starts (start(c)) at iteration c and takes its step e = 1..steps
// (step(c, e)) at iteration c + e: the steps of earlier segments move while the node works on
// the next one.
template <class Start, class Step>
Task staggered(std::size_t segments, int steps, Start start, Step step) {
  const auto last = static_cast<std::size_t>(steps);
  for (std::size_t t = 0; t < segments + last; ++t) {
    if (t < segments) co_await start(t);
    for (std::size_t e = 1; e <= last; ++e) {
      if (t >= e && t - e < segments) co_await step(t - e, static_cast<int>(e));
    }
  }
}

}  // namespace collx::detail
