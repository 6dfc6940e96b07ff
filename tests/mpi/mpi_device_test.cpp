// Every collective on device memory against the same call on host memory, bit for bit: each
// algorithm, several types and ops, counts 0, 1, odd and many segments (small segments), roots,
// in-place forms; nonblocking calls in flight together with host calls; the stream-ordered form
// (blocking and nonblocking) behind and ahead of work on the caller's stream; point-to-point;
// mixed host/device arguments rejected; COLLX_CHECK with device buffers.
//
// Built twice: on the emulated device (test_device_emulated.cpp; runs everywhere, its streams
// deferred and reordered so that a missing dependency shows as a wrong result) and on a real GPU
// (test_device_cuda.cpp; label gpu, skipped without a device). Each build runs in both modes:
// staged through host memory, and direct (COLLX_CUDA_AWARE=1: the transport takes the buffers).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "device_engine.hpp"
#include "exact_data.hpp"
#include "mpi_test_util.hpp"
#include "random_cases.hpp"
#include "test_device.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using collx::testing::all_ranks;
using collx::testing::make_case;
constexpr auto roots = collx::testing::test_roots;
constexpr auto with_auto = collx::testing::algorithms_with_auto;
using collx::testing::test_device;
using Bytes = std::vector<std::byte>;

// Device memory holding a copy of host bytes.
class DeviceBytes {
 public:
  explicit DeviceBytes(std::size_t bytes) : bytes_(bytes) { data_ = test_device().allocate(bytes); }
  explicit DeviceBytes(const Bytes& host) : DeviceBytes(host.size()) {
    test_device().upload(data_, host.data(), host.size());
  }
  ~DeviceBytes() { test_device().release(data_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  std::byte* get() const { return static_cast<std::byte*>(data_); }
  Bytes host() const {
    Bytes out(bytes_);
    test_device().download(out.data(), data_, bytes_);
    return out;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

std::vector<std::size_t> counts(int p) {
  return {0, 1, static_cast<std::size_t>(2 * p + 3), 3001};
}

// The library's segment sizes, and small segments (many per message, several in flight).
std::vector<collx::Options> option_sets(Algorithm a) {
  collx::Options plain;
  plain.algorithm = a;
  collx::Options segmented = plain;
  segmented.segment_bytes = 1024;
  segmented.pipeline_depth = 3;
  return {plain, segmented};
}

Bytes pattern(DataType type, int rank, std::size_t count, std::size_t first = 0) {
  Bytes b(count * collx::size_of(type));
  collx::verify::fill_pattern(b.data(), type, rank, count, first);
  return b;
}

std::string label(Collective c, const collx::Options& o, DataType t, std::size_t count,
                  int root = -1, bool in_place = false) {
  return std::string(collx::to_string(c)) + "/" + std::string(collx::to_string(o.algorithm)) + " " +
         std::string(collx::to_string(t)) + " count=" + std::to_string(count) +
         " segment=" + std::to_string(o.segment_bytes) +
         (root >= 0 ? " root=" + std::to_string(root) : "") + (in_place ? " in-place" : "");
}

class MpiDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = test_device().unavailable();
    if (!all_ranks(why.empty())) GTEST_SKIP() << "no device: " << why;
  }
  void TearDown() override {
    if (test_device().unavailable().empty() && !HasFailure()) {
      // Every message of every device call was seen done.
      int device = 0;
      if (collx::detail::device_api() != nullptr)
        device = collx::detail::device_api()->current_device();
      EXPECT_EQ(collx::detail::state_of(comm).device_engine(device).messages_in_flight(), 0u);
    }
  }
  // The test device first: the communicator asks the device API when it is made.
  bool device_installed_ = (test_device(), true);
  collx::Communicator comm{MPI_COMM_WORLD};
  int p = comm.size();
  int me = comm.rank();
};

TEST_F(MpiDevice, Allreduce) {
  std::uint64_t seed = 1;
  for (Algorithm a : with_auto(Collective::allreduce)) {
    for (const collx::Options& o : option_sets(a)) {
      for (auto [type, op] :
           {std::pair{DataType::float32, ReduceOp::sum},
            std::pair{DataType::bfloat16, ReduceOp::avg}, std::pair{DataType::int64, ReduceOp::min},
            std::pair{DataType::float16, ReduceOp::prod}}) {
        for (std::size_t count : counts(p)) {
          for (bool in_place : {false, true}) {
            const auto c = make_case(type, op, count, me, p, seed++);
            Bytes host_out(c.input.size(), std::byte{0x11});
            DeviceBytes dev_in(c.input);
            DeviceBytes dev_out(host_out);
            if (in_place) {
              host_out = c.input;
              comm.allreduce(host_out.data(), host_out.data(), count, type, op, o);
              comm.allreduce(dev_in.get(), dev_in.get(), count, type, op, o);
            } else {
              comm.allreduce(c.input.data(), host_out.data(), count, type, op, o);
              comm.allreduce(dev_in.get(), dev_out.get(), count, type, op, o);
            }
            const Bytes got = in_place ? dev_in.host() : dev_out.host();
            ASSERT_TRUE(all_ranks(got == host_out && host_out == c.expected))
                << label(Collective::allreduce, o, type, count, -1, in_place);
          }
        }
      }
    }
  }
}

TEST_F(MpiDevice, Broadcast) {
  for (Algorithm a : with_auto(Collective::broadcast)) {
    for (const collx::Options& o : option_sets(a)) {
      for (DataType type : {DataType::int8, DataType::float64}) {
        for (std::size_t count : counts(p)) {
          for (int root : roots(p)) {
            const Bytes start = me == root ? pattern(type, root, count)
                                           : Bytes(count * collx::size_of(type), std::byte{0x5A});
            DeviceBytes dev(start);
            comm.broadcast(dev.get(), count, type, root, o);
            ASSERT_TRUE(all_ranks(dev.host() == pattern(type, root, count)))
                << label(Collective::broadcast, o, type, count, root);
          }
        }
      }
    }
  }
}

TEST_F(MpiDevice, Reduce) {
  std::uint64_t seed = 100;
  for (Algorithm a : with_auto(Collective::reduce)) {
    for (const collx::Options& o : option_sets(a)) {
      for (auto [type, op] : {std::pair{DataType::int32, ReduceOp::sum},
                              std::pair{DataType::float32, ReduceOp::avg}}) {
        for (std::size_t count : counts(p)) {
          for (int root : roots(p)) {
            for (bool in_place : {false, true}) {
              const auto c = make_case(type, op, count, me, p, seed++);
              DeviceBytes dev_in(c.input);
              DeviceBytes dev_out(Bytes(c.input.size(), std::byte{0x11}));
              if (in_place && me == root) {
                comm.reduce(dev_in.get(), dev_in.get(), count, type, op, root, o);
              } else {
                comm.reduce(dev_in.get(), me == root ? dev_out.get() : nullptr, count, type, op,
                            root, o);
              }
              const Bytes got = in_place ? dev_in.host() : dev_out.host();
              ASSERT_TRUE(all_ranks(me != root || got == c.expected))
                  << label(Collective::reduce, o, type, count, root, in_place);
            }
          }
        }
      }
    }
  }
}

TEST_F(MpiDevice, Allgather) {
  for (Algorithm a : with_auto(Collective::allgather)) {
    for (const collx::Options& o : option_sets(a)) {
      for (std::size_t count : counts(p)) {
        for (bool in_place : {false, true}) {
          const DataType type = DataType::float32;
          const std::size_t block = count * 4;
          const Bytes mine = pattern(type, me, count);
          Bytes start(block * p, std::byte{0x77});
          if (in_place && block) std::memcpy(start.data() + me * block, mine.data(), block);
          DeviceBytes out(start);
          DeviceBytes in(mine);
          if (in_place) {
            comm.allgather(collx::in_place, out.get(), count, type, o);
          } else {
            comm.allgather(in.get(), out.get(), count, type, o);
          }
          Bytes expected;
          for (int r = 0; r < p; ++r) {
            const Bytes b = pattern(type, r, count);
            expected.insert(expected.end(), b.begin(), b.end());
          }
          ASSERT_TRUE(all_ranks(out.host() == expected))
              << label(Collective::allgather, o, type, count, -1, in_place);
        }
      }
    }
  }
}

TEST_F(MpiDevice, ReduceScatterEqualAndPerRankBlocks) {
  std::uint64_t seed = 200;
  for (Algorithm a : with_auto(Collective::reduce_scatter)) {
    for (const collx::Options& o : option_sets(a)) {
      for (auto [type, op] : {std::pair{DataType::int64, ReduceOp::sum},
                              std::pair{DataType::bfloat16, ReduceOp::avg}}) {
        for (std::size_t count : counts(p)) {
          const std::size_t elem = collx::size_of(type);
          for (bool in_place : {false, true}) {
            const auto c = make_case(type, op, count * p, me, p, seed++);
            const Bytes expected(
                c.expected.begin() + static_cast<std::ptrdiff_t>(me * count * elem),
                c.expected.begin() + static_cast<std::ptrdiff_t>((me + 1) * count * elem));
            DeviceBytes in(c.input);
            DeviceBytes out(Bytes(count * elem, std::byte{0x21}));
            Bytes got;
            if (in_place) {
              comm.reduce_scatter(in.get(), in.get(), count, type, op, o);
              got = in.host();
              got.resize(count * elem);
            } else {
              comm.reduce_scatter(in.get(), out.get(), count, type, op, o);
              got = out.host();
            }
            ASSERT_TRUE(all_ranks(got == expected))
                << label(Collective::reduce_scatter, o, type, count, -1, in_place);
          }
          std::vector<std::size_t> lengths(p);
          for (int r = 0; r < p; ++r)
            lengths[r] = (count + r) % 5 * (r % 3) + (count > 1000 ? count / (r + 1) : 0);
          std::vector<std::size_t> offsets(p + 1, 0);
          std::partial_sum(lengths.begin(), lengths.end(), offsets.begin() + 1);
          const auto c = make_case(type, op, offsets.back(), me, p, seed++);
          DeviceBytes in(c.input);
          DeviceBytes out(Bytes(lengths[me] * elem, std::byte{0x21}));
          comm.reduce_scatter_v(in.get(), out.get(), lengths, type, op, o);
          const Bytes expected(
              c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me] * elem),
              c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me + 1] * elem));
          ASSERT_TRUE(all_ranks(out.host() == expected))
              << label(Collective::reduce_scatter_v, o, type, count);
        }
      }
    }
  }
}

