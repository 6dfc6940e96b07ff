#include "device_engine.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "collx/error.hpp"

namespace collx::detail {

namespace {

// Whether every event of `events` has completed (then forgets them); with `wait`, the host
// waits for them first.
bool events_done(DeviceApi& api, std::vector<EventRef>& events, bool wait) {
  for (const EventRef& e : events) {
    if (wait) {
      api.synchronize(e.get());
    } else if (!api.done(e.get())) {
      return false;
    }
  }
  events.clear();
  return true;
}

}  // namespace

// ---- events ----

EventPool::~EventPool() {
  for (DeviceApi::Event e : free_)
    api_->destroy_event(e);
}

EventRef EventPool::acquire() {
  std::unique_lock lock(mutex_);
  DeviceApi::Event event = free_.empty() ? nullptr : free_.back();
  if (event != nullptr) free_.pop_back();
  lock.unlock();
  if (event == nullptr) event = api_->create_event();
  // Back to the pool when the last holder lets go.
  return EventRef(event, [pool = shared_from_this()](DeviceApi::Event e) noexcept {
    try {
      std::lock_guard lock(pool->mutex_);
      pool->free_.push_back(e);
    } catch (...) {
      pool->api_->destroy_event(e);
    }
  });
}

// ---- the ledger ----

void Ledger::dependencies(int lane, const Access& access, std::vector<EventRef>& out) const {
  for (int l = 0; l < kLanes; ++l) {
    if (l == lane) continue;
    for (auto it = lanes_[l].rbegin(); it != lanes_[l].rend(); ++it) {
      if (!it->access.conflicts_with(access)) continue;
      out.push_back(it->event);
      // A stream's latest conflicting work comes after its earlier work; the callers' streams
      // (external) have no order among their entries.
      if (l != external) break;
    }
  }
}

void Ledger::prune(DeviceApi& api) {
  for (auto& entries : lanes_) {
    while (!entries.empty() && api.done(entries.front().event.get()))
      entries.pop_front();
    while (entries.size() > kMaxPerLane) {
      api.synchronize(entries.front().event.get());
      entries.pop_front();
    }
  }
}

std::size_t Ledger::size() const {
  std::size_t n = 0;
  for (const auto& entries : lanes_)
    n += entries.size();
  return n;
}

// ---- pools ----

FencedPool& FencedPool::of(const std::shared_ptr<DeviceApi>& api, int device, Kind kind) {
  static std::mutex mutex;
  // Never destroyed: buffers may be given back during static destruction.
  static auto* pools = new std::map<std::tuple<const DeviceApi*, int, Kind>, FencedPool*>;
  std::lock_guard lock(mutex);
  FencedPool*& pool = (*pools)[{api.get(), device, kind}];
  if (pool == nullptr) pool = new FencedPool(api, kind);
  return *pool;
}

void FencedPool::release(const Cached& c) noexcept {
  try {
    for (const EventRef& e : c.fences)
      api_->synchronize(e.get());
    api_->free(kind_, c.data);
  } catch (...) {
    // A failing free leaves the memory to the process's end.
  }
}

std::byte* FencedPool::acquire(std::size_t bytes, std::size_t& capacity) {
  capacity = SizeClassCache<Cached>::capacity_for(bytes);
  const auto fenced_off = [this](Cached& c) { return events_done(*api_, c.fences, false); };
  if (std::optional<Cached> kept = cache_.take(capacity, fenced_off)) return kept->data;
  try {
    return static_cast<std::byte*>(api_->allocate(kind_, capacity));
  } catch (const Error&) {
    // Out of memory, perhaps because of what is cached here: free all of it and try once more.
    const std::vector<Cached> cached = cache_.take_all();
    if (cached.empty()) throw;
    for (const Cached& c : cached)
      release(c);
  }
  return static_cast<std::byte*>(api_->allocate(kind_, capacity));
}

void FencedPool::give_back(std::byte* data, std::size_t capacity, std::vector<EventRef> fences) {
  Cached c{data, std::move(fences)};
  if (!cache_.keep(capacity, std::move(c))) release(c);  // not kept: keep() left `c` as it was
}

// ---- the engine ----

struct DeviceEngine::Message {
  Transport* inner = nullptr;
  Transfer wire{};  // the message as the transport sees it
  bool is_send = false;
  std::byte* device = nullptr;
  std::size_t bytes = 0;
  int peer = 0;
  int tag = 0;
  std::byte* pinned = nullptr;
  std::size_t pinned_capacity = 0;
  std::vector<EventRef> before_post{};  // device work that must be complete first
  bool done = false;                    // off the wire, its bytes where they belong
};

class DeviceEngine::Call final : public DeviceCall {
 public:
  Call(DeviceEngine& engine, Transport& inner, void* user_stream, bool blocking)
      : engine_(engine), inner_(inner), user_stream_(user_stream), blocking_(blocking) {}

