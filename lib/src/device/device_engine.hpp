// DeviceEngine: device memory for the calls of one communicator on one device: three streams
// (compute; d2h and h2d for staging copies), a ledger of the device work in flight, and the
// queues of messages on their way to the transport. Its calls (DeviceCall) are the algorithms'
// view of it.
//
// No device-wide synchronisation: the ledger records all device work with an event and the byte
// ranges it reads and writes; new work on a stream waits only for the latest conflicting work on
// each other stream, and a message waits in its queue (in posting order) until the device work
// on its bytes has completed. Staged sends copy device -> pinned on d2h (overlapping the previous
// message on the wire); staged receives land in pinned memory, then h2d copies them to the
// device. Pooled buffers given back carry the events of the work still using them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "device_api.hpp"
#include "device_call.hpp"
#include "scratch.hpp"
#include "size_class_cache.hpp"
#include "transport.hpp"

namespace collx::detail {

// A pooled event (get(): the DeviceApi::Event), back in its pool when the last holder lets go.
using EventRef = std::shared_ptr<void>;

class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  explicit EventPool(std::shared_ptr<DeviceApi> api) : api_(std::move(api)) {}
  ~EventPool();
  // An unrecorded (or reusable) event of the current device.
  EventRef acquire();

 private:
  std::shared_ptr<DeviceApi> api_;
  std::mutex mutex_;
  std::vector<DeviceApi::Event> free_;
};

// A byte range [begin, end) of device memory.
struct ByteRange {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  static ByteRange of(const void* p, std::size_t bytes) {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    return {b, b + bytes};
  }
  bool empty() const { return begin >= end; }
  bool overlaps(const ByteRange& o) const {
    return !empty() && !o.empty() && begin < o.end && o.begin < end;
  }
};

// What an item of device work reads and writes.
struct Access {
  ByteRange reads[2];
  ByteRange write;
  // Work that conflicts with `later` must finish before it: read after write, write after write,
  // write after read.
  bool conflicts_with(const Access& later) const {
    return write.overlaps(later.reads[0]) || write.overlaps(later.reads[1]) ||
           write.overlaps(later.write) || later.write.overlaps(reads[0]) ||
           later.write.overlaps(reads[1]);
  }
};

// The device work in flight, per lane (a stream of the engine, or the callers' streams).
class Ledger {
 public:
  enum Lane { compute, d2h, h2d, external, kLanes };
  static constexpr int kHost = -1;  // host-side work (a message handed to the transport)

  // Appends the events that work with `access` on `lane` must wait for: per engine stream the
  // latest conflicting work, on the external lane every conflicting entry, nothing of `lane`
  // itself. With kHost, every lane: what host work, or memory given back, must wait for.
  void dependencies(int lane, const Access& access, std::vector<EventRef>& out) const;
  void add(int lane, EventRef event, const Access& access) {
    lanes_[lane].push_back({std::move(event), access});
  }
  // Forgets completed work; at most kMaxPerLane entries stay (beyond, the host waits).
  void prune(DeviceApi& api);
  std::size_t size() const;

 private:
  static constexpr std::size_t kMaxPerLane = 4096;
  struct Entry {
    EventRef event;
    Access access;
  };
  std::deque<Entry> lanes_[kLanes];
};

// Device scratch or pinned staging memory of one device, reused once its fences have completed.
class FencedPool {
 public:
  using Kind = DeviceApi::Memory;
  FencedPool(std::shared_ptr<DeviceApi> api, Kind kind) : api_(std::move(api)), kind_(kind) {}
  ~FencedPool() = delete;  // of() keeps every pool as long as the process

  // At least `bytes` (a power of two, >= 256); `capacity` gets the size. Current device = ours.
  std::byte* acquire(std::size_t bytes, std::size_t& capacity);
  void give_back(std::byte* data, std::size_t capacity, std::vector<EventRef> fences);
  // The pool of (api, device, kind): one per process, never destroyed.
  static FencedPool& of(const std::shared_ptr<DeviceApi>& api, int device, Kind kind);