TEST_F(MpiDevice, GatherAndScatter) {
  for (Algorithm a : with_auto(Collective::gather)) {
    for (const collx::Options& o : option_sets(a)) {
      for (std::size_t count : counts(p)) {
        for (int root : roots(p)) {
          for (bool in_place : {false, true}) {
            const DataType type = DataType::int32;
            const std::size_t block = count * 4;
            const Bytes mine = pattern(type, me, count);
            Bytes start(block * p, std::byte{0x31});
            if (in_place && me == root && block) {
              std::memcpy(start.data() + root * block, mine.data(), block);
            }
            DeviceBytes all(start);
            DeviceBytes in(mine);
            if (in_place && me == root) {
              comm.gather(all.get() + root * block, all.get(), count, type, root, o);
            } else {
              comm.gather(in.get(), me == root ? all.get() : nullptr, count, type, root, o);
            }
            Bytes expected;
            for (int r = 0; r < p; ++r) {
              const Bytes b = pattern(type, r, count);
              expected.insert(expected.end(), b.begin(), b.end());
            }
            ASSERT_TRUE(all_ranks(me != root || all.host() == expected))
                << label(Collective::gather, o, type, count, root, in_place);

            DeviceBytes source(me == root ? pattern(type, root, count * p) : Bytes(block * p));
            DeviceBytes piece(Bytes(block, std::byte{0x41}));
            if (in_place && me == root) {
              comm.scatter(source.get(), nullptr, count, type, root, o);
            } else {
              comm.scatter(me == root ? source.get() : nullptr, piece.get(), count, type, root, o);
            }
            const bool ok =
                (in_place && me == root) || piece.host() == pattern(type, root, count, me * count);
            ASSERT_TRUE(all_ranks(ok))
                << label(Collective::scatter, o, type, count, root, in_place);
          }
        }
      }
    }
  }
}

