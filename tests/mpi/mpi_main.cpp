// main() for the GoogleTest programs that run under mpirun: every rank runs every test; rank 0
// prints the usual report, the other ranks print only their failures (tagged with the rank);
// the exit status is non-zero on every rank if any rank failed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "collx/environment.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  // MPI at the level collx asks for (MPI_THREAD_MULTIPLE with COLLX_PROGRESS_THREAD=1).
  collx::Environment environment(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::fprintf(stderr, "a test failed on another rank\n");
  return any_failed;
}
