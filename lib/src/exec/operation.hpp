// Operation: one collective in flight, the context its algorithm coroutine runs in (it posts
// messages and suspends in `co_await wait(...)`). The Engine drives every Operation in flight.
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
#include <utility>
#include <vector>

#include "collx/algorithm.hpp"
#include "config.hpp"
#include "data_path.hpp"
#include "scratch.hpp"
#include "task.hpp"
#include "transport.hpp"
#include "wait_condition.hpp"

namespace collx::detail {

struct OpInfo {
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::automatic;
  std::uint64_t sequence = 0;  // per communicator, the same on every rank
  int tag_base = 0;            // distinct for operations that may be in flight together
  std::size_t segment_bytes = 0;
  int pipeline_depth = 1;
  bool shared_arena = true;  // false: run as where the ranks share no arena, on every rank
  bool blocking = false;     // on every rank (as MPI requires): Algorithm::mpi's blocking form
};

// Each operation owns kPhasesPerOp consecutive tags, below 32767 (the smallest MPI_TAG_UB);
// operations further apart than kTagWindow in sequence must not be in flight together.
inline constexpr int kPhasesPerOp = 8;
inline constexpr int kTagWindow = 2048;
static_assert(kTagWindow * kPhasesPerOp < 32767);
inline int tag_base_for(std::uint64_t sequence) {
  return 1 + static_cast<int>(sequence & (kTagWindow - 1)) * kPhasesPerOp;
}
// Phase (tag offset within an operation) reserved for COLLX_CHECK's signature comparison.
inline constexpr int kCheckPhase = kPhasesPerOp - 1;

// A schedule's share of its operation's tags: `count` consecutive phases from `first`, checked
// against the budget they are cut from. The last phase is COLLX_CHECK's, outside every budget.
class Phases {
 public:
  // The whole budget of a schedule that runs as the operation's algorithm.
  constexpr Phases() = default;
  int operator[](int i) const {
    if (i < 0 || i >= count_) [[unlikely]]
      outside(i);
    return first_ + i;
  }
  // A part's name and how many phases it takes.
  struct Share {
    const char* name;
    int count;
  };
  // Consecutive shares of this one, one per part; more than it holds throw (ErrorCode::internal).
  //   const auto [inside, across] = a.phases.split({{"node reduce", 1}, {"across nodes", 2}});
  template <std::size_t N>
  std::array<Phases, N> split(const Share (&shares)[N]) const {
    std::array<Phases, N> out;
    int offset = 0;
    for (std::size_t i = 0; i < N; ++i) {
      out[i] = part(shares[i].name, offset, shares[i].count);
      offset += shares[i].count;
    }
    return out;
  }
  // The `count` phases from `offset` of this share, for the part `name`; checked likewise.
  Phases part(const char* name, int offset, int count) const;
  int count() const { return count_; }
  // COLLX_CHECK's share: the operation's last phase.
  static constexpr Phases check() { return {kCheckPhase, 1, "COLLX_CHECK"}; }

 private:
  constexpr Phases(int first, int count, const char* name)
      : first_(first), count_(count), name_(name) {}
  [[noreturn]] void outside(int i) const;
  int first_ = 0;
  int count_ = kPhasesPerOp - 1;
  const char* name_ = "schedule";
};
// Calls of up to this many bytes in all (or COLLX_DEVICE_HOST_COPY_BYTES) on device memory,
// where every transport takes it, still run through the arena on host copies.
inline constexpr std::size_t kArenaHostCopyBytes = std::size_t{64} << 10;

class Operation {
 public:
  // `path`: how the call's bytes move when not host memory; null: straight through `transport`.
  Operation(Transport& transport, const OpInfo& info, std::shared_ptr<void> keepalive = {},
            std::unique_ptr<DataPath> path = nullptr);
  ~Operation();  // not copyable (its unique_ptr, its references)

  // Runs `task` until it first waits (or finishes).
  void start(Task task);
  // Tests what the algorithm waits on and resumes it if it can go on; true when finished.
  bool progress();
  bool done() const { return done_; }
  // After done(): rethrows the algorithm's error as a collx::Error naming collective and rank.
  void rethrow_if_failed() const;

  const OpInfo& info() const { return info_; }
  Transport& transport() { return transport_; }
  // The rank and size the algorithm sees: the communicator's, or within a Group (below) its.
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether a Group is open: the algorithm addresses some of the communicator's ranks only.
  bool in_group() const { return !members_.empty(); }
  // The arena the ranks the algorithm sees share: the communicator's, or the open Group's.
  SharedArena* arena() const {
    if (!members_.empty()) return group_arena_;
    return info_.shared_arena ? transport_.shared_arena() : nullptr;
  }