TEST_F(MpiDevice, Alltoall) {
  for (Algorithm a : with_auto(Collective::alltoall)) {
    for (const collx::Options& o : option_sets(a)) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1500}}) {
        for (bool in_place : {false, true}) {
          const DataType type = DataType::uint32;
          const Bytes send = pattern(type, me, count * p);
          DeviceBytes in(send);
          DeviceBytes out(Bytes(send.size(), std::byte{0x61}));
          if (in_place) {
            comm.alltoall(in.get(), in.get(), count, type, o);
          } else {
            comm.alltoall(in.get(), out.get(), count, type, o);
          }
          Bytes expected;
          for (int i = 0; i < p; ++i) {
            const Bytes b = pattern(type, i, count, me * count);
            expected.insert(expected.end(), b.begin(), b.end());
          }
          ASSERT_TRUE(all_ranks((in_place ? in.host() : out.host()) == expected))
              << label(Collective::alltoall, o, type, count, -1, in_place);
        }
      }
    }
  }
}

TEST_F(MpiDevice, NonblockingDeviceAndHostCallsInFlightTogether) {
  const std::size_t n = 3001;
  std::vector<float> ar(n, 1.0f + me);
  DeviceBytes dev_ar(Bytes(reinterpret_cast<const std::byte*>(ar.data()),
                           reinterpret_cast<const std::byte*>(ar.data() + n)));
  std::vector<float> host_ar = ar;
  std::vector<std::int32_t> bc(n, me == p - 1 ? 7 : 0);
  DeviceBytes dev_bc(Bytes(reinterpret_cast<const std::byte*>(bc.data()),
                           reinterpret_cast<const std::byte*>(bc.data() + n)));
  std::vector<std::int64_t> rs(n * p, me + 1);
  DeviceBytes dev_rs(Bytes(reinterpret_cast<const std::byte*>(rs.data()),
                           reinterpret_cast<const std::byte*>(rs.data() + n * p)));
  DeviceBytes dev_rs_out(n * 8);
  collx::Options small;
  small.segment_bytes = 2048;
  std::vector<collx::Request> reqs;
  reqs.push_back(comm.iallreduce(dev_ar.get(), dev_ar.get(), n, DataType::float32, ReduceOp::sum));
  reqs.push_back(
      comm.iallreduce(host_ar.data(), host_ar.data(), n, DataType::float32, ReduceOp::sum));
  reqs.push_back(comm.ibroadcast(dev_bc.get(), n, DataType::int32, p - 1, small));
  reqs.push_back(comm.ireduce_scatter(dev_rs.get(), dev_rs_out.get(), n, DataType::int64,
                                      ReduceOp::sum, small));
  reqs.push_back(comm.ibarrier());
  for (std::size_t k = 0; k < reqs.size(); ++k)
    reqs[(k + static_cast<std::size_t>(me)) % reqs.size()].wait();
  // Every rank checks, then all agree: a rank that returned early would leave the others
  // waiting in the next test's collectives.
  const Bytes ar_bytes = dev_ar.host();
  const float sum = static_cast<float>(p * (p + 1) / 2);
  bool ok = std::memcmp(ar_bytes.data(), host_ar.data(), n * 4) == 0;
  EXPECT_TRUE(ok) << "device allreduce differs from the host allreduce";
  EXPECT_EQ(host_ar[n - 1], sum);
  ok = ok && host_ar[n - 1] == sum;
  const Bytes bc_bytes = dev_bc.host();
  const Bytes rs_bytes = dev_rs_out.host();
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t b = 0;
    std::int64_t r = 0;
    std::memcpy(&b, bc_bytes.data() + i * 4, 4);
    std::memcpy(&r, rs_bytes.data() + i * 8, 8);
    if (b != 7 || r != p * (p + 1) / 2) ++wrong;
  }
  EXPECT_EQ(wrong, 0u) << "broadcast or reduce_scatter elements wrong on rank " << me;
  ASSERT_TRUE(all_ranks(ok && wrong == 0));
}

