// Progress while the caller computes: with COLLX_PROGRESS_THREAD=1 a nonblocking allreduce
// finishes while the caller sleeps, without any collx call; without it, it cannot (it needs
// many rounds of progress on both ranks), which is the control.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>
#include <vector>

#include "collx/collx.hpp"
#include "config.hpp"
#include "operation.hpp"

namespace {

TEST(MpiProgress, NonblockingAllreduceMovesOnlyWithTheProgressThread) {
  const bool threaded = collx::detail::config().progress_thread;
  collx::Communicator comm(MPI_COMM_WORLD);
  ASSERT_GE(comm.size(), 2);
  std::vector<float> data(1 << 20, 1.0f);
  collx::Options options;
  options.algorithm = collx::Algorithm::ring;
  options.segment_bytes = 64 << 10;  // dozens of segments: dozens of progress rounds
  collx::Request request = comm.iallreduce(data.data(), data.data(), data.size(),
                                           collx::DataType::float32, collx::ReduceOp::sum, options);
  EXPECT_EQ(collx::detail::Engine::instance().progress_thread_running(), threaded);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the caller "computes"
  const bool done_on_first_test = request.test();
  EXPECT_EQ(done_on_first_test, threaded);
  request.wait();
  for (float v : data)
    ASSERT_EQ(v, static_cast<float>(comm.size()));
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
