// The memory kind of a call in the process as built and as it runs (no emulated device): host
// buffers are host memory in every build, with or without CUDA and a GPU; device memory asked
// for where there is no device (or no CUDA in the build) is a clear error, raised before
// anything is sent, and the communicator stays usable.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "device_api.hpp"
#include "memory.hpp"

namespace {

using collx::Collective;
using collx::DataType;
using collx::MemoryKind;
using collx::ReduceOp;

bool have_device() {
  const collx::detail::DeviceApi* api = collx::detail::device_api();
  return api != nullptr && collx::detail::device_api()->device_count() > 0;
}

class MpiMemoryKind : public ::testing::Test {
 protected:
  collx::Communicator comm{MPI_COMM_WORLD};
  int p = comm.size();
};

TEST_F(MpiMemoryKind, HostBuffersAreHostMemoryInEveryBuild) {
  std::vector<double> heap(100, 1.0);
  double stack[4] = {1, 2, 3, 4};
  static float in_data[8] = {};
  collx::Options automatic;
  for (const void* p : {static_cast<const void*>(heap.data()), static_cast<const void*>(stack),
                        static_cast<const void*>(in_data)}) {
    EXPECT_EQ(collx::detail::call_memory(collx::detail::state_of(comm), Collective::allreduce,
                                         automatic, {{p, 32, "sendbuf"}, {p, 32, "recvbuf"}}, true),
              nullptr);
  }
  collx::Options given;
  given.memory = MemoryKind::host;
  EXPECT_EQ(collx::detail::call_memory(collx::detail::state_of(comm), Collective::broadcast, given,
                                       {{heap.data(), 800, "buffer"}}, true),
            nullptr);
  // And the calls work.
  comm.allreduce(collx::in_place, heap.data(), heap.size(), DataType::float64, ReduceOp::sum);
  EXPECT_EQ(heap[99], static_cast<double>(p));
  comm.allreduce(collx::in_place, stack, 4, DataType::float64, ReduceOp::sum, given);
  EXPECT_EQ(stack[3], 4.0 * p);
}

TEST_F(MpiMemoryKind, DeviceMemoryWithoutADeviceIsAClearError) {
  if (have_device()) GTEST_SKIP() << "this process has a device";
  std::vector<float> buf(16, 1.0f);
  collx::Options o;
  o.memory = MemoryKind::device;
  try {
    comm.allreduce(buf.data(), buf.data(), 16, DataType::float32, ReduceOp::sum, o);
    FAIL() << "device memory accepted without a device";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::unsupported);
    EXPECT_EQ(e.collective(), "allreduce");
    EXPECT_EQ(e.rank(), comm.rank());
    const bool cuda_build = collx::build_info().cuda;
    EXPECT_NE(
        e.detail().find(cuda_build ? "no cuda device is visible" : "needs collx built with CUDA"),
        std::string::npos)
        << e.what();
  }
  o.memory = MemoryKind::automatic;
  o.stream = &buf;  // any non-null stream: rejected before it is used
  EXPECT_THROW(comm.broadcast(buf.data(), 16, DataType::float32, 0, o), collx::Error);
  o.memory = MemoryKind::host;
  try {
    comm.broadcast(buf.data(), 16, DataType::float32, 0, o);
    FAIL() << "a stream with host memory accepted";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::invalid_argument);
    EXPECT_NE(e.detail().find("Options::stream"), std::string::npos) << e.what();
  }
  // Nothing was sent: the ranks are still in step.
  comm.allreduce(collx::in_place, buf.data(), 16, DataType::float32, ReduceOp::sum);
  EXPECT_EQ(buf[0], static_cast<float>(p));
}

}  // namespace