// Inputs written on the caller's stream just before the call; results read on it right after a
// blocking call, or after a nonblocking one's wait(). The collective waits for the first, the
// second sees the results; the caller's stream is never held by a nonblocking call (work on it
// that does not need the results runs meanwhile: a download of another buffer, here).
TEST_F(MpiDevice, StreamOrderedBlockingAndNonblocking) {
  auto& device = test_device();
  void* stream = device.create_stream();
  std::uint64_t seed = 400;
  for (bool blocking : {true, false}) {
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::automatic}) {
      for (std::size_t count : {std::size_t{1}, std::size_t{3001}}) {
        const auto c = make_case(DataType::float32, ReduceOp::sum, count, me, p, seed++);
        DeviceBytes buf(c.input.size());  // garbage until the stream's copy
        Bytes got(c.input.size(), std::byte{0});
        device.upload_async(buf.get(), c.input.data(), c.input.size(), stream);
        collx::Options o;
        o.algorithm = a;
        o.segment_bytes = 1024;
        o.stream = stream;
        if (blocking) {
          comm.allreduce(buf.get(), buf.get(), count, DataType::float32, ReduceOp::sum, o);
          device.download_async(got.data(), buf.get(), got.size(), stream);
        } else {
          DeviceBytes other(c.input.size());
          Bytes other_got(c.input.size(), std::byte{0});
          device.upload_async(other.get(), c.input.data(), c.input.size(), stream);
          collx::Request r =
              comm.iallreduce(buf.get(), buf.get(), count, DataType::float32, ReduceOp::sum, o);
          device.download_async(other_got.data(), other.get(), other_got.size(), stream);
          device.synchronize(stream);  // would never return if the call held the stream
          EXPECT_EQ(other_got, c.input);
          r.wait();
          device.download_async(got.data(), buf.get(), got.size(), stream);
        }
        device.synchronize(stream);
        ASSERT_TRUE(all_ranks(got == c.expected))
            << (blocking ? "blocking " : "nonblocking ") << collx::to_string(a) << " " << count;
      }
    }
  }
  device.destroy_stream(stream);
}

