// Allreduce of more than 2^31 bytes (int8 sum), so MPI's int counts must be worked around
// without truncation. Needs about 2.2 GB of memory per rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "collx/collx.hpp"
#include "mpi_test_util.hpp"

namespace {

using collx::Algorithm;
using collx::DataType;
using collx::ReduceOp;

// More than 2^31 bytes and more than INT_MAX elements, and not a multiple of anything nice.
constexpr std::size_t kCount = (std::size_t{1} << 31) + 1001;

void run_large(Algorithm algorithm) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  std::unique_ptr<std::int8_t[]> data(new std::int8_t[kCount]);
  for (std::size_t i = 0; i < kCount; ++i) {
    data[i] = static_cast<std::int8_t>((i + static_cast<std::size_t>(comm.rank())) % 4);
  }
  collx::Options options;
  options.algorithm = algorithm;
  comm.allreduce(collx::in_place, data.get(), kCount, DataType::int8, ReduceOp::sum, options);
  // The sum over ranks of (i + r) % 4 depends only on i % 4.
  std::int8_t expected[4];
  for (int m = 0; m < 4; ++m) {
    int s = 0;
    for (int r = 0; r < p; ++r)
      s += (m + r) % 4;
    expected[m] = static_cast<std::int8_t>(s);
  }
  std::size_t wrong = 0;
  std::size_t first_wrong = kCount;
  for (std::size_t i = 0; i < kCount; ++i) {
    if (data[i] != expected[i % 4]) {
      if (wrong++ == 0) first_wrong = i;
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

}  // namespace