  // A schedule holding an arena turn took its ticket when built: where the call fails before it
  // runs (COLLX_CHECK), the turn is still taken and ended in order.
  void set_holds_turn() { holds_turn_ = true; }
  bool holds_turn() const { return holds_turn_; }
  void skip_schedule() { schedule_skipped_ = true; }
  bool schedule_skipped() const { return schedule_skipped_; }
  // The operation ends the turn of `arena` (where this rank is `me`) when it finishes.
  void ends_turn_of(SharedArena& arena, int me) {
    turn_arena_ = &arena;
    turn_rank_ = me;
  }
  bool ends_turn() const { return turn_arena_ != nullptr; }
  bool started() const { return task_.valid(); }

  // The operation is an arena row's schedule as a whole: it sends no messages of its own.
  void mark_arena_row() { arena_row_ = true; }

  // An arena row's operation gets no messages: one of its tags arriving means mismatched calls.
  // Throws Error(mismatch).
  void refuse_foreign_messages();

  // A part of a composite algorithm on some of the communicator's ranks (a node's, the
  // leaders): while open, rank(), size() and peers index `members`; messages keep the
  // operation's tags (the part takes a share of its Phases). Groups do not nest. `arena`: the one
  // `members` share, from an operation holding its turn for the whole run.
  class Group {
   public:
    Group(Operation& op, std::span<const int> members, SharedArena* arena = nullptr);
    ~Group();
    Group(const Group&) = delete;  // its destructor ends the group once

   private:
    Operation& op_;
  };
  std::size_t segment_bytes() const { return info_.segment_bytes; }
  int pipeline_depth() const { return info_.pipeline_depth; }

  // Post messages. A zero-byte message is not sent: both ends derive the same length and skip.
  void send(Transfer& t, const void* buf, std::size_t bytes, int peer, int phase = 0) {
    bytes == 0 ? skip(t, true, peer) : send_message(t, buf, bytes, peer, info_.tag_base + phase);
  }
  void recv(Transfer& t, void* buf, std::size_t bytes, int peer, int phase = 0) {
    bytes == 0 ? skip(t, false, peer) : recv_message(t, buf, bytes, peer, info_.tag_base + phase);
  }
  // Post a message of any length with this tag as it is (point-to-point: a receive may be
  // longer than what arrives, and zero bytes still match).
  void send_message(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag);
  void recv_message(Transfer& t, void* buf, std::size_t bytes, int peer, int tag);

  // True when the host must not touch the buffers and scratch: device memory.
  bool device_memory() const { return !path_->host_accessible(); }
  // A stretch on host memory within a call on other memory (COLLX_CHECK's signature words).
  void use_host_path(bool host) { path_ = host ? &host_path_ : &call_path_; }
  // "host", or the device call's "direct" / "staged".
  std::string_view memory_mode() const { return call_path_.mode(); }
  // dst <- src, non-overlapping (copy) or possibly overlapping (move), in the call's memory.
  void copy(void* dst, const void* src, std::size_t bytes, bool may_overlap = false) {
    if (bytes != 0) on_path([&](auto& path) { path.copy(dst, src, bytes, may_overlap); });
  }
  void move(void* dst, const void* src, std::size_t bytes) { copy(dst, src, bytes, true); }
  // co_await wait(a, b, ...): suspends until all the given transfers are complete.
  template <class... Ts>
  auto wait(Ts&... transfers) {
    return Awaiter<sizeof...(Ts)>{*this, {&transfers...}};
  }

  // co_await until(condition, then): suspends until `condition` is met, then gives `then()`.
  template <class Condition, class Then>
  struct ThenAwaiter {
    Operation& op;
    Condition condition;
    Then then;
    bool await_ready() { return condition.met() || op.wait_in_place(condition); }
    void await_suspend(std::coroutine_handle<> h) {
      op.resume_point_ = h;
      op.watched_ = &condition;
    }
    decltype(auto) await_resume() { return then(); }
  };
  template <class Condition, class Then>
  ThenAwaiter<Condition, Then> until(Condition condition, Then then) {
    return {*this, std::move(condition), std::move(then)};
  }
  // co_await until(condition): `condition` must outlive the wait (a temporary in the co_await
  // expression does).
  auto until(const WaitCondition& condition) {
    const auto nothing = [] {};
    return ThenAwaiter<const WaitCondition&, decltype(nothing)>{*this, condition, nothing};
  }

  ScratchBuffer scratch(std::size_t bytes) { return path_->scratch(bytes); }

  // "recv of 4096 B from rank 3" for the timeout message.
  std::string waiting_description() const;

