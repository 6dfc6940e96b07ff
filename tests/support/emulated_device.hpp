// EmulatedDevice: a DeviceApi in host memory, for testing collx's device-memory layer without a
// GPU. Its "device memory" is host memory that pointer_kind() reports as device memory; its
// streams are queues whose work runs later, in a random order across streams (each stream in
// order, waits on events honoured), whenever the layer asks about an event. Device work that is
// not ordered correctly (a reduction before the copy of its operand, a segment reused before
// the copy out of it) then reads or writes the wrong bytes and the results show it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "device_api.hpp"

namespace collx::testing {

// Holds a stream of the emulated device (EmulatedDevice::hold): its work enqueued after the hold
// waits until open().
class StreamHold {
 public:
  void open() noexcept { open_ = true; }
  bool is_open() const noexcept { return open_; }

 private:
  std::atomic<bool> open_{false};
};

class EmulatedDevice final : public detail::DeviceApi {
 public:
  explicit EmulatedDevice(std::uint32_t seed = 1);
  ~EmulatedDevice() override;

  // ---- for the tests ----
  // Work enqueued on `stream` from now on waits until hold->open(): device work that stays
  // pending as long as a test wants.
  void hold(Stream stream, std::shared_ptr<StreamHold> hold);
  // Runs `work` on the device, in `stream`'s order.
  void enqueue(Stream stream, std::function<void()> work);
  // Runs the device until `stream`'s work so far has completed.
  void synchronize_stream(Stream stream);
  // Work enqueued and not yet run, on every stream.
  std::size_t pending();
  std::uint64_t operations_run() const { return run_; }

  // ---- DeviceApi ----
  std::string_view name() const override { return "emulated"; }
  int device_count() override { return 1; }
  std::vector<detail::DeviceDescription> devices() override;
  detail::PointerKind pointer_kind(const void* pointer) override;
  int current_device() override { return 0; }
  void set_device(int device) override;
  void* allocate(Memory memory, std::size_t bytes) override;
  void free(Memory memory, void* pointer) override;
  Stream create_stream() override;
  void destroy_stream(Stream stream) noexcept override;
  Stream default_stream() override { return default_queue_; }
  Event create_event() override;
  void destroy_event(Event event) noexcept override;
  void record(Event event, Stream stream) override;
  bool done(Event event) override;
  void synchronize(Event event) override;
  void wait(Stream stream, Event event) override;
  void copy(void* dst, const void* src, std::size_t bytes, Copy kind, Stream stream) override;
  void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type, ReduceOp op,
              double divisor, Stream stream) override;

 private:
  struct Queue;
  struct Mark {  // a position in a queue: complete once that many of its operations ran
    Queue* queue = nullptr;
    std::uint64_t position = 0;
  };
  struct Op {
    std::function<void()> work;
    std::vector<Mark> after;           // events it waits for
    std::shared_ptr<StreamHold> hold;  // or a hold
  };
  struct Queue {
    std::deque<Op> ops;
    std::uint64_t enqueued = 0;
    std::uint64_t executed = 0;
    std::vector<Mark> waits;  // taken by the next operation enqueued
  };
  struct EventState {
    Mark mark;
  };
  static bool complete(const Mark& m) {
    return m.queue == nullptr || m.queue->executed >= m.position;
  }
  bool ready(const Op& op) const;
  void push(Queue& q, Op op);
  bool step_locked();
  void run_some_locked();
  void run_until_locked(const Mark& m);
  // cudaFree and cudaFreeHost wait for all the device's work: every stream runs dry first.
  void synchronize_device_locked(const char* what);

  std::recursive_mutex mutex_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<Queue>> queues_;
  std::map<std::uintptr_t, std::size_t> device_blocks_;  // begin -> bytes
  std::uint64_t run_ = 0;
  Queue* default_queue_ = nullptr;
};

}  // namespace collx::testing
