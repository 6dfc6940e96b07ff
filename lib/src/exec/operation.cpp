#include "operation.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "collx/build_config.hpp"
#include "collx/error.hpp"
#include "config.hpp"
#include "failure_notices.hpp"
#include "fast_tls.hpp"
#include "shm_arena.hpp"

namespace collx::detail {

namespace {
// Frames are cached per 128-byte size class up to 8 KiB, a few per class and thread.
constexpr std::size_t kFrameGranule = 128;
constexpr std::size_t kFrameClasses = 64;
constexpr std::size_t kFramesPerClass = 8;
struct FrameCache {
  void* frames[kFrameClasses][kFramesPerClass] = {};
  std::size_t count[kFrameClasses] = {};
};
// Each thread's cache, made on its first frame freed (a pointer: fast static TLS is small).
COLLX_FAST_TLS FrameCache* frame_cache = nullptr;
// Set once the thread's cache is released at its exit: later frames go back to the heap.
COLLX_FAST_TLS bool frame_cache_closed = false;
// Releases the cache and its frames at thread exit (many short-lived threads would otherwise
// each keep one).
struct FrameCacheRelease {
  bool armed = false;
  ~FrameCacheRelease() {
    FrameCache* cache = frame_cache;
    frame_cache = nullptr;
    frame_cache_closed = true;
    if (cache == nullptr) return;
    for (std::size_t c = 0; c < kFrameClasses; ++c) {
      for (std::size_t i = 0; i < cache->count[c]; ++i)
        ::operator delete(cache->frames[c][i]);
    }
    delete cache;
  }
};
thread_local FrameCacheRelease frame_cache_release;
std::size_t frame_class(std::size_t bytes) {
  return (bytes + kFrameGranule - 1) / kFrameGranule;
}
}  // namespace

void* allocate_frame(std::size_t bytes) {
  const std::size_t c = frame_class(bytes);
  FrameCache* cache = frame_cache;
  if (c < kFrameClasses && cache != nullptr && cache->count[c] > 0)
    return cache->frames[c][--cache->count[c]];
  return ::operator new(c < kFrameClasses ? c * kFrameGranule : bytes);
}

void free_frame(void* frame, std::size_t bytes) noexcept {
  const std::size_t c = frame_class(bytes);
  FrameCache* cache = frame_cache;
  if (cache == nullptr && c < kFrameClasses && !frame_cache_closed) [[unlikely]] {
    cache = new (std::nothrow) FrameCache;
    frame_cache = cache;
    frame_cache_release.armed = true;  // its first use registers its release at thread exit
  }
  if (cache != nullptr && c < kFrameClasses && cache->count[c] < kFramesPerClass) {
    cache->frames[c][cache->count[c]++] = frame;
    return;
  }
  ::operator delete(frame);
}

Operation::Operation(Transport& transport, const OpInfo& info, std::shared_ptr<void> keepalive,
                     std::unique_ptr<DataPath> path)
    : transport_(transport),
      info_(info),
      rank_(transport.rank()),
      size_(transport.size()),
      keepalive_(std::move(keepalive)),
      host_path_(transport),
      given_path_(std::move(path)),
      call_path_(given_path_ ? *given_path_ : static_cast<DataPath&>(host_path_)),
      path_(&call_path_) {}

Operation::~Operation() {
  // Unfinished means abandoned after an error, messages possibly pending: keep the frame (and
  // its scratch) alive rather than let MPI write into freed memory.
  if (!done_) task_.leak();
}

void Operation::start(Task task) {
  task_ = std::move(task);
  resume_point_ = task_.handle();
  resume();
}

void Operation::resume() {
  const auto h = std::exchange(resume_point_, {});
  waiting_ = {};
  watched_ = nullptr;
  h.resume();
  if (!task_.done()) return;
  if (turn_arena_ != nullptr) turn_arena_->end_turn(turn_rank_);
  if (task_.handle().promise().error) return fail(task_.handle().promise().error);
  finishing_ = true;
  try {
    finish_path();
  } catch (...) {
    fail(std::current_exception());
  }
}

void Operation::finish_path() {
  if (!call_path_.finish()) return;
  finishing_ = false;
  done_ = true;
}

void Operation::fail(std::exception_ptr error) noexcept {
  error_ = std::move(error);
  done_ = true;
  if (FailureNotices* notices = transport_.failure_notices())
    notices->failed_in_flight(info_.sequence, info_.collective, error_);
}

// An exclusive operation waits for a condition here: first by yielding its core where the
// producer may need it, then in intervals (1 ms, backing off to 16 ms) with a pass of the
// transport's progress between them, since a peer may need this rank's MPI progress (a
// rendezvous acknowledgment) before it can move the counter.
bool Operation::wait_in_place(const WaitCondition& condition) {
  if (!exclusive_) return false;
  if (condition.yield_until_met()) return true;
  auto interval = std::chrono::microseconds(1000);
  while (!condition.wait_for(interval)) {
    transport_.progress();
    if (condition.peers_silent()) refuse_foreign_messages();
    interval = std::min(interval * 2, std::chrono::microseconds(16000));
  }
  return true;
}

void Operation::refuse_foreign_messages() {
  // Only an arena row as a whole: a composite whose part runs through the arena has messages
  // of its own in flight.
  if (!arena_row_) return;
  int phase = 0;
  while (phase < kPhasesPerOp && !transport_.message_arrived(info_.tag_base + phase))
    ++phase;
  if (phase == kPhasesPerOp) return;
  throw Error(ErrorCode::mismatch, to_string(info_.collective), rank_,
              "a peer sent messages for this call (#" + std::to_string(info_.sequence) +
                  ") while this rank runs it through the shared arena: the ranks run different "
                  "algorithms, as mismatched calls (counts of other sizes, say) make auto choose; "
                  "COLLX_CHECK=1 names the mismatch");
}

bool Operation::progress() {
  if (done_) return true;
  // A transport error ends the operation like an error thrown inside the algorithm.
  try {
    if (finishing_) {
      finish_path();
      return done_;
    }
    if (watched_ != nullptr) {
      if (!watched_->met()) {
        transport_.progress();  // see wait_in_place
        if (++condition_passes_ % 64 == 0 && watched_->peers_silent()) refuse_foreign_messages();
        return false;
      }
    } else if (!on_path([&](auto& path) { return path.test_or_wait_all(waiting_, false); })) {
      return false;
    }
  } catch (...) {
    fail(std::current_exception());
    return true;
  }
  resume();
  return done_;
}

void Operation::rethrow_if_failed() const {
  if (!error_) return;
  // The communicator's rank: inside a Group, rank_ is the group's.
  const std::string_view collective = to_string(info_.collective);
  try {
    std::rethrow_exception(error_);
  } catch (const Error& e) {
    if (!e.collective().empty()) throw;
    throw Error(e.code(), collective, transport_.rank(), e.detail());
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::internal, collective, transport_.rank(), "out of memory");
  }
}

