// Allreduce of odd counts just above 1 GiB and 2 GiB (issue 13, case 1): every allreduce
// algorithm at every element size, and every rank's time of the call against the others'. A
// stall shows as one rank returning long after the others (1.6 s against 17.2 s at np=2, float32,
// count 268436480, before ring_stream posted its sends in unit order); a hang as the test's
// timeout. Needs about 2.1 GiB per rank (separate send and receive buffers of 1 GiB each) and
// 2 GiB for the in-place case above 2^31 bytes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "mpi_test_util.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;

// 1 GiB + 4 KiB as in the report, plus an odd number of elements.
constexpr std::size_t kNearOneGiB = (std::size_t{1} << 30) + 4096;
// 2 GiB + 4 KiB (the count of the report's second case, 2^29 + 1024 float32).
constexpr std::size_t kNearTwoGiB = (std::size_t{1} << 31) + 4096;
constexpr std::size_t kOddElements = 7;

// Fill and check stretches of kBlock bytes with memcpy/memcmp: the pattern has a period of 4
// elements, and kBlock is a multiple of 4 elements of every size.
constexpr std::size_t kBlock = std::size_t{1} << 20;

// Buffers for the whole program: a fresh GiB costs its page faults again (seconds on a VM).
std::byte* buffer(int which, std::size_t bytes) {
  static std::unique_ptr<std::byte[]> buffers[2];
  static std::size_t sizes[2] = {0, 0};
  if (sizes[which] < bytes) {
    buffers[which].reset();
    buffers[which].reset(new std::byte[bytes]);
    sizes[which] = bytes;
  }
  return buffers[which].get();
}

// Element i of rank r holds (i + r) % 4, written in the element's type.
template <typename T>
void write_pattern(std::byte* block, std::size_t elements, int rank_shift, bool summed, int p) {
  T values[4];
  for (int m = 0; m < 4; ++m) {
    int v = (m + rank_shift) % 4;
    if (summed) {
      v = 0;
      for (int r = 0; r < p; ++r)
        v += (m + r) % 4;
    }
    values[m] = static_cast<T>(v);
  }
  for (std::size_t i = 0; i < elements; ++i)
    std::memcpy(block + i * sizeof(T), &values[i % 4], sizeof(T));
}

// The pattern of one kBlock stretch for `type` (small integers: exact in every type, float16
// included).
std::vector<std::byte> pattern_block(DataType type, int rank, bool summed, int p) {
  std::vector<std::byte> block(kBlock);
  const std::size_t n = kBlock / collx::size_of(type);
  switch (type) {
    case DataType::uint8:
      write_pattern<std::uint8_t>(block.data(), n, rank, summed, p);
      break;
    case DataType::float16:
      write_pattern<collx::float16>(block.data(), n, rank, summed, p);
      break;
    case DataType::float32:
      write_pattern<float>(block.data(), n, rank, summed, p);
      break;
    case DataType::float64:
      write_pattern<double>(block.data(), n, rank, summed, p);
      break;
    default:
      ADD_FAILURE() << "no pattern for this type";
  }
  return block;
}

void fill(std::byte* data, std::size_t bytes, const std::vector<std::byte>& block) {
  for (std::size_t offset = 0; offset < bytes; offset += kBlock)
    std::memcpy(data + offset, block.data(), std::min(kBlock, bytes - offset));
}

// The first byte offset that differs from the pattern, or `bytes`.
std::size_t first_difference(const std::byte* data, std::size_t bytes,
                             const std::vector<std::byte>& block) {
  for (std::size_t offset = 0; offset < bytes; offset += kBlock) {
    const std::size_t n = std::min(kBlock, bytes - offset);
    if (std::memcmp(data + offset, block.data(), n) == 0) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (data[offset + i] != block[i]) return offset + i;
  }
  return bytes;
}