 private:
  struct Cached {
    std::byte* data;
    std::vector<EventRef> fences;
  };
  // Waits for the fences, then frees.
  void release(const Cached& c) noexcept;
  std::shared_ptr<DeviceApi> api_;
  Kind kind_;
  SizeClassCache<Cached> cache_;
};

class DeviceEngine final : public ScratchSource {
 public:
  // `direct`: the communicator's transports take device memory themselves.
  DeviceEngine(std::shared_ptr<DeviceApi> api, int device, bool direct);
  ~DeviceEngine();

  int device() const { return device_; }

  // A call on `inner` (the communicator's transport), stream-ordered on `user_stream` if given;
  // `buffers`: its buffer arguments.
  std::unique_ptr<DeviceCall> begin_call(Transport& inner, std::span<const BufferArg> buffers,
                                         void* user_stream, bool blocking);

  // ---- what the calls use (each locks the engine) ----
  void copy(void* dst, const void* src, std::size_t bytes);
  void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type, ReduceOp op,
              double divisor);
  void give_back(std::byte* data, std::size_t capacity) override {
    give_back_to(*scratch_pool_, data, capacity);
  }
  // Events recorded now on the streams that write device memory (compute, h2d).
  std::vector<EventRef> record_tail();

  // Messages not yet seen done, for tests: 0 after every call completed.
  std::size_t messages_in_flight() {
    std::lock_guard lock(mutex_);
    return live_messages_;
  }
  // Device work still listed in the ledger, for tests: bounded however many calls ran.
  std::size_t ledger_entries() {
    std::lock_guard lock(mutex_);
    return ledger_.size();
  }
  // Bytes copied device -> host so far for calls on host copies of their buffers, for tests.
  std::size_t downloaded_bytes() const { return downloaded_bytes_.load(std::memory_order_relaxed); }

 private:
  class Call;  // the DeviceCall of one call (device_engine.cpp)
  struct Message;
  // The engine's mutex held and its device current: how the calls above enter the engine.
  struct Locked {
    explicit Locked(DeviceEngine& e) : lock(e.mutex_), device(*e.api_, e.device_) {}
    std::lock_guard<std::mutex> lock;
    DeviceGuard device;
  };
  // A send or a receive of `bytes` at `buf` on `inner`.
  void enqueue(Transport& inner, Transfer& t, void* buf, std::size_t bytes, int peer, int tag,
               bool is_send, bool exact_length);
  bool test_all(Transport& inner, std::span<Transfer* const> ts);
  void stream_after(int lane, const Access& access);
  // dst <- src on `lane`'s stream, after the listed work it conflicts with; the copy's event.
  EventRef copy_locked(int lane, void* dst, const void* src, std::size_t bytes,
                       DeviceApi::Copy kind);
  // `data` back to `pool` with the events of the listed work that still touches it.
  void give_back_to(FencedPool& pool, std::byte* data, std::size_t capacity) noexcept;
  EventRef record(int lane);
  void pump(std::deque<Message*>& queue);
  void wire_done(Message& m);

  std::shared_ptr<DeviceApi> api_;
  int device_;
  bool direct_;
  std::mutex mutex_;
  DeviceApi::Stream streams_[3] = {nullptr, nullptr, nullptr};  // compute, d2h, h2d
  std::shared_ptr<EventPool> events_;
  Ledger ledger_;
  FencedPool* scratch_pool_;
  FencedPool* pinned_pool_;
  std::deque<Message*> send_queue_;
  std::deque<Message*> recv_queue_;
  std::vector<Message*> on_wire_;
  std::size_t live_messages_ = 0;
  std::atomic<std::size_t> downloaded_bytes_{0};  // a count for tests, outside the mutex
};

}  // namespace collx::detail