void Operation::skip(Transfer& t, bool is_send, int peer) {
  t.start(is_send, real_peer(peer), 0, nullptr);
  t.state = Transfer::State::done;
}

Operation::Group::Group(Operation& op, std::span<const int> members, SharedArena* arena) : op_(op) {
  const auto at = std::find(members.begin(), members.end(), op.transport_.rank());
  if (op.in_group() || at == members.end()) [[unlikely]] {
    throw Error(ErrorCode::internal, std::string(to_string(op.info_.collective)), op.rank_,
                op.in_group() ? "nested rank groups" : "a rank group without this rank");
  }
  op.members_ = members;
  op.group_arena_ = arena;
  op.rank_ = static_cast<int>(at - members.begin());
  op.size_ = static_cast<int>(members.size());
}

Operation::Group::~Group() {
  op_.members_ = {};
  op_.group_arena_ = nullptr;
  op_.rank_ = op_.transport_.rank();
  op_.size_ = op_.transport_.size();
}

void Operation::send_message(Transfer& t, const void* buf, std::size_t bytes, int peer, int tag) {
  on_path([&](auto& path) {
    path.post(t, true, const_cast<void*>(buf), bytes, real_peer(peer), tag, false);
  });
}

void Operation::recv_message(Transfer& t, void* buf, std::size_t bytes, int peer, int tag) {
  // Collectives' receives have the message's length; point-to-point ones may be longer.
  const bool exact_length = info_.collective != Collective::sendrecv;
  on_path([&](auto& path) { path.post(t, false, buf, bytes, real_peer(peer), tag, exact_length); });
}

std::string Operation::waiting_description() const {
  if (watched_ != nullptr) return watched_->describe(members_);
  std::string out;
  for (const Transfer* t : waiting_) {
    if (!t->pending()) continue;
    if (!out.empty()) out += ", ";
    out += describe(*t);
  }
  return out.empty() ? "nothing pending" : out;
}

namespace {

// How deep this thread is inside the engine's loops, which hold its lock: progress from
// elsewhere on this thread (the MPI library's progress callback) must not enter it again.
thread_local int engine_depth = 0;
struct InEngine {
  InEngine() { ++engine_depth; }
  ~InEngine() { --engine_depth; }
  InEngine(const InEngine&) = delete;
  InEngine& operator=(const InEngine&) = delete;
};

}  // namespace

