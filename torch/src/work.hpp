// The torch Work of one collx request, and the completion thread that finishes works nobody
// waits on (what lets DDP's gradient allreduces overlap the backward pass).
//
// Two threads may drive a request: the caller's, in Work::wait() (blocking calls wait at once,
// so their latency is collx's own, with no thread handoff), and the completion thread, which
// tests the requests in flight and marks each work's future complete as gloo's and NCCL's
// worker threads do. Both call MPI, so the process needs MPI_THREAD_MULTIPLE (module.cpp).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>
#ifdef COLLX_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <collx/collx.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace collx_torch {

// Locks and the GIL. A work may hold the last reference to a tensor made in Python (the bf16
// and fp16 comm hooks' compressed copy of a bucket: Python lets go of it when the hook returns),
// whose release takes the GIL (c10::TensorImpl::decref_pyobject). Python calls into the backend
// with the GIL held (Work.get_future() does: getFuture() -> Completer::watch() locks the
// completer's mutex). So no work, staging buffer or tensor is ever released with one of the
// backend's mutexes held: the thread holding it would wait for the GIL while the GIL's holder
// waits for the mutex, a deadlock (a DDP step with the bf16 hook hung that way under load,
// tests/torch/test_gil_release.py). What is done with leaves the lists under the lock and is
// dropped after it.

// Blocks until `request` completes (Request::wait()), moving on meanwhile the receives whose
// header is awaited (process_group.hpp, Receives) and the collectives that wait to be posted
// (Sequence): collx's wait() holds its engine for the whole wait, so no other thread could, and
// a peer may need them posted before it makes the call this wait needs.
void wait_for(collx::Request& request);
// Defined with Receives and Sequence (receives.cpp, sequence.cpp).
bool receives_awaiting();
void advance_receives();
bool sequences_waiting();
void advance_sequences();

// Whether this thread is running a future's callback for CallbackRunners.
bool running_callback();

// What a call needs after its collx request completes: staging buffers copied back into the
// caller's tensors (non-contiguous tensors, tensor lists that are not one block of memory), and
// every tensor the request reads or writes, kept alive until then.
struct Staging {
  // Run first, in order, once the requests are complete (a folded reduction's combining step).
  std::vector<std::function<void()>> finish;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (caller's tensor, staging buffer)
  std::vector<at::Tensor> keep_alive;
  std::vector<at::Tensor> outputs;  // Work::result() and the future's value
};

// One torch operation: one collx request, or several (the point-to-point messages of an
// all_gather into separate tensors, process_group.cpp), complete when all of them are.
class CollxWork : public c10d::Work {
 public:
  // `op`: the torch.distributed operation's name (a string literal), which its errors carry.
  CollxWork(int rank, c10d::OpType type, const char* op, std::vector<collx::Request> requests,
            Staging staging);

  // Tests the request once when it is not complete (and nobody else is driving it).
  bool isCompleted() override;
  // Blocks until the request completes, driving collx's progress on this thread unless the
  // completion thread has finished it already. `timeout` is not used: collx's own
  // COLLX_TIMEOUT turns a hang into an error that names the collective and the peer.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;

  // What must happen before the work's requests are all posted (a recv's header, process_group
  // .cpp): called with the drive mutex held until it returns true, blocking or not as the caller
  // is; it appends the requests it posts and may set the error to raise once they complete.
  // Set before the work is shared with another thread.
  using Prelude = std::function<bool(bool block, std::vector<collx::Request>& requests,
                                     std::exception_ptr& error)>;
  void set_prelude(Prelude prelude) { prelude_ = std::move(prelude); }
  // A future that completes when the request does (from the completion thread, or from a
  // wait()), with result() as its value: it is not complete on return unless the request is.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // The completion thread's pass: tests the request unless another thread is driving it; true
  // once the work is complete.
  bool poll();
  // Completes the work on this thread (blocking), whoever drives it now.
  void drive_to_completion();
  bool done() const { return done_.load(std::memory_order_acquire); }

 private:
  // With drive_mutex_ held: completes the request (blocking, or one test) and the copy-backs;
  // returns the future to mark once the mutex is released (null if none, or not done). What
  // the work no longer needs (staging buffers, the tensors it kept alive) is moved into
  // `released`, for the caller to drop after the mutex: see "Locks and the GIL" below.
  c10::intrusive_ptr<c10::ivalue::Future> progress_locked(bool block, Staging& released);
  // Waits for the copies and folds a CUDA call enqueued on this thread's stream.
  void finish_device_copies();
  // Marks `future` complete with the work's outcome; never with a lock held (its callbacks
  // run here and may call back into this work).
  void mark(const c10::intrusive_ptr<c10::ivalue::Future>& future);

