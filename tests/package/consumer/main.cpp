// An installed collx's user: an allreduce and a broadcast, each result checked.
#include <collx/collx.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int failures = 0;
  {
    collx::Communicator comm(MPI_COMM_WORLD);
    const int p = comm.size();
    std::vector<float> values(1000, static_cast<float>(comm.rank() + 1));
    comm.allreduce<float>(values, collx::ReduceOp::sum);
    const float expected = static_cast<float>(p * (p + 1) / 2);
    for (float v : values)
      failures += v != expected;
    std::vector<int> word(3, comm.rank() == 0 ? 7 : 0);
    comm.broadcast<int>(word, /*root=*/0);
    for (int v : word)
      failures += v != 7;
    if (comm.rank() == 0) std::printf("consumer: %d ranks, %d wrong\n", p, failures);
  }
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
