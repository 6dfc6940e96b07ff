// Allreduce of more than 2^31 bytes (int8 sum), so MPI's int counts must be worked around
// without truncation. Needs about 2.2 GB of memory per rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "mpi_test_util.hpp"

namespace {

using collx::Algorithm;
using collx::DataType;
using collx::ReduceOp;

// More than 2^31 bytes and more than INT_MAX elements, and not a multiple of anything nice.
constexpr std::size_t kCount = (std::size_t{1} << 31) + 1001;

// The data are periodic (period 4): a block of kBlock bytes (a multiple of 4) holds the pattern
// that every kBlock-aligned stretch of the buffer holds, so the buffer is filled with memcpy and
// checked with memcmp, block by block (a byte loop with a modulo takes seconds per GiB).
constexpr std::size_t kBlock = std::size_t{1} << 20;

// One buffer for the whole program, reused by every test: a fresh 2 GiB allocation costs its
// page faults again (about 4-9 s per GiB on CI's virtual machine, more than the allreduce).
std::int8_t* large_buffer() {
  static std::unique_ptr<std::int8_t[]> data(new std::int8_t[kCount]);
  return data.get();
}

void run_large(Algorithm algorithm) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  std::int8_t* data = large_buffer();
  std::vector<std::int8_t> block(kBlock);
  for (std::size_t i = 0; i < kBlock; ++i) {
    block[i] = static_cast<std::int8_t>((i + static_cast<std::size_t>(comm.rank())) % 4);
  }
  for (std::size_t offset = 0; offset < kCount; offset += kBlock) {
    std::memcpy(data + offset, block.data(), std::min(kBlock, kCount - offset));
  }
  collx::Options options;
  options.algorithm = algorithm;
  comm.allreduce(collx::in_place, data, kCount, DataType::int8, ReduceOp::sum, options);
  // The sum over ranks of (i + r) % 4 depends only on i % 4.
  std::int8_t expected[4];
  for (int m = 0; m < 4; ++m) {
    int s = 0;
    for (int r = 0; r < p; ++r)
      s += (m + r) % 4;
    expected[m] = static_cast<std::int8_t>(s);
  }
  for (std::size_t i = 0; i < kBlock; ++i) block[i] = expected[i % 4];
  std::size_t wrong = 0;
  std::size_t first_wrong = kCount;
  for (std::size_t offset = 0; offset < kCount; offset += kBlock) {
    const std::size_t n = std::min(kBlock, kCount - offset);
    if (std::memcmp(data + offset, block.data(), n) == 0) continue;
    for (std::size_t i = offset; i < offset + n; ++i) {
      if (data[i] != expected[i % 4]) {
        if (wrong++ == 0) first_wrong = i;
      }
    }
  }
  EXPECT_EQ(wrong, 0u) << collx::to_string(algorithm) << ": first wrong element " << first_wrong;
  EXPECT_TRUE(collx::testing::all_ranks(wrong == 0));
}

TEST(MpiLarge, Ring) {
  run_large(Algorithm::ring);
}
TEST(MpiLarge, RecursiveDoubling) {
  run_large(Algorithm::recursive_doubling);
}
TEST(MpiLarge, Rabenseifner) {
  run_large(Algorithm::rabenseifner);
}
// On one node: the arena's pieces (elsewhere its fallback, the ring, runs again).
TEST(MpiLarge, SharedMemory) {
  run_large(Algorithm::shared_memory);
}

}  // namespace
