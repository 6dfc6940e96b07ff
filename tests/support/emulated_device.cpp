#include "emulated_device.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "collx/error.hpp"
#include "host_reduce.hpp"

namespace collx::testing {

namespace {
void* aligned(std::size_t bytes) {
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Fresh device memory is garbage, not zeros: a result that relies on it shows.
  std::memset(p, 0xCD, rounded);
  return p;
}
}  // namespace

EmulatedDevice::EmulatedDevice(std::uint32_t seed) : rng_(seed) {
  queues_.push_back(std::make_unique<Queue>());
  default_queue_ = queues_.back().get();
}

EmulatedDevice::~EmulatedDevice() {
  for (auto& [begin, bytes] : device_blocks_)
    std::free(reinterpret_cast<void*>(begin));
}

std::vector<detail::DeviceDescription> EmulatedDevice::devices() {
  return {{0, "collx emulated device (host memory, deferred streams)", std::size_t{1} << 30, 0, 0}};
}

detail::PointerKind EmulatedDevice::pointer_kind(const void* pointer) {
  std::lock_guard lock(mutex_);
  const auto p = reinterpret_cast<std::uintptr_t>(pointer);
  auto it = device_blocks_.upper_bound(p);
  if (it == device_blocks_.begin()) return {};
  --it;
  if (p < it->first + it->second) return {true, 0};
  return {};
}

void EmulatedDevice::set_device(int device) {
  if (device != 0)
    throw Error(ErrorCode::cuda, "", -1, "emulated device: no device " + std::to_string(device));
}

void* EmulatedDevice::allocate(Memory memory, std::size_t bytes) {
  void* p = aligned(bytes);
  if (memory == Memory::device) {
    std::lock_guard lock(mutex_);
    device_blocks_[reinterpret_cast<std::uintptr_t>(p)] = std::max<std::size_t>(bytes, 1);
  }
  return p;
}

void EmulatedDevice::free(Memory memory, void* pointer) {
  if (pointer == nullptr) return;
  std::lock_guard lock(mutex_);
  const bool device = memory == Memory::device;
  synchronize_device_locked(device ? "free of device memory (cudaFree)"
                                   : "free of pinned memory (cudaFreeHost)");
  if (device) device_blocks_.erase(reinterpret_cast<std::uintptr_t>(pointer));
  std::free(pointer);
}

detail::DeviceApi::Stream EmulatedDevice::create_stream() {
  std::lock_guard lock(mutex_);
  queues_.push_back(std::make_unique<Queue>());
  return queues_.back().get();
}

void EmulatedDevice::destroy_stream(Stream stream) noexcept {
  // As CUDA: the work already enqueued still runs. The queue stays (events may point at it).
  try {
    std::lock_guard lock(mutex_);
    auto* q = static_cast<Queue*>(stream);
    run_until_locked({q, q->enqueued});
  } catch (...) {
  }
}

detail::DeviceApi::Event EmulatedDevice::create_event() {
  return new EventState;
}
void EmulatedDevice::destroy_event(Event event) noexcept {
  delete static_cast<EventState*>(event);
}

void EmulatedDevice::record(Event event, Stream stream) {
  std::lock_guard lock(mutex_);
  auto* q = static_cast<Queue*>(stream);
  // Like a CUDA event recorded after waits that no operation followed yet: an empty operation
  // carries them, so the event completes only after what they wait for.
  if (!q->waits.empty()) push(*q, Op{});
  static_cast<EventState*>(event)->mark = {q, q->enqueued};
}

bool EmulatedDevice::done(Event event) {
  std::lock_guard lock(mutex_);
  run_some_locked();
  return complete(static_cast<EventState*>(event)->mark);
}

void EmulatedDevice::synchronize(Event event) {
  std::lock_guard lock(mutex_);
  run_until_locked(static_cast<EventState*>(event)->mark);
}

void EmulatedDevice::wait(Stream stream, Event event) {
  std::lock_guard lock(mutex_);
  // The event as recorded now (a later record does not move the wait).
  static_cast<Queue*>(stream)->waits.push_back(static_cast<EventState*>(event)->mark);
}

void EmulatedDevice::copy(void* dst, const void* src, std::size_t bytes, Copy, Stream stream) {
  std::lock_guard lock(mutex_);
  push(*static_cast<Queue*>(stream),
       Op{[dst, src, bytes] { std::memmove(dst, src, bytes); }, {}, {}});
}

void EmulatedDevice::reduce(void* dst, const void* a, const void* b, std::size_t n, DataType type,
                            ReduceOp op, double divisor, Stream stream) {
  if (!is_supported(type, op)) {
    throw Error(ErrorCode::unsupported, "", -1, "emulated device: unsupported type/op");
  }
  std::lock_guard lock(mutex_);
  push(*static_cast<Queue*>(stream),
       Op{[=] { kernels::reduce(dst, a, b, n, type, op, divisor); }, {}, {}});
}

void EmulatedDevice::hold(Stream stream, std::shared_ptr<StreamHold> hold) {
  std::lock_guard lock(mutex_);
  push(*static_cast<Queue*>(stream), Op{{}, {}, std::move(hold)});
}

void EmulatedDevice::enqueue(Stream stream, std::function<void()> work) {
  std::lock_guard lock(mutex_);
  push(*static_cast<Queue*>(stream), Op{std::move(work), {}, {}});
}

void EmulatedDevice::synchronize_stream(Stream stream) {
  std::lock_guard lock(mutex_);
  auto* q = static_cast<Queue*>(stream);
  if (!q->waits.empty()) push(*q, Op{});
  run_until_locked({q, q->enqueued});
}

std::size_t EmulatedDevice::pending() {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& q : queues_)
    n += q->ops.size();
  return n;
}