  void post(Transfer& t, bool is_send, void* buf, std::size_t bytes, int peer, int tag,
            bool exact_length) override {
    engine_.enqueue(inner_, t, buf, bytes, peer, tag, is_send, exact_length);
  }
  bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) override {
    while (!engine_.test_all(inner_, ts)) {
      if (!wait) return false;
      inner_.progress();
    }
    return true;
  }
  ScratchBuffer scratch(std::size_t bytes) override {
    if (bytes == 0) return {};
    const Locked locked(engine_);
    std::size_t capacity = 0;
    std::byte* data = engine_.scratch_pool_->acquire(bytes, capacity);
    return ScratchBuffer(&engine_, data, capacity);
  }
  // Overlapping or not: the engine's copies are ordered, not racing.
  void copy(void* dst, const void* src, std::size_t bytes, bool) override {
    engine_.copy(dst, src, bytes);
  }
  void reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type, ReduceOp op,
              double divisor) override {
    engine_.reduce(dst, a, b, n, type, op, divisor);
  }

  bool finish() override {
    if (!tail_) tail_ = engine_.record_tail();
    DeviceApi& api = *engine_.api_;
    DeviceGuard guard(api, engine_.device_);
    if (user_stream_ != nullptr && blocking_) {
      // The caller's later work on its stream waits for ours; the host does not.
      for (const EventRef& e : *tail_)
        api.wait(user_stream_, e.get());
      tail_->clear();
      return true;
    }
    // Blocking, the host waits; nonblocking, complete once the device work is. The caller's
    // stream is never held by a host function waiting for this work: that breaks CUDA's rule
    // and deadlocks as soon as anything (an allocation, cudaFree) orders the device's streams.
    return events_done(api, *tail_, blocking_);
  }

  bool direct() const override { return engine_.direct_; }

  // Pinned memory from the pool; the download on d2h, after the device work writing `device`.
  std::byte* host_copy(const void* device, std::size_t bytes, bool download) override {
    const Locked locked(engine_);
    std::size_t capacity = 0;
    std::byte* host = engine_.pinned_pool_->acquire(std::max<std::size_t>(bytes, 1), capacity);
    host_copies_.push_back({host, capacity});
    if (download && bytes > 0) {
      engine_.downloaded_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      downloads_.push_back(
          engine_.copy_locked(Ledger::d2h, host, device, bytes, DeviceApi::Copy::device_to_host));
    }
    return host;
  }
  void wait_downloads() override { downloads_landed(true); }
  bool downloads_done() override { return downloads_landed(false); }
  void upload(void* device, const void* host, std::size_t bytes) override {
    if (bytes == 0) return;
    const Locked locked(engine_);
    engine_.copy_locked(Ledger::h2d, device, host, bytes, DeviceApi::Copy::host_to_device);
  }

  ~Call() override {
    for (const HostCopy& c : host_copies_)
      engine_.give_back_to(*engine_.pinned_pool_, c.data, c.capacity);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

 private:
  struct HostCopy {
    std::byte* data;
    std::size_t capacity;
  };
  bool downloads_landed(bool wait) {
    DeviceGuard guard(*engine_.api_, engine_.device_);
    return events_done(*engine_.api_, downloads_, wait);
  }
  DeviceEngine& engine_;
  Transport& inner_;
  void* user_stream_;
  bool blocking_;
  std::optional<std::vector<EventRef>> tail_;  // recorded at the first finish()
  std::vector<HostCopy> host_copies_;
  std::vector<EventRef> downloads_;
};

