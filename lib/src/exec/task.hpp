// Task: the coroutine type every collective algorithm is written as. It suspends whenever it
// waits for messages, and its Operation resumes it. `co_await child(...)` runs the child to
// completion first (symmetric transfer) and rethrows the child's exception in the parent.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <utility>

namespace collx::detail {

// Coroutine frames come from a per-thread cache of recently freed frames: a small call must
// cost little more than its messages.
void* allocate_frame(std::size_t bytes);
void free_frame(void* frame, std::size_t bytes) noexcept;

class [[nodiscard]] Task {
 public:
  struct promise_type {
    static void* operator new(std::size_t bytes) { return allocate_frame(bytes); }
    static void operator delete(void* frame, std::size_t bytes) noexcept {
      free_frame(frame, bytes);
    }
    std::coroutine_handle<> continuation;
    std::exception_ptr error;

    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        auto next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : handle_(h) {}
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  Task& operator=(Task other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~Task() {
    if (handle_) handle_.destroy();
  }

  bool valid() const { return static_cast<bool>(handle_); }
  // Gives up the frame without destroying it: for an operation abandoned with messages still
  // pending (after a timeout), whose buffers must outlive anything MPI may still write.
  void leak() { handle_ = {}; }
  bool done() const { return handle_.done(); }
  Handle handle() const { return handle_; }
  void rethrow_if_failed() const {
    if (handle_.promise().error) std::rethrow_exception(handle_.promise().error);
  }

  // co_await on a child task: start it, come back here when it has finished.
  auto operator co_await() && noexcept {
    struct Awaiter {
      Handle child;
      bool await_ready() const noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<> parent) noexcept {
        child.promise().continuation = parent;
        return child;
      }
      void await_resume() const {
        if (child.promise().error) std::rethrow_exception(child.promise().error);
      }
    };
    return Awaiter{handle_};
  }

 private:
  Handle handle_;
};

}  // namespace collx::detail