  // For awaiters: true when the transfers are complete (an exclusive operation waits here).
  bool ready(std::span<Transfer* const> transfers) {
    return on_path([&](auto& path) { return path.test_or_wait_all(transfers, exclusive_); });
  }
  void suspend_on(std::coroutine_handle<> h, std::span<Transfer* const> waiting) {
    resume_point_ = h;
    waiting_ = waiting;
  }
  // For an exclusive operation: waits for the condition here and returns true; else false.
  bool wait_in_place(const WaitCondition& condition);
  // Suspended on a condition: waits for it up to `limit` (an oversubscribed rank sleeps).
  void wait_on_condition_for(std::chrono::microseconds limit) {
    if (watched_ != nullptr) watched_->wait_for(limit);
  }

 private:
  // The algorithm failed: the failure notices hear of it unless the error came from them.
  void fail(std::exception_ptr error) noexcept;
  template <std::size_t N>
  struct Awaiter {
    Operation& op;
    std::array<Transfer*, N> transfers;
    bool await_ready() { return op.ready(transfers); }
    void await_suspend(std::coroutine_handle<> h) { op.suspend_on(h, transfers); }
    void await_resume() const noexcept {}
  };
  void resume();
  // Done once the call's data path has finished (finishing_ until then).
  void finish_path();
  void skip(Transfer& t, bool is_send, int peer);
  // f(path in use), as HostVerbs on the host path (its verbs are final: no indirection in the
  // common case).
  template <class F>
  auto on_path(F&& f) -> decltype(f(std::declval<HostVerbs&>())) {
    if (path_ == &host_path_) [[likely]]
      return f(host_path_);
    return f(*path_);
  }

  // The communicator rank of a peer the algorithm names (see Group).
  int real_peer(int peer) const {
    return members_.empty() ? peer : members_[static_cast<std::size_t>(peer)];
  }

  Transport& transport_;
  OpInfo info_;
  int rank_;
  int size_;
  std::span<const int> members_;        // the open Group's ranks; empty: the communicator's
  SharedArena* group_arena_ = nullptr;  // the open Group's arena
  std::shared_ptr<void> keepalive_;
  HostVerbs host_path_;
  // Before task_: the coroutine frame (device scratch, the call's reduction) goes first.
  std::unique_ptr<DataPath> given_path_;
  DataPath& call_path_;  // *given_path_, or host_path_
  // What the algorithm's verbs go through now: call_path_, or host_path_ (use_host_path).
  DataPath* path_;
  // The algorithm has finished; the call's data path has not yet (device work still running).
  bool finishing_ = false;
  Task task_;
  std::coroutine_handle<> resume_point_;
  std::span<Transfer* const> waiting_;
  // Or the condition it waits on (see until()).
  const WaitCondition* watched_ = nullptr;
  bool done_ = false;
  // A blocking operation alone in flight (no timeout to watch) waits in the transport itself.
  bool exclusive_ = false;
  bool arena_row_ = false;
  bool holds_turn_ = false;
  bool schedule_skipped_ = false;
  SharedArena* turn_arena_ = nullptr;  // ends_turn_of
  int turn_rank_ = 0;
  // Passes of progress() on an unmet wait condition (refuse_foreign_messages every 64th).
  unsigned condition_passes_ = 0;
  std::exception_ptr error_;
  friend void run_blocking(Operation& op, Task task);
};

// Drives every operation in flight in this process: a rank blocked in one collective must still
// answer its peers in the others. COLLX_PROGRESS_THREAD=1 (with MPI_THREAD_MULTIPLE) adds a
// thread, so nonblocking collectives move on while the caller computes.
class Engine {
 public:
  static Engine& instance();
  ~Engine();

  // `op` must have been started: the progress thread may progress it from now on.
  void add(Operation* op);
  void remove(Operation* op);
  // Progresses everything until `op` is done; throws its error, or timeout (COLLX_TIMEOUT).
  void wait(Operation& op);
  // Progresses everything once; true when `op` is done (errors are thrown by wait()).
  bool test(Operation& op);
  // Whether the progress thread runs (it starts with the first nonblocking operation).
  bool progress_thread_running() const { return thread_.joinable(); }
  // Progresses everything once from the MPI library's progress callback; nothing where this
  // thread is inside the engine's loops or another thread holds the engine.
  void progress_elsewhere();

 private:
  void progress_all();
  void start_progress_thread_once();
  void progress_thread_main();

  std::mutex mutex_;
  std::vector<Operation*> active_;
  std::condition_variable work_;
  bool stopping_ = false;
  bool thread_decided_ = false;
  std::thread thread_;
};

// Runs a blocking collective: in place where it is alone in flight and no timeout is watched
// (a small call then skips the engine's loop), else through the engine.
void run_blocking(Operation& op, Task task);

// How many operations the Engine drives (at namespace scope: a cheap read for run_blocking).
inline std::atomic<int> operations_in_flight{0};

}  // namespace collx::detail