DeviceEngine::DeviceEngine(std::shared_ptr<DeviceApi> api, int device, bool direct)
    : api_(std::move(api)),
      device_(device),
      direct_(direct),
      events_(std::make_shared<EventPool>(api_)),
      scratch_pool_(&FencedPool::of(api_, device, FencedPool::Kind::device)),
      pinned_pool_(&FencedPool::of(api_, device, FencedPool::Kind::pinned)) {
  DeviceGuard guard(*api_, device_);
  try {
    for (auto& s : streams_)
      s = api_->create_stream();
  } catch (...) {
    for (auto& s : streams_)
      if (s != nullptr) api_->destroy_stream(s);
    throw;
  }
}

DeviceEngine::~DeviceEngine() {
  // Messages still queued or on the wire belong to abandoned operations: the transport may
  // still write their staging buffers, so they stay.
  for (auto& s : streams_)
    api_->destroy_stream(s);
}

std::unique_ptr<DeviceCall> DeviceEngine::begin_call(Transport& inner,
                                                     std::span<const BufferArg> buffers,
                                                     void* user_stream, bool blocking) {
  {
    const Locked locked(*this);
    // Prune here too: a call on host copies sends no message through the engine (whose
    // progress prunes otherwise), and would grow the ledger with every call.
    ledger_.prune(*api_);
    // The buffers are ready after the work enqueued so far on the caller's stream, or on the
    // default stream (the engine's non-blocking streams would not wait for it).
    EventRef ready = events_->acquire();
    api_->record(ready.get(), user_stream != nullptr ? user_stream : api_->default_stream());
    for (const BufferArg& b : buffers) {
      if (b.pointer != nullptr && b.bytes > 0)
        ledger_.add(Ledger::external, ready, {{}, ByteRange::of(b.pointer, b.bytes)});
    }
  }
  return std::make_unique<Call>(*this, inner, user_stream, blocking);
}

EventRef DeviceEngine::record(int lane) {
  EventRef e = events_->acquire();
  api_->record(e.get(), streams_[lane]);
  return e;
}

void DeviceEngine::stream_after(int lane, const Access& access) {
  std::vector<EventRef> before;
  ledger_.dependencies(lane, access, before);
  for (const EventRef& e : before)
    api_->wait(streams_[lane], e.get());
}

void DeviceEngine::enqueue(Transport& inner, Transfer& t, void* buf, std::size_t bytes, int peer,
                           int tag, bool is_send, bool exact_length) {
  const Locked locked(*this);
  std::unique_ptr<Message> m(new Message{.inner = &inner,
                                         .is_send = is_send,
                                         .device = static_cast<std::byte*>(buf),
                                         .bytes = bytes,
                                         .peer = peer,
                                         .tag = tag});
  const ByteRange range = ByteRange::of(buf, bytes);
  if (direct_) {
    // A send after the device work that writes these bytes; a receive after the work that
    // reads or writes them.
    ledger_.dependencies(Ledger::kHost, is_send ? Access{{range, {}}, {}} : Access{{}, range},
                         m->before_post);
  } else if (bytes > 0) {
    m->pinned = pinned_pool_->acquire(bytes, m->pinned_capacity);
    // A send's bytes go to the staging buffer (d2h, after the work that wrote them); a
    // receive's too where a shorter message must leave the rest of the buffer as it was.
    if (is_send || !exact_length) {
      m->before_post.push_back(
          copy_locked(Ledger::d2h, m->pinned, buf, bytes, DeviceApi::Copy::device_to_host));
    }
  }
  t.start(is_send, peer, bytes, nullptr);  // the engine keeps the message
  t.handle = reinterpret_cast<std::uintptr_t>(m.get());
  std::deque<Message*>& queue = is_send ? send_queue_ : recv_queue_;
  queue.push_back(m.release());
  ++live_messages_;
  pump(queue);
}

void DeviceEngine::pump(std::deque<Message*>& queue) {
  // In posting order: a message waits for its device work and for every message before it.
  while (!queue.empty() && events_done(*api_, queue.front()->before_post, false)) {
    Message& m = *queue.front();
    queue.pop_front();
    std::byte* buf = direct_ ? m.device : m.pinned;  // staged: through pinned memory
    m.inner->post_message(m.wire, m.is_send, buf, m.bytes, m.peer, m.tag, direct_);
    m.wire.done() ? wire_done(m) : on_wire_.push_back(&m);
  }
}

