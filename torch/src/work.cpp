// CollxWork and the completion thread (work.hpp).
#include "work.hpp"

#include <ATen/core/ivalue.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>

namespace collx_torch {
namespace {

// The completion thread's polling: after a work arrives or completes it tests the works in flight
// back to back (yielding the core between passes) for kSpinFor, since most collectives complete
// within that; then it sleeps between passes, from kFirstSleep doubling up to kLongestSleep, so
// that a long transfer nobody waits on yet costs little of the core the caller computes on. The
// longest sleep bounds how late a future completes after its request did.
constexpr auto kSpinFor = std::chrono::microseconds(100);
constexpr auto kFirstSleep = std::chrono::microseconds(10);
constexpr auto kLongestSleep = std::chrono::microseconds(200);
// Unwatched works (work.hpp, Completer): the completion thread's timer, and for how long after
// the last such work it keeps ticking before it sleeps until woken.
constexpr auto kQuietTick = std::chrono::milliseconds(1);
constexpr auto kTickFor = std::chrono::seconds(1);

std::exception_ptr as_torch_error(const char* op, const collx::Error& e) {
  return std::make_exception_ptr(
      std::runtime_error(std::string("collx backend: ") + op + ": " + e.what()));
}

}  // namespace

void wait_for(collx::Request& request) {
  for (;;) {
    const bool receives = receives_awaiting();
    const bool sequences = sequences_waiting();
    if (!receives && !sequences) {
      request.wait();
      return;
    }
    if (request.test()) return;
    if (receives) advance_receives();
    if (sequences) advance_sequences();
    std::this_thread::yield();
  }
}

// ---------------------------------------------------------------- CollxWork

CollxWork::CollxWork(int rank, c10d::OpType type, const char* op,
                     std::vector<collx::Request> requests, Staging staging)
    : c10d::Work(rank, type),
      op_(op),
      staging_(std::move(staging)),
      requests_(std::move(requests)) {}

c10::intrusive_ptr<c10::ivalue::Future> CollxWork::progress_locked(bool block, Staging& released) {
  if (done()) return {};
  if (prelude_ && !prelude_done_) {
    bool ready = true;
    try {
      ready = prelude_(block, requests_, error_);
    } catch (const collx::Error& e) {
      if (!error_) error_ = as_torch_error(op_, e);
    } catch (...) {
      if (!error_) error_ = std::current_exception();
    }
    if (!ready) return {};
    // Not released here: a mismatched receive's scratch (captured) is still being written.
    prelude_done_ = true;
  }
  // Every request is driven to its end, a failed one's error kept: the buffers are released
  // only once no message targets them any more.
  bool in_flight = false;
  for (collx::Request& request : requests_) {
    try {
      if (block) {
        wait_for(request);
      } else if (!request.test()) {
        in_flight = true;
      }
    } catch (const collx::Error& e) {
      if (!error_) error_ = as_torch_error(op_, e);
    } catch (...) {
      if (!error_) error_ = std::current_exception();
    }
  }
  if (in_flight) return {};
  std::exception_ptr error = error_;
  if (!error) {
    try {
      for (auto& step : staging_.finish)
        step();
      for (auto& [caller, staged] : staging_.copy_back)
        caller.copy_(staged);
      finish_device_copies();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Dropped by the caller after drive_mutex_ ("Locks and the GIL", work.hpp).
  released.finish.swap(staging_.finish);
  released.copy_back.swap(staging_.copy_back);
  released.keep_alive.swap(staging_.keep_alive);
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    // c10d::Work::finish(), and the future taken in the same critical section as getFuture()
    // makes it.
    std::lock_guard lock(mutex_);
    completed_ = true;
    exception_ = error;
    future = future_;
  }
  done_.store(true, std::memory_order_release);
  cv_.notify_all();
  return future;
}

void CollxWork::finish_device_copies() {
#ifdef COLLX_TORCH_CUDA
  // The copies above (CUDA tensors) were enqueued on this thread's current stream of their
  // device: complete before the work is, so that the caller's streams see them after wait().
  std::optional<at::Device> device;
  for (const auto& [caller, staged] : staging_.copy_back) {
    if (caller.is_cuda()) device = caller.device();
  }
  for (const at::Tensor& t : staging_.outputs) {
    if (!staging_.finish.empty() && t.is_cuda()) device = t.device();
  }
  if (device) c10::cuda::getCurrentCUDAStream(device->index()).synchronize();
#endif
}

void CollxWork::mark(const c10::intrusive_ptr<c10::ivalue::Future>& future) {
  if (!future) return;
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    error = exception_;
  }
  if (error) {
    future->setError(error);
  } else {
    future->markCompleted(c10::IValue(staging_.outputs));
  }
}

bool CollxWork::poll() {
  if (done()) return true;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  Staging released;  // dropped on return, after the lock
  {
    std::unique_lock drive(drive_mutex_, std::try_to_lock);
    if (!drive.owns_lock()) return false;  // another thread is waiting on it
    future = progress_locked(false, released);
  }
  if (future && nested_) {
    mark(future);
  } else if (future) {
    // Its callbacks run elsewhere (CallbackRunners): this thread goes on completing works.
    CallbackRunners::instance().post(
        [work = c10::intrusive_ptr<CollxWork>::reclaim_copy(this), future] { work->mark(future); });
  }
  return done();
}

void CollxWork::drive_to_completion() {
  if (done()) return;
  c10::intrusive_ptr<c10::ivalue::Future> future;
  Staging released;
  {
    std::lock_guard drive(drive_mutex_);
    future = progress_locked(true, released);
  }
  mark(future);
}

bool CollxWork::isCompleted() {
  return poll();
}

bool CollxWork::wait(std::chrono::milliseconds /*timeout*/) {
  if (!done()) {
    Completer::InlineWait waiting;
    drive_to_completion();
  }
  std::lock_guard lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

std::vector<at::Tensor> CollxWork::result() {
  return staging_.outputs;
}

c10::intrusive_ptr<c10::ivalue::Future> CollxWork::getFuture() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  bool mark_now = false;
  {
    std::lock_guard lock(mutex_);
    if (!future_) {
      future_ =
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
      // Completed before anyone asked: nobody else will mark it.
      mark_now = completed_;
    }
    future = future_;
  }
  if (mark_now) {
    mark(future);
  } else if (!done()) {
    // Someone may rely on the future alone (a DDP comm hook): the completion thread completes it.
    Completer::instance().watch(c10::intrusive_ptr<CollxWork>::reclaim_copy(this));
  }
  return future;
}

// ---------------------------------------------------------------- CallbackRunners

CallbackRunners& CallbackRunners::instance() {
  static CallbackRunners runners;
  return runners;
}

CallbackRunners::~CallbackRunners() {
  stop();
}

namespace {
thread_local bool in_callback = false;
}  // namespace

bool running_callback() {
  return in_callback;
}

void CallbackRunners::post(std::function<void()> task) {
  std::lock_guard lock(mutex_);
  tasks_.push_back(std::move(task));
  if (!thread_.joinable()) {
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void CallbackRunners::run() {
  in_callback = true;
  std::unique_lock lock(mutex_);
  for (;;) {
    if (tasks_.empty()) {
      if (stopping_) return;
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // the work it held may go here, outside the lock
    lock.lock();
  }
}

void CallbackRunners::stop() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    thread.swap(thread_);
  }
  wake_.notify_all();
  if (thread.joinable()) thread.join();
}

// ---------------------------------------------------------------- Completer

Completer& Completer::instance() {
  static Completer completer;
  return completer;
}

Completer::~Completer() {
  stop();
}

void Completer::add(c10::intrusive_ptr<CollxWork> work, bool watch) {
  std::lock_guard lock(mutex_);
  if (watch) {
    pending_.push_back(std::move(work));
    wake_locked();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  quiet_.push_back({std::move(work), now});
  last_quiet_ = now;
  // A ticking thread looks at quiet_ within a tick; an idle one (none for a while) is woken.
  if (!ticking_ || !thread_.joinable()) wake_locked();
}

void Completer::watch(c10::intrusive_ptr<CollxWork> work) {
  std::lock_guard lock(mutex_);
  // It may be in quiet_ as well: a work tested twice is harmless, and the list prunes itself.
  pending_.push_back(std::move(work));
  wake_locked();
}

void Completer::wake_locked() {
  ++added_;
  if (!thread_.joinable()) {
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
  }
  wake_.notify_one();
}

void Completer::watch_old_locked(std::chrono::steady_clock::time_point now, Works& finished) {
  std::size_t kept = 0;
  for (Quiet& q : quiet_) {
    if (q.work->done()) {
      finished.push_back(std::move(q.work));
      continue;
    }
    if (now - q.since >= kQuietTick) {
      pending_.push_back(std::move(q.work));
      ++added_;
    } else {
      quiet_[kept++] = std::move(q);
    }
  }
  quiet_.resize(kept);
}

void Completer::stop() {
  std::vector<Quiet> quiet;
  bool running = false;
  {
    std::lock_guard lock(mutex_);
    quiet.swap(quiet_);
    running = thread_.joinable();
    stopping_ = running;
  }
  if (running) {
    wake_.notify_one();
    thread_.join();
  }
  // The unwatched works still in flight, after the watched ones (launch order within each list).
  for (const Quiet& q : quiet)
    q.work->drive_to_completion();
  // The callbacks of what the thread completed.
  CallbackRunners::instance().stop();
}

Completer::InlineWait::InlineWait() {
  Completer& c = instance();
  std::lock_guard lock(c.mutex_);
  ++c.inline_waiters_;
}

Completer::InlineWait::~InlineWait() {
  Completer& c = instance();
  // The completed works (the one waited on, and whatever that wait finished besides) leave the
  // list here, outside the lock: a blocking call then costs the completion thread no wake-up
  // unless works remain in flight.
  std::vector<c10::intrusive_ptr<CollxWork>> finished;
  bool others_pending = false;
  {
    std::lock_guard lock(c.mutex_);
    --c.inline_waiters_;
    if (c.inline_waiters_ == 0) {
      auto unfinished = std::stable_partition(c.pending_.begin(), c.pending_.end(),
                                              [](const auto& w) { return !w->done(); });
      std::move(unfinished, c.pending_.end(), std::back_inserter(finished));
      c.pending_.erase(unfinished, c.pending_.end());
      for (Quiet& q : c.quiet_) {
        if (q.work->done()) finished.push_back(std::move(q.work));
      }
      std::erase_if(c.quiet_, [](const Quiet& q) { return !q.work; });
      others_pending = !c.pending_.empty();
    }
  }
  if (others_pending) c.wake_.notify_one();
}

void Completer::release_unlocked(std::unique_lock<std::mutex>& lock, Works& finished) {
  if (finished.empty()) return;
  lock.unlock();
  finished.clear();
  lock.lock();
}

void Completer::run() {
  Works batch;
  Works finished;  // taken out of the lists under the lock, released outside it
  std::unique_lock lock(mutex_);
  std::uint64_t seen = added_;
  auto spin_until = std::chrono::steady_clock::now() + kSpinFor;
  auto sleep = kFirstSleep;
  for (;;) {
    if (stopping_) break;
    if (pending_.empty() || inline_waiters_ > 0) {
      // Nothing to poll now (or some thread drives collx in a wait() of its own): ticks while
      // unwatched works are in flight or were lately, else sleeps until woken.
      auto now = std::chrono::steady_clock::now();
      if (!quiet_.empty() || now - last_quiet_ < kTickFor) {
        ticking_ = true;
        wake_.wait_for(lock, kQuietTick);
        watch_old_locked(std::chrono::steady_clock::now(), finished);
        release_unlocked(lock, finished);
      } else {
        ticking_ = false;
        wake_.wait(lock);
      }
      continue;
    }
    if (added_ != seen) {
      seen = added_;
      spin_until = std::chrono::steady_clock::now() + kSpinFor;
      sleep = kFirstSleep;
    }
    batch = pending_;
    lock.unlock();
    bool completed_any = false;
    for (const auto& work : batch)
      completed_any = work->poll() || completed_any;
    batch.clear();  // the last references to finished works may go here, outside the lock
    lock.lock();
    auto completed = std::stable_partition(pending_.begin(), pending_.end(),
                                           [](const auto& w) { return !w->done(); });
    std::move(completed, pending_.end(), std::back_inserter(finished));
    pending_.erase(completed, pending_.end());
    watch_old_locked(std::chrono::steady_clock::now(), finished);
    release_unlocked(lock, finished);
    const auto now = std::chrono::steady_clock::now();
    if (pending_.empty()) continue;
    if (completed_any) {
      spin_until = now + kSpinFor;
      sleep = kFirstSleep;
    }
    if (now < spin_until) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else {
      wake_.wait_for(lock, sleep);
      sleep = std::min(sleep * 2, kLongestSleep);
    }
  }
  // Stopping (MPI is about to be finalised): every work still in flight is finished here.
  std::vector<c10::intrusive_ptr<CollxWork>> rest;
  rest.swap(pending_);
  lock.unlock();
  for (const auto& work : rest)
    work->drive_to_completion();
}

}  // namespace collx_torch