Engine& Engine::instance() {
  static Engine engine;
  return engine;
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::add(Operation* op) {
  {
    std::lock_guard lock(mutex_);
    active_.push_back(op);
    operations_in_flight.store(static_cast<int>(active_.size()), std::memory_order_release);
  }
  start_progress_thread_once();
  work_.notify_one();
}

void Engine::remove(Operation* op) {
  std::lock_guard lock(mutex_);
  std::erase(active_, op);
  operations_in_flight.store(static_cast<int>(active_.size()), std::memory_order_release);
}

void Engine::start_progress_thread_once() {
  std::lock_guard lock(mutex_);
  if (std::exchange(thread_decided_, true) || !config().progress_thread) return;
  // The thread calls MPI while the application may too. SimGrid's SMPI runs the ranks as
  // simulated actors of one thread: another OS thread calling MPI would not be one of them.
  int provided = MPI_THREAD_SINGLE;
  if (!COLLX_SMPI) MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) {
    thread_ = std::thread([this] { progress_thread_main(); });
  } else if (config().debug >= DebugLevel::warn) {
    const std::string why = COLLX_SMPI
                                ? "is ignored under SimGrid's SMPI"
                                : "needs MPI_THREAD_MULTIPLE (MPI was initialised at level " +
                                      std::to_string(provided) + ")";
    std::fprintf(stderr,
                 "collx WARN: COLLX_PROGRESS_THREAD=1 %s; progress happens in wait/test only\n",
                 why.c_str());
  }
}

void Engine::progress_thread_main() {
  const InEngine inside;
  const auto interval = std::chrono::microseconds(config().progress_interval_us);
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (active_.empty()) {
      work_.wait(lock, [this] { return stopping_ || !active_.empty(); });
      continue;
    }
    progress_all();
    // Sleep between polls so the caller's computation keeps its core.
    lock.unlock();
    std::this_thread::sleep_for(interval);
    lock.lock();
  }
}

void Engine::progress_elsewhere() {
  if (engine_depth > 0 || operations_in_flight.load(std::memory_order_acquire) == 0) return;
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the progress thread is at it
  const InEngine inside;
  progress_all();
}

void Engine::progress_all() {
  // An operation may finish (and its owner remove it) meanwhile: index over a vector that
  // only shrinks through remove() outside this function.
  for (std::size_t i = 0; i < active_.size(); ++i)
    active_[i]->progress();
}

bool Engine::test(Operation& op) {
  const InEngine inside;
  std::lock_guard lock(mutex_);
  if (!op.done()) progress_all();
  return op.done();
}

void Engine::wait(Operation& op) {
  const InEngine inside;
  const double timeout = config().timeout_seconds;
  // The clock is read only when a timeout is configured: this loop is on every call's path.
  const auto start =
      timeout > 0 ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  std::unique_lock lock(mutex_);
  std::uint64_t polls = 0;
  while (!op.done()) {
    progress_all();
    if (!op.done() && active_.size() == 1) op.wait_on_condition_for(std::chrono::milliseconds(1));
    if (timeout > 0 && (++polls & 1023) == 0) {
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      if (waited.count() > timeout && !op.done()) {
        lock.unlock();
        remove(&op);
        // The communicator's rank: inside a Group, rank() is the group's.
        const Error error(
            ErrorCode::timeout, to_string(op.info().collective), op.transport().rank(),
            "no progress for " + std::to_string(waited.count()) + " s (COLLX_TIMEOUT) in " +
                std::string(to_string(op.info().collective)) + " #" +
                std::to_string(op.info().sequence) + " (" +
                std::string(to_string(op.info().algorithm)) +
                "), waiting on: " + op.waiting_description());
        // The peers hear of it through the failure notices; the operation is abandoned, not
        // done (its frame stays: see ~Operation).
        if (FailureNotices* notices = op.transport().failure_notices())
          notices->failed_in_flight(op.info().sequence, op.info().collective,
                                    std::make_exception_ptr(error));
        throw error;
      }
    }
  }
  lock.unlock();
  remove(&op);
  op.rethrow_if_failed();
}

void run_blocking(Operation& op, Task task) {
  if (operations_in_flight.load(std::memory_order_acquire) == 0 && config().timeout_seconds <= 0) {
    op.exclusive_ = true;
    op.start(std::move(task));  // runs to completion: every wait completes in place
    if (op.done()) [[likely]] {
      op.rethrow_if_failed();
      return;
    }
    // Not reached with these transports (wait_all completes every transfer); a suspended
    // operation would finish through the engine.
    op.exclusive_ = false;
  } else {
    // Started before it is visible to the progress thread.
    op.start(std::move(task));
  }
  Engine& engine = Engine::instance();
  engine.add(&op);
  engine.wait(op);
}

Phases Phases::part(const char* name, int offset, int count) const {
  if (offset < 0 || count < 0 || offset + count > count_) {
    throw Error(ErrorCode::internal, name, -1,
                "tag phases " + std::to_string(offset) + ".." + std::to_string(offset + count - 1) +
                    " asked of " + name_ + "'s " + std::to_string(count_) + " phases");
  }
  return {first_ + offset, count, name};
}

void Phases::outside(int i) const {
  throw Error(ErrorCode::internal, name_, -1,
              "tag phase " + std::to_string(i) + " asked of " + std::to_string(count_) + " phases");
}

}  // namespace collx::detail
