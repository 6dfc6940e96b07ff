// The device-memory layer's parts that need neither MPI nor a GPU: the memory-kind decision, the
// ledger's conflict rule, the fenced pools and the engine's copies and reductions, on the
// emulated device (deferred, reordered streams).
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "device_api.hpp"
#include "device_engine.hpp"
#include "emulated_device.hpp"
#include "memory.hpp"

namespace {

using collx::DataType;
using collx::MemoryKind;
using collx::ReduceOp;
using namespace collx::detail;
using collx::testing::EmulatedDevice;

DetectedBuffer host(const char* name, std::size_t bytes = 8) {
  return {name, bytes, false, -1};
}
DetectedBuffer device(const char* name, int id = 0, std::size_t bytes = 8) {
  return {name, bytes, true, id};
}

TEST(MemoryDecision, HostUnlessEveryBufferIsDeviceMemory) {
  const DetectedBuffer all_host[] = {host("sendbuf"), host("recvbuf")};
  EXPECT_FALSE(decide_memory(MemoryKind::automatic, false, all_host).device);
  EXPECT_TRUE(decide_memory(MemoryKind::automatic, false, all_host).error.empty());
  const DetectedBuffer all_device[] = {device("sendbuf", 1), device("recvbuf", 1)};
  const MemoryDecision d = decide_memory(MemoryKind::automatic, false, all_device);
  EXPECT_TRUE(d.device);
  EXPECT_EQ(d.device_id, 1);
  EXPECT_TRUE(d.error.empty());
}

TEST(MemoryDecision, AMixIsRejectedAndNamesTheBuffers) {
  const DetectedBuffer mixed[] = {device("sendbuf"), host("recvbuf")};
  const MemoryDecision d = decide_memory(MemoryKind::automatic, false, mixed);
  EXPECT_NE(d.error.find("sendbuf is device memory but recvbuf is host memory"), std::string::npos)
      << d.error;
  const DetectedBuffer two_devices[] = {device("sendbuf", 0), device("recvbuf", 1)};
  EXPECT_NE(decide_memory(MemoryKind::automatic, false, two_devices).error.find("one device"),
            std::string::npos);
}

TEST(MemoryDecision, EmptyBuffersDoNotCount) {
  // A zero-byte buffer is never touched: its kind does not matter.
  const DetectedBuffer buffers[] = {device("sendbuf"), host("recvbuf", 0)};
  EXPECT_TRUE(decide_memory(MemoryKind::automatic, false, buffers).device);
  const DetectedBuffer nothing[] = {host("sendbuf", 0)};
  EXPECT_FALSE(decide_memory(MemoryKind::automatic, true, nothing).device);
  EXPECT_TRUE(decide_memory(MemoryKind::automatic, true, nothing).error.empty());
}

TEST(MemoryDecision, KindGivenByTheCaller) {
  const DetectedBuffer given[] = {device("sendbuf", -1), device("recvbuf", -1)};
  const MemoryDecision d = decide_memory(MemoryKind::device, false, given);
  EXPECT_TRUE(d.device);
  EXPECT_EQ(d.device_id, -1);  // the current device
  EXPECT_FALSE(decide_memory(MemoryKind::host, false, given).device);
  EXPECT_NE(decide_memory(MemoryKind::host, true, given).error.find("Options::stream"),
            std::string::npos);
  const DetectedBuffer host_buffers[] = {host("buffer")};
  EXPECT_NE(decide_memory(MemoryKind::automatic, true, host_buffers).error.find("host memory"),
            std::string::npos);
}

TEST(Ledger, ConflictsAreReadAfterWriteWriteAfterReadAndWriteAfterWrite) {
  const ByteRange a{100, 200};
  const ByteRange b{200, 300};  // adjacent, no overlap
  const ByteRange c{150, 250};
  const Access write_a{{}, a};
  const Access read_a{{a, {}}, {}};
  EXPECT_TRUE(write_a.conflicts_with(read_a));                // read after write
  EXPECT_TRUE(read_a.conflicts_with(write_a));                // write after read
  EXPECT_TRUE(write_a.conflicts_with(write_a));               // write after write
  EXPECT_FALSE(read_a.conflicts_with(read_a));                // reads share
  EXPECT_FALSE(write_a.conflicts_with(Access{{b, {}}, {}}));  // adjacent
  EXPECT_TRUE(write_a.conflicts_with(Access{{{}, c}, {}}));   // second read range
  const Access nothing{};
  EXPECT_FALSE(nothing.conflicts_with(write_a));  // empty ranges never conflict
}

// The build's own device API (CUDA's, in a CUDA build): host memory of every origin is host
// memory, with or without a device, whether it is told apart without asking CUDA (heap, stack)
// or by asking.
TEST(BuiltInDeviceApi, HostMemoryIsHostMemory) {
  const std::shared_ptr<DeviceApi> api = shared_device_api();
  if (!api) GTEST_SKIP() << "a build without CUDA has no device API";
  int on_stack = 0;
  std::vector<char> small(64);
  std::vector<char> large(std::size_t{64} << 20);  // mmap'd by malloc
  static char in_data[16];
  for (const void* p :
       {static_cast<const void*>(&on_stack), static_cast<const void*>(small.data()),
        static_cast<const void*>(large.data()), static_cast<const void*>(in_data)}) {
    EXPECT_FALSE(api->pointer_kind(p).device);
  }
  std::thread other([&] {
    int there = 0;
    EXPECT_FALSE(api->pointer_kind(&there).device);
  });
  other.join();
}

class Emulated : public ::testing::Test {
 protected:
  std::shared_ptr<EmulatedDevice> device = std::make_shared<EmulatedDevice>(7);
};

TEST_F(Emulated, LedgerWaitsForTheLatestConflictOfEachOtherStream) {
  auto events = std::make_shared<EventPool>(device);
  Ledger ledger;
  void* s = device->create_stream();
  auto record = [&] {
    EventRef e = events->acquire();
    device->record(e.get(), s);
    return e;
  };
  const EventRef w1 = record();
  const EventRef w2 = record();
  ledger.add(Ledger::compute, w1, Access{{}, {0, 100}});
  ledger.add(Ledger::compute, w2, Access{{}, {50, 150}});
  ledger.add(Ledger::compute, record(), Access{{}, {500, 600}});
  std::vector<EventRef> deps;
  ledger.dependencies(Ledger::h2d, Access{{{0, 10}, {}}, {}}, deps);
  ASSERT_EQ(deps.size(), 1u);
  EXPECT_EQ(deps[0], w1);
  deps.clear();
  ledger.dependencies(Ledger::h2d, Access{{{60, 70}, {}}, {}}, deps);
  ASSERT_EQ(deps.size(), 1u);
  EXPECT_EQ(deps[0], w2);  // the latest of the stream covers the earlier ones
  deps.clear();
  ledger.dependencies(Ledger::compute, Access{{{60, 70}, {}}, {}}, deps);
  EXPECT_TRUE(deps.empty());  // its own stream orders it
  std::vector<EventRef> fences;
  ledger.dependencies(Ledger::kHost, Access{{{0, 1000}, {}}, {0, 1000}}, fences);
  EXPECT_EQ(fences.size(), 1u);
  device->synchronize_stream(s);
  ledger.prune(*device);
  EXPECT_EQ(ledger.size(), 0u);
}

TEST_F(Emulated, APooledBufferIsReusedOnlyAfterItsFences) {
  FencedPool& pool = FencedPool::of(device, 0, FencedPool::Kind::device);
  auto events = std::make_shared<EventPool>(device);
  void* s = device->create_stream();
  std::size_t capacity = 0;
  std::byte* first = pool.acquire(1000, capacity);
  EXPECT_EQ(capacity, 1024u);
  EXPECT_TRUE(device->pointer_kind(first).device);
  // Work on the buffer still pending on the device (behind a hold): given back with its event.
  auto hold = std::make_shared<collx::testing::StreamHold>();
  device->hold(s, hold);
  device->enqueue(s, [] {});
  EventRef pending = events->acquire();
  device->record(pending.get(), s);
  pool.give_back(first, capacity, {pending});
  std::size_t c2 = 0;
  std::byte* second = pool.acquire(1000, c2);
  EXPECT_FALSE(device->done(pending.get()));
  EXPECT_NE(second, first);
  pool.give_back(second, c2, {});
  // Once the fence has completed the buffer comes back.
  hold->open();
  device->synchronize(pending.get());
  std::byte* again = pool.acquire(900, c2);
  std::byte* again2 = pool.acquire(900, c2);
  EXPECT_TRUE(again == first || again2 == first);
  pool.give_back(again, c2, {});
  pool.give_back(again2, c2, {});
}

// memmove semantics for overlapping device copies, in both directions, and a reduction that
// reads what a copy wrote, all deferred on the device.
TEST_F(Emulated, EngineCopiesAndReductionsKeepTheirOrder) {
  DeviceEngine engine(device, 0, /*direct=*/false);
  const std::size_t n = 1000;
  auto* buf = static_cast<std::int32_t*>(device->allocate(DeviceApi::Memory::device, 3 * n * 4));
  std::vector<std::int32_t> reference(3 * n);
  std::iota(reference.begin(), reference.end(), 0);
  std::memcpy(buf, reference.data(), 3 * n * 4);
  // Overlapping moves, forwards and backwards by less than their length.
  engine.copy(buf + 10, buf, n * 4);
  std::memmove(reference.data() + 10, reference.data(), n * 4);
  engine.copy(buf + 5, buf + 300, n * 4);
  std::memmove(reference.data() + 5, reference.data() + 300, n * 4);
  // buf[2n..3n) = buf[0..n) + buf[n..2n), after the moves.
  engine.reduce(buf + 2 * n, buf, buf + n, n, DataType::int32, ReduceOp::sum, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    reference[2 * n + i] = reference[i] + reference[n + i];
  for (const EventRef& e : engine.record_tail())
    device->synchronize(e.get());
  EXPECT_EQ(std::memcmp(buf, reference.data(), 3 * n * 4), 0);
  EXPECT_EQ(engine.messages_in_flight(), 0u);
  device->free(DeviceApi::Memory::device, buf);
}

}  // namespace