// Two communicators (each with its own streams) take device scratch and pinned segments from
// the same pools: a buffer one gives back must not be reused by the other before the device work
// on it has finished.
TEST_F(MpiDevice, CommunicatorsShareThePoolsSafely) {
  collx::Communicator other = comm.dup();
  std::uint64_t seed = 700;
  for (int round = 0; round < 20; ++round) {
    const std::size_t count = 1000 + 37 * static_cast<std::size_t>(round);
    const auto c1 = make_case(DataType::float32, ReduceOp::sum, count, me, p, seed++);
    const auto c2 = make_case(DataType::int32, ReduceOp::max, count, me, p, seed++);
    DeviceBytes b1(c1.input);
    DeviceBytes b2(c2.input);
    collx::Options o;
    o.segment_bytes = 512;
    o.algorithm = round % 2 ? Algorithm::ring : Algorithm::rabenseifner;
    collx::Request r1 =
        comm.iallreduce(b1.get(), b1.get(), count, DataType::float32, ReduceOp::sum, o);
    collx::Request r2 =
        other.iallreduce(b2.get(), b2.get(), count, DataType::int32, ReduceOp::max, o);
    if (round % 2) {
      r1.wait();
      r2.wait();
    } else {
      r2.wait();
      r1.wait();
    }
    ASSERT_TRUE(all_ranks(b1.host() == c1.expected && b2.host() == c2.expected)) << round;
  }
}