void DeviceEngine::wire_done(Message& m) {
  if (m.pinned != nullptr) {  // staged
    // A receive: pinned -> device on h2d, after the device work still on those bytes; later
    // readers are ordered after this copy, so the receive is done now.
    std::vector<EventRef> fences;
    if (!m.is_send) {
      fences.push_back(
          copy_locked(Ledger::h2d, m.device, m.pinned, m.bytes, DeviceApi::Copy::host_to_device));
    }
    pinned_pool_->give_back(m.pinned, m.pinned_capacity, std::move(fences));
    m.pinned = nullptr;
  }
  m.done = true;
}

bool DeviceEngine::test_all(Transport& inner, std::span<Transfer* const> ts) {
  const Locked locked(*this);
  pump(send_queue_);
  pump(recv_queue_);
  std::erase_if(on_wire_, [&](Message* m) {
    Transfer* one[1] = {&m->wire};
    if (!m->inner->test_all(one)) return false;
    wire_done(*m);
    return true;
  });
  ledger_.prune(*api_);
  bool all_done = true;
  std::vector<Transfer*> host;
  for (Transfer* t : ts) {
    if (!t->pending()) continue;
    if (t->owner != nullptr) {  // on the call's transport
      host.push_back(t);
    } else if (auto* m = reinterpret_cast<Message*>(t->handle); !m->done) {
      all_done = false;
    } else {
      t->state = Transfer::State::done;
      t->handle = 0;
      delete m;
      --live_messages_;
    }
  }
  if (!host.empty() && !inner.test_all(host)) all_done = false;
  return all_done;
}

void DeviceEngine::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const Locked locked(*this);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  // Overlapping (memmove): parts no longer than the distance never overlap themselves, and
  // taken forwards where dst is below src, else backwards, none overwrites source bytes still to
  // be copied. Regions further apart than `bytes` make one part.
  const std::size_t distance = d < s ? s - d : d - s;
  const std::size_t parts = (bytes + distance - 1) / distance;
  for (std::size_t i = 0; i < parts; ++i) {
    const std::size_t off = (d < s ? i : parts - 1 - i) * distance;
    copy_locked(Ledger::compute, reinterpret_cast<void*>(d + off),
                reinterpret_cast<const void*>(s + off), std::min(distance, bytes - off),
                DeviceApi::Copy::device_to_device);
  }
}

void DeviceEngine::reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                          ReduceOp op, double divisor) {
  if (n == 0) return;
  const Locked locked(*this);
  const std::size_t bytes = n * size_of(type);
  const Access access{{ByteRange::of(a, bytes), ByteRange::of(b, bytes)},
                      ByteRange::of(dst, bytes)};
  stream_after(Ledger::compute, access);
  api_->reduce(dst, a, b, n, type, op, divisor, streams_[Ledger::compute]);
  ledger_.add(Ledger::compute, record(Ledger::compute), access);
}

void DeviceEngine::give_back_to(FencedPool& pool, std::byte* data, std::size_t capacity) noexcept {
  try {
    const Locked locked(*this);
    std::vector<EventRef> fences;
    const ByteRange range = ByteRange::of(data, capacity);
    ledger_.dependencies(Ledger::kHost, {{range, {}}, range}, fences);
    pool.give_back(data, capacity, std::move(fences));
  } catch (...) {
    // Called from destructors: a buffer that cannot be fenced is not reused (leaked).
  }
}

EventRef DeviceEngine::copy_locked(int lane, void* dst, const void* src, std::size_t bytes,
                                   DeviceApi::Copy kind) {
  const Access access{{ByteRange::of(src, bytes), {}}, ByteRange::of(dst, bytes)};
  stream_after(lane, access);
  api_->copy(dst, src, bytes, kind, streams_[lane]);
  EventRef copied = record(lane);
  ledger_.add(lane, copied, access);
  return copied;
}

std::vector<EventRef> DeviceEngine::record_tail() {
  const Locked locked(*this);
  return {record(Ledger::compute), record(Ledger::h2d)};
}

}  // namespace collx::detail