  const char* op_;
  // Held by whichever thread tests or waits on requests_ (collx::Request is not thread-safe).
  std::mutex drive_mutex_;
  // Kept for the work's life once it has run: what it captured (a receive's scratch tensor, where
  // a mismatched message lands) is written by requests_ until they complete.
  Prelude prelude_;
  bool prelude_done_ = false;
  // The first request's error, kept (under drive_mutex_) until the others are complete too.
  std::exception_ptr error_;
  Staging staging_;
  // Declared after what its messages read and write, so destroyed first: a request's destructor
  // waits for its operation while the buffers are still there.
  std::vector<collx::Request> requests_;
  std::atomic<bool> done_{false};
  // Launched from inside a future's callback (CallbackRunners): marked by whoever completes it.
  const bool nested_ = running_callback();
  // Made on the first getFuture() (most works are waited on, never asked for one); guarded by
  // c10d::Work::mutex_, so that exactly one of getFuture() and the completion marks it.
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread that runs the marking of the futures the completion thread finished (their
// callbacks: DDP's reducer, comm hooks), in the order the completion thread finished them, so
// that a callback which waits on another collx future (PowerSGD's hook does) never blocks the
// thread that completes that future. The works launched from inside a callback are marked by
// the completion thread itself (CollxWork, nested_): the callback waiting on them resumes, and
// the callbacks of the works launched from the program's own threads still run one at a time,
// so every rank launches their collectives in one order.
class CallbackRunners {
 public:
  static CallbackRunners& instance();
  ~CallbackRunners();
  void post(std::function<void()> task);
  // Runs what is queued, then joins the thread.
  void stop();

 private:
  CallbackRunners() = default;
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
  bool stopping_ = false;
};

// The process's completion thread: it tests the works in flight that it watches, finishes those
// that complete and marks their futures. It stands aside (sleeps) while some thread waits on a
// work itself, since that wait progresses every collx operation anyway.
//
// A small work is not watched at first: the usual small call is waited on at once by its caller
// (torch's blocking calls are a launch and a wait()), and waking the thread for each one cost
// more than the call itself where no core is idle: the woken thread takes a core from a rank
// for its wake-up and its polls (docs/PERFORMANCE.md, "PyTorch"). While unwatched works are in
// flight (and for a while after the last one) the thread wakes on a timer instead, every
// kQuietTick, and watches those that have been in flight for a tick by then: an async_op=True
// call nobody waits on still progresses on its own, at most a tick or two later. A work's
// getFuture() has it watched at once.
class Completer {
 public:
  static Completer& instance();
  ~Completer();

  // A work launched: watched at once (the thread tests it; started on first use) if `watch`,
  // else after a tick unless it has completed by then.
  void add(c10::intrusive_ptr<CollxWork> work, bool watch);
  // The thread watches `work` from now on (its future was asked for).
  void watch(c10::intrusive_ptr<CollxWork> work);
  // Finishes every work in flight (blocking) and joins the thread; add() starts it again.
  void stop();

  // A thread waiting on a work itself, for the scope of this object.
  class InlineWait {
   public:
    InlineWait();
    ~InlineWait();
    InlineWait(const InlineWait&) = delete;
    InlineWait& operator=(const InlineWait&) = delete;
  };

 private:
  Completer() = default;
  void run();
  // With mutex_ held: starts the thread unless it runs, and wakes it.
  void wake_locked();
  using Works = std::vector<c10::intrusive_ptr<CollxWork>>;
  // With mutex_ held: the unwatched works in flight for a tick join pending_; completed ones
  // leave, into `finished` (released outside the lock).
  void watch_old_locked(std::chrono::steady_clock::time_point now, Works& finished);
  // Drops `finished` (maybe the works' last references) with `lock` released, then retakes it.
  static void release_unlocked(std::unique_lock<std::mutex>& lock, Works& finished);

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<c10::intrusive_ptr<CollxWork>> pending_;  // watched, in launch order
  struct Quiet {
    c10::intrusive_ptr<CollxWork> work;
    std::chrono::steady_clock::time_point since;  // launched
  };
  std::vector<Quiet> quiet_;  // not watched yet (nor polled)
  // The last unwatched work's launch; the thread ticks for a while after it.
  std::chrono::steady_clock::time_point last_quiet_;
  bool ticking_ = false;     // the thread wakes on its timer (no add() needs to wake it)
  std::uint64_t added_ = 0;  // works ever added (new work resets
                             // the back-off)
  int inline_waiters_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace collx_torch