TEST_F(MpiDevice, PointToPoint) {
  const int next = (me + 1) % p;
  const int prev = (me + p - 1) % p;
  const Bytes out = pattern(DataType::float64, me, 1000);
  DeviceBytes dev_out(out);
  DeviceBytes dev_in(Bytes(out.size(), std::byte{0}));
  comm.sendrecv(dev_out.get(), 1000, next, dev_in.get(), 1000, prev, DataType::float64, 5);
  ASSERT_TRUE(all_ranks(dev_in.host() == pattern(DataType::float64, prev, 1000)));
  // isend/irecv, and a receive longer than its message: the bytes after it keep their value.
  DeviceBytes longer(Bytes(2 * out.size(), std::byte{0x3C}));
  auto rr = comm.irecv(longer.get(), 2000, DataType::float64, prev, 9);
  auto rs = comm.isend(dev_out.get(), 1000, DataType::float64, next, 9);
  rr.wait();
  rs.wait();
  Bytes expected = pattern(DataType::float64, prev, 1000);
  expected.resize(2 * out.size(), std::byte{0x3C});
  ASSERT_TRUE(all_ranks(longer.host() == expected));
}

TEST_F(MpiDevice, MixedHostAndDeviceArgumentsAreRejectedBeforeAnythingIsSent) {
  std::vector<float> host(16, 1.0f);
  DeviceBytes dev(Bytes(64));
  try {
    comm.allreduce(dev.get(), host.data(), 16, DataType::float32, ReduceOp::sum);
    FAIL() << "a device sendbuf with a host recvbuf was accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument);
    EXPECT_EQ(e.collective(), "allreduce");
    EXPECT_EQ(e.rank(), me);
    EXPECT_NE(e.detail().find("sendbuf is device memory but recvbuf is host memory"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(comm.alltoall(host.data(), dev.get(), 16 / p, DataType::float32), collx::Error);
  // A stream is for device memory.
  collx::Options o;
  o.stream = test_device().create_stream();
  EXPECT_THROW(comm.allreduce(host.data(), host.data(), 16, DataType::float32, ReduceOp::sum, o),
               collx::Error);
  test_device().destroy_stream(o.stream);
  // The communicator is still in step on every rank.
  comm.allreduce(host.data(), host.data(), 16, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(host[0], static_cast<float>(p));
}

#if defined(COLLX_TEST_DEVICE_CAN_HOLD)
// A nonblocking stream-ordered call returns before its inputs exist: the caller's stream is held
// (as behind a long kernel) with the inputs' upload queued behind the hold, and the call neither
// waits for them nor completes until they are there. Sizes where the call runs on host copies of
// its buffers (the shared arena's row: asked for, and auto's at 3-4 ranks) and where it stages
// message by message (auto at 2 ranks).
TEST_F(MpiDevice, NonblockingCallReturnsBeforeItsInputsAreReady) {
  auto& device = test_device();
  void* stream = device.create_stream();
  std::uint64_t seed = 700;
  for (const Algorithm a : {Algorithm::automatic, Algorithm::shared_memory})
    for (const std::size_t count : {std::size_t{16}, std::size_t{70000}}) {
      const auto c = make_case(DataType::int32, ReduceOp::sum, count, me, p, seed++);
      DeviceBytes buf(c.input.size());
      const std::function<void()> release = device.hold(stream);
      device.upload_async(buf.get(), c.input.data(), c.input.size(), stream);
      collx::Options o;
      o.stream = stream;
      o.algorithm = a;
      collx::Request r = comm.iallreduce(buf.get(), buf.get(), count, DataType::int32,
                                         ReduceOp::sum, o);  // returns: nothing waits for the hold
      // (One rank's in-place allreduce has nothing to compute: it may be complete at once.)
      const bool done_before_inputs = p > 1 && r.test();
      EXPECT_FALSE(done_before_inputs) << collx::to_string(a) << " count " << count;
      release();
      r.wait();
      Bytes got(c.input.size());
      device.download_async(got.data(), buf.get(), got.size(), stream);
      device.synchronize(stream);
      ASSERT_TRUE(all_ranks(!done_before_inputs && got == c.expected))
          << collx::to_string(a) << " count " << count;
    }
  device.destroy_stream(stream);
}
#endif

// The memory kind is each rank's own: rank 0 calls with device buffers, the others with host
// buffers, and every collective still meets (docs/DEVICE_MEMORY.md: ranks may differ).
TEST_F(MpiDevice, RanksMayDifferInMemoryKind) {
  for (const std::size_t count : {std::size_t{16}, std::size_t{1000}, std::size_t{70000}}) {
    const auto c = make_case(DataType::float32, ReduceOp::sum, count, me, p, 31);
    Bytes got(c.expected.size());
    if (me == 0) {
      DeviceBytes dev(c.input);
      comm.allreduce(dev.get(), dev.get(), count, DataType::float32, ReduceOp::sum);
      got = dev.host();
    } else {
      got = c.input;
      comm.allreduce(got.data(), got.data(), count, DataType::float32, ReduceOp::sum);
    }
    ASSERT_TRUE(all_ranks(got == c.expected)) << "allreduce count " << count;
    Bytes block = pattern(DataType::int32, me, count);
    Bytes gathered(block.size() * static_cast<std::size_t>(p));
    Bytes expected;
    for (int r = 0; r < p; ++r) {
      const Bytes b = pattern(DataType::int32, r, count);
      expected.insert(expected.end(), b.begin(), b.end());
    }
    if (me == 0) {
      DeviceBytes in(block), out(gathered.size());
      comm.allgather(in.get(), out.get(), count, DataType::int32);
      gathered = out.host();
    } else {
      comm.allgather(block.data(), gathered.data(), count, DataType::int32);
    }
    ASSERT_TRUE(all_ranks(gathered == expected)) << "allgather count " << count;
    Bytes data = me == 0 ? pattern(DataType::int32, 7, count) : Bytes(block.size());
    if (me == 1 % p) {
      DeviceBytes dev(data);
      comm.broadcast(dev.get(), count, DataType::int32, 0);
      data = dev.host();
    } else {
      comm.broadcast(data.data(), count, DataType::int32, 0);
    }
    ASSERT_TRUE(all_ranks(data == pattern(DataType::int32, 7, count))) << "broadcast " << count;
  }
}

// Where every rank's transport takes device memory (direct), a large call leaves the shared
// arena aside on every rank: device buffers move device to device, not through host copies,
// and a rank with host buffers runs the same algorithm. Small calls keep the arena.
TEST_F(MpiDevice, LargeDirectCallsLeaveTheArenaAside) {
  auto& state = collx::detail::state_of(comm);
  const bool direct = state.transport->supports_device_memory();
  const bool arena = comm.shared_memory();
  // A transport that takes device memory (COLLX_CUDA_AWARE=1 here), with the test device on every
  // rank, is agreed when the communicator is made.
  EXPECT_EQ(state.device_direct_everywhere, direct && arena);
  const std::size_t large =
      std::max(collx::detail::config().device_host_copy_bytes, collx::detail::kArenaHostCopyBytes) /
          sizeof(float) +
      1000;
  EXPECT_EQ(state.arena_for(large * sizeof(float)), arena && !direct);
  EXPECT_EQ(state.arena_for(64), arena);
  int device = 0;
  if (collx::detail::device_api() != nullptr)
    device = collx::detail::device_api()->current_device();
  auto& engine = state.device_engine(device);
  for (const std::size_t count : {std::size_t{16}, large}) {
    const auto c = make_case(DataType::float32, ReduceOp::sum, count, me, p, 77);
    Bytes got = c.input;
    const std::size_t before = engine.downloaded_bytes();
    // Rank 1 (where there is one) holds host buffers: one algorithm all the same.
    if (me == 1) {
      comm.allreduce(got.data(), got.data(), count, DataType::float32, ReduceOp::sum);
    } else {
      DeviceBytes dev(c.input);
      comm.allreduce(dev.get(), dev.get(), count, DataType::float32, ReduceOp::sum);
      got = dev.host();
    }
    ASSERT_TRUE(all_ranks(got == c.expected)) << "count " << count;
    if (count == large && direct) {
      EXPECT_EQ(engine.downloaded_bytes(), before) << "a large direct call ran on host copies";
    }
  }
}

// A small blocking call runs on host copies of its buffers (two copies and the host's algorithm,
// cheaper than a device step per message), staged or direct; a nonblocking one does not.
TEST_F(MpiDevice, SmallBlockingCallsRunOnHostCopies) {
  auto& state = collx::detail::state_of(comm);
  const bool direct = state.transport->supports_device_memory();
  const std::size_t limit = direct ? std::min(collx::detail::config().device_host_copy_bytes,
                                              collx::detail::kDirectHostCopyBytes)
                                   : collx::detail::config().device_host_copy_bytes;
  int device = 0;
  if (collx::detail::device_api() != nullptr)
    device = collx::detail::device_api()->current_device();
  auto& engine = state.device_engine(device);
  collx::Options o;
  o.algorithm = collx::Algorithm::recursive_doubling;  // no arena row: only the size decides
  for (const std::size_t count : {std::size_t{16}, std::size_t{3000}, std::size_t{20000}}) {
    const std::size_t bytes = count * sizeof(std::int32_t);
    const auto c = make_case(DataType::int32, ReduceOp::sum, count, me, p, 3);
    for (const bool blocking : {true, false}) {
      DeviceBytes dev(c.input);
      const std::size_t before = engine.downloaded_bytes();
      if (blocking) {
        comm.allreduce(dev.get(), dev.get(), count, DataType::int32, ReduceOp::sum, o);
      } else {
        comm.iallreduce(dev.get(), dev.get(), count, DataType::int32, ReduceOp::sum, o).wait();
      }
      ASSERT_TRUE(all_ranks(dev.host() == c.expected)) << "count " << count;
      const bool host_copies = engine.downloaded_bytes() != before;
      EXPECT_EQ(host_copies, blocking && bytes <= limit)
          << bytes << " bytes, " << (blocking ? "blocking" : "nonblocking")
          << (direct ? ", direct" : ", staged");
    }
  }
}

// Many small blocking calls (on host copies of their buffers where staged, message by message
// otherwise) leave the engine's ledger of device work no longer than a few calls' worth.
TEST_F(MpiDevice, LedgerStaysShortOverManyCalls) {
  const auto c = make_case(DataType::int32, ReduceOp::sum, 16, me, p, 5);
  DeviceBytes in(c.input), out(Bytes(c.input.size()));
  for (int i = 0; i < 300; ++i)
    comm.allreduce(in.get(), out.get(), 16, DataType::int32, ReduceOp::sum);
  ASSERT_TRUE(all_ranks(out.host() == c.expected));
  int device = 0;
  if (collx::detail::device_api() != nullptr)
    device = collx::detail::device_api()->current_device();
  const std::size_t entries = collx::detail::state_of(comm).device_engine(device).ledger_entries();
  EXPECT_TRUE(all_ranks(entries < 64)) << entries << " entries after 300 calls";
}

TEST_F(MpiDevice, MemoryKindGivenByTheCaller) {
  const auto c = make_case(DataType::int32, ReduceOp::max, 777, me, p, 900);
  DeviceBytes dev(c.input);
  collx::Options o;
  o.memory = collx::MemoryKind::device;  // nothing is asked
  comm.allreduce(dev.get(), dev.get(), 777, DataType::int32, ReduceOp::max, o);
  ASSERT_TRUE(all_ranks(dev.host() == c.expected));
  Bytes host = c.input;
  o.memory = collx::MemoryKind::host;
  comm.allreduce(host.data(), host.data(), 777, DataType::int32, ReduceOp::max, o);
  ASSERT_TRUE(all_ranks(host == c.expected));
}

TEST_F(MpiDevice, CheckModeComparesSignaturesInHostMemory) {
  const collx::detail::Config saved = collx::detail::config();
  collx::detail::Config checked = saved;
  checked.check = true;
  collx::detail::set_config(checked);
  const auto c = make_case(DataType::float64, ReduceOp::sum, 100, me, p, 950);
  DeviceBytes dev(c.input);
  comm.allreduce(dev.get(), dev.get(), 100, DataType::float64, ReduceOp::sum);
  collx::detail::set_config(saved);
  ASSERT_TRUE(all_ranks(dev.host() == c.expected));
}

}  // namespace