void EmulatedDevice::push(Queue& q, Op op) {
  op.after = std::move(q.waits);
  q.waits.clear();
  q.ops.push_back(std::move(op));
  ++q.enqueued;
}

bool EmulatedDevice::ready(const Op& op) const {
  for (const Mark& m : op.after) {
    if (!complete(m)) return false;
  }
  return !op.hold || op.hold->is_open();
}

bool EmulatedDevice::step_locked() {
  std::vector<Queue*> runnable;
  for (const auto& q : queues_) {
    if (!q->ops.empty() && ready(q->ops.front())) runnable.push_back(q.get());
  }
  if (runnable.empty()) return false;
  Queue* q = runnable[std::uniform_int_distribution<std::size_t>(0, runnable.size() - 1)(rng_)];
  Op op = std::move(q->ops.front());
  q->ops.pop_front();
  if (op.work) op.work();
  ++q->executed;
  ++run_;
  return true;
}

void EmulatedDevice::run_some_locked() {
  // Mostly nothing, sometimes a few operations: work lags behind the host, by a random amount.
  const int roll = std::uniform_int_distribution<int>(0, 7)(rng_);
  const int n = roll < 5 ? 0 : roll - 4;
  for (int i = 0; i < n && step_locked(); ++i) {
  }
}

void EmulatedDevice::synchronize_device_locked(const char* what) {
  while (step_locked()) {
  }
  for (const auto& q : queues_) {
    if (!q->ops.empty()) {
      throw Error(ErrorCode::internal, "", -1,
                  std::string("emulated device: ") + what +
                      " waits for every stream of the device, and a stream is held: on a GPU "
                      "this never returns");
    }
  }
}

void EmulatedDevice::run_until_locked(const Mark& m) {
  while (!complete(m)) {
    if (!step_locked()) {
      throw Error(ErrorCode::internal, "", -1,
                  "emulated device: waiting for work that can never run (a stream behind a hold "
                  "or an event that is never reached)");
    }
  }
}

}  // namespace collx::testing
