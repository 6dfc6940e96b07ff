// Operation: one collective in flight, the context its algorithm coroutine runs in.
//
// The algorithm posts messages through send()/recv() and suspends in `co_await wait(...)`
// until they complete; progress() tests what the coroutine waits on and resumes it. The
// Engine drives every Operation in flight, so waiting on one never starves another.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "collx/algorithm.hpp"
#include "device_call.hpp"
#include "scratch.hpp"
#include "task.hpp"
#include "transport.hpp"

namespace collx::detail {

class SharedArena;

struct OpInfo {
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::automatic;
  std::uint64_t sequence = 0;  // per communicator, the same on every rank
  int tag_base = 0;            // distinct for operations that may be in flight together
  std::size_t chunk_bytes = 0;
  int pipeline_depth = 1;
};

// Tags: each operation owns kPhasesPerOp consecutive tags so that several operations on one
// communicator never match each other's messages; all tags stay below 32767, the smallest
// MPI_TAG_UB the standard allows.
// The window is a power of two (a mask, not a division, on every call); operations further
// apart than kTagWindow in sequence must not be in flight together.
inline constexpr int kPhasesPerOp = 8;
inline constexpr int kTagWindow = 2048;
static_assert(kTagWindow * kPhasesPerOp < 32767);
inline int tag_base_for(std::uint64_t sequence) {
  return 1 + static_cast<int>(sequence & (kTagWindow - 1)) * kPhasesPerOp;
}

// A schedule's share of its operation's tags: `count` consecutive phases from `first`.
// A composite algorithm hands each of its parts a named share of its own (part()); shares
// are checked against the budget they come from, so two parts can never be handed the same
// tag, and a schedule that asks for a phase outside its share fails at once instead of
// matching another part's receive. The last phase of an operation is COLLX_CHECK's
// (kCheckPhase), outside every schedule's budget.
class Phases {
 public:
  // The whole budget of a schedule that runs as the operation's algorithm.
  constexpr Phases() = default;
  int operator[](int i) const {
    if (i < 0 || i >= count_) [[unlikely]]
      outside(i);
    return first_ + i;
  }
  // The `count` phases from `offset` of this share, for the part called `name`.
  Phases part(const char* name, int offset, int count) const;
  int first() const { return first_; }
  int count() const { return count_; }
  // COLLX_CHECK's share: the operation's last phase.
  static Phases check();

 private:
  constexpr Phases(int first, int count, const char* name)
      : first_(first), count_(count), name_(name) {}
  [[noreturn]] void outside(int i) const;
  int first_ = 0;
  int count_ = kPhasesPerOp - 1;
  const char* name_ = "schedule";
};
// Phase (tag offset within an operation) reserved for COLLX_CHECK's signature comparison.
inline constexpr int kCheckPhase = kPhasesPerOp - 1;

// The latency path: a blocking call of at most this many bytes on host memory, alone in the
// process, may run straight through the transport (no coroutine, no Operation). Its messages
// are the ones the operation path sends for a one-segment buffer, so ranks that take different
// paths still match.
inline constexpr std::size_t kLatencyPathBytes = 1024;

class Operation {
 public:
  // `device`: the call's buffers are device memory; every message, copy, reduction and scratch
  // buffer of the algorithm then goes through it (see device_call.hpp).
  Operation(Transport& transport, const OpInfo& info, std::shared_ptr<void> keepalive = {},
            std::unique_ptr<DeviceCall> device = nullptr);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  // Runs `task` until it first waits (or finishes).
  void start(Task task);
  // Tests what the algorithm waits on and resumes it if it can go on; true when finished.
  bool progress();
  bool done() const { return done_; }
  // After done(): rethrows the algorithm's error, if any, as a collx::Error naming this
  // operation's collective and rank.
  void rethrow_if_failed() const;