// One allreduce of `count` elements; checks the result on every rank and that no rank's call
// took much longer than another's.
void run_case(DataType type, Algorithm algorithm, std::size_t count, bool in_place) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const int p = comm.size();
  const std::size_t bytes = count * collx::size_of(type);
  std::byte* recv = buffer(0, bytes);
  std::byte* send = in_place ? recv : buffer(1, bytes);
  fill(send, bytes, pattern_block(type, comm.rank(), false, p));
  // Every page touched before the clock starts: a first touch inside the call costs seconds per
  // GiB on a virtual machine and would hide what is measured.
  if (!in_place) std::memset(recv, 0xff, bytes);
  collx::Options options;
  options.algorithm = algorithm;
  const std::string what = std::string(collx::to_string(algorithm)) + " " +
                           std::string(collx::to_string(type)) + " count " + std::to_string(count) +
                           (in_place ? " in place" : "");

  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  if (in_place) {
    comm.allreduce(collx::in_place, recv, count, type, ReduceOp::sum, options);
  } else {
    comm.allreduce(send, recv, count, type, ReduceOp::sum, options);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::size_t wrong_at = first_difference(recv, bytes, pattern_block(type, 0, true, p));
  EXPECT_EQ(wrong_at, bytes) << what << ": first wrong byte " << wrong_at;
  EXPECT_TRUE(collx::testing::all_ranks(wrong_at == bytes)) << what;

  std::vector<double> times(static_cast<std::size_t>(p));
  MPI_Allgather(&seconds, 1, MPI_DOUBLE, times.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
  // Every rank's call ends with the last messages of the same exchange: on a quiet machine the
  // ranks return within milliseconds of each other. The bound leaves room for a loaded one.
  EXPECT_LE(*slowest, 2.0 * *fastest + 2.0)
      << what << ": fastest rank " << *fastest << " s, slowest " << *slowest << " s";
  if (comm.rank() == 0) {
    std::printf("%-60s fastest %.2f s, slowest %.2f s\n", what.c_str(), *fastest, *slowest);
  }
}

constexpr DataType kTypes[] = {DataType::uint8, DataType::float16, DataType::float32,
                               DataType::float64};

std::size_t near_one_gib(DataType type) {
  return kNearOneGiB / collx::size_of(type) + kOddElements;
}

// The report's case: auto at float32, count 268436480, separate buffers.
TEST(MpiLargeOdd, ReportedCount) {
  run_case(DataType::float32, Algorithm::automatic, 268436480, false);
}

// Every allreduce algorithm, just above 1 GiB, with the element sizes taken in turn from a
// starting one (ctest starts np=2 at uint8 and np=3 at float32, so each algorithm meets two
// element sizes, and the full matrix, minutes at three oversubscribed ranks, is not needed).
// The starting element size is COLLX_TEST_FIRST_TYPE (0-3, default 0); the ring, auto's choice
// at this size, meets every element size in both runs.
TEST(MpiLargeOdd, EveryAlgorithmElementSizesInTurn) {
  const char* first = std::getenv("COLLX_TEST_FIRST_TYPE");
  std::size_t i = first != nullptr ? std::strtoul(first, nullptr, 10) : 0;
  for (Algorithm algorithm : collx::algorithms_of(Collective::allreduce)) {
    if (algorithm == Algorithm::ring) continue;
    const DataType type = kTypes[i++ % std::size(kTypes)];
    run_case(type, algorithm, near_one_gib(type), false);
  }
}

TEST(MpiLargeOdd, RingEveryElementSize) {
  for (DataType type : kTypes)
    run_case(type, Algorithm::ring, near_one_gib(type), false);
}

// Above 2^31 bytes (int-sized MPI counts are not enough), in place as the report's second case.
TEST(MpiLargeOdd, AboveTwoGiB) {
  for (Algorithm algorithm : {Algorithm::automatic, Algorithm::ring}) {
    run_case(DataType::float32, algorithm, kNearTwoGiB / 4 + kOddElements, true);
  }
}

}  // namespace