  const OpInfo& info() const { return info_; }
  Transport& transport() { return transport_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t chunk_bytes() const { return info_.chunk_bytes; }
  int pipeline_depth() const { return info_.pipeline_depth; }

  // Post messages. A zero-byte message is not sent at all: both ends derive the same length
  // from the same layout, so both skip it.
  void send(Transfer& t, const void* buf, std::size_t bytes, int peer, int phase = 0);
  void recv(Transfer& t, void* buf, std::size_t bytes, int peer, int phase = 0);
  // Post a message whatever its length, with this tag as it is (point-to-point: the user's
  // messages, where a receive may be longer than what arrives and zero bytes still match).
  void send_message(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag);
  void recv_message(Transfer& t, void* buf, std::size_t bytes, int peer, int tag);

  // The memory the algorithm works on: true when its buffers (and scratch) are device memory,
  // which the host must not touch (no memcpy, no stack buffers).
  bool device_memory() const { return device_ != nullptr && !host_scope_; }
  // Within a device call, a stretch that works on host memory (COLLX_CHECK's signature words).
  void set_host_scope(bool host) { host_scope_ = host; }
  // "host", or the device call's "direct" / "staged".
  std::string_view memory_mode() const { return device_ ? device_->mode() : "host"; }
  // dst <- src, non-overlapping (copy) or possibly overlapping (move), in the call's memory.
  void copy(void* dst, const void* src, std::size_t bytes);
  void move(void* dst, const void* src, std::size_t bytes);
  // co_await wait(a, b, ...): suspends until all the given transfers are complete.
  template <class... Ts>
  auto wait(Ts&... transfers) {
    return Awaiter<sizeof...(Ts)>{*this, {&transfers...}};
  }

  // co_await until(arena, counter, target, peer, what): suspends until `counter` (a counter of
  // the shared segment `arena` that another rank advances, see shm_arena.hpp) reaches
  // `target`. `peer` and `what` ("a chunk from", "ring room from") name what is awaited in a
  // timeout message. An exclusive operation waits in place (SharedArena::wait).
  struct CounterAwaiter {
    Operation& op;
    const SharedArena& arena;
    const std::atomic<std::uint64_t>& counter;
    std::uint64_t target;
    int peer;
    const char* what;
    bool await_ready() {
      return counter.load(std::memory_order_acquire) >= target || op.wait_in_place(*this);
    }
    void await_suspend(std::coroutine_handle<> h) { op.suspend_on_counter(h, *this); }
    void await_resume() const noexcept {}
  };
  CounterAwaiter until(const SharedArena& arena, const std::atomic<std::uint64_t>& counter,
                       std::uint64_t target, int peer, const char* what) {
    return {*this, arena, counter, target, peer, what};
  }

  ScratchBuffer scratch(std::size_t bytes) {
    if (device_memory()) return device_->scratch(bytes);
    return ScratchPool::global().acquire(bytes);
  }

  // "recv of 4096 B from rank 3" for the timeout message.
  std::string waiting_description() const;

  // For awaiters: true when the transfers are complete (an exclusive operation waits for them
  // here); otherwise the awaiter suspends with suspend_on and progress() resumes `h` once they
  // are. `waiting` must stay valid while suspended (it lives in the awaiter).
  bool ready(std::span<Transfer* const> transfers) {
    if (device_ != nullptr) [[unlikely]] {
      if (!exclusive_) return device_->test_all(transfers);
      device_->wait_all(transfers);
      return true;
    }
    if (exclusive_) {
      transport_.wait_all(transfers);
      return true;
    }
    return transport_.test_all(transfers);
  }
  void suspend_on(std::coroutine_handle<> h, std::span<Transfer* const> waiting);
  void suspend_on_counter(std::coroutine_handle<> h, const CounterAwaiter& awaiter);
  // For an exclusive operation: waits for the counter here and returns true; else false.
  bool wait_in_place(const CounterAwaiter& awaiter);
  // Suspended on a shared-memory counter: waits for it up to `limit` (the engine's wait, with
  // only this operation in flight, so an oversubscribed rank sleeps instead of polling).
  void wait_on_counter_for(std::chrono::microseconds limit);

 private:
  template <std::size_t N>
  struct Awaiter {
    Operation& op;
    std::array<Transfer*, N> transfers;
    bool await_ready() { return op.ready(transfers); }
    void await_suspend(std::coroutine_handle<> h) { op.suspend_on(h, transfers); }
    void await_resume() const noexcept {}
  };
  void resume();

  Transport& transport_;
  OpInfo info_;
  int rank_;
  int size_;
  std::shared_ptr<void> keepalive_;
  // Before task_: the coroutine frame (which may hold device scratch and the call's reduction)
  // goes first.
  std::unique_ptr<DeviceCall> device_;
  bool host_scope_ = false;
  // The algorithm has finished; the call's device work has not yet (nonblocking device calls).
  bool finishing_ = false;
  Task task_;
  std::coroutine_handle<> resume_point_;
  std::span<Transfer* const> waiting_;
  // Or a shared-memory counter it waits on (see until()).
  const std::atomic<std::uint64_t>* watched_ = nullptr;
  const SharedArena* watched_arena_ = nullptr;
  std::uint64_t watched_target_ = 0;
  int watched_peer_ = -1;
  const char* watched_what_ = "";
  bool done_ = false;
  // A blocking operation that is the only one in flight in the process (and has no timeout to
  // watch) waits for its messages in the transport directly: no suspension, no engine loop.
  bool exclusive_ = false;
  std::exception_ptr error_;
  friend void run_blocking(Operation& op, Task task);
};

// Drives every operation in flight in this process. Waiting on one operation progresses all
// of them: a rank blocked in one collective must still answer its peers in the others.
//
// With COLLX_PROGRESS_THREAD=1 (and MPI initialised with MPI_THREAD_MULTIPLE) a background
// thread also progresses the operations in flight every COLLX_PROGRESS_INTERVAL_US, so a
// nonblocking collective moves on while the caller computes.
class Engine {
 public:
  static Engine& instance();
  ~Engine();

  // `op` must have been started: the progress thread may progress it from now on.
  void add(Operation* op);
  void remove(Operation* op);
  // Progresses everything until `op` is done; throws the operation's error, or
  // ErrorCode::timeout after COLLX_TIMEOUT seconds.
  void wait(Operation& op);
  // Progresses everything once; true when `op` is done (errors are thrown by wait()).
  bool test(Operation& op);
  // Whether the progress thread runs (it starts with the first nonblocking operation).
  bool progress_thread_running() const { return thread_.joinable(); }

 private:
  friend void run_blocking(Operation& op, Task task);
  friend bool can_run_in_place();
  void progress_all();
  void start_progress_thread_once();
  void progress_thread_main();

  std::mutex mutex_;
  std::vector<Operation*> active_;
  std::atomic<int> active_count_{0};
  std::condition_variable work_;
  bool stopping_ = false;
  bool thread_decided_ = false;
  std::thread thread_;
};

// Runs a blocking collective: start, then wait through the engine.
void run_blocking(Operation& op, Task task);

// True when a blocking call may run to completion in place, without an Operation: nothing else
// is in flight in the process (so nothing needs this thread's progress), and no timeout,
// COLLX_CHECK or COLLX_DEBUG=INFO needs the operation machinery.
bool can_run_in_place();

// Rethrows `error` as a collx::Error that names `collective` and `rank` where the thrower (a
// transport) could not.
[[noreturn]] void rethrow_named(std::exception_ptr error, Collective collective, int rank);

}  // namespace collx::detail
