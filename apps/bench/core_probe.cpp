#include "core_probe.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "collx/build_config.hpp"

namespace collx::bench {

std::optional<double> cache_line_round_trip([[maybe_unused]] MPI_Comm comm) {
#if COLLX_SMPI
  return std::nullopt;  // simulated ranks share one process; their cores are not the question
#else
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, local_size = 0;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &local_size);
  // Whether rank 0's node has two ranks: every rank learns it from rank 0.
  int probed = rank == 0 && local_size >= 2 ? 1 : 0;
  MPI_Bcast(&probed, 1, MPI_INT, 0, comm);
  int on_probed_node = 0;  // this rank shares rank 0's node
  if (probed != 0) {
    int first = rank == 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MAX, node);
    on_probed_node = first;
  }
  double median_ns = 0;
  if (on_probed_node != 0) {
    // One line, owned by the node's first rank; rank 0 is local 0 by the split's key order.
    MPI_Win win = MPI_WIN_NULL;
    void* base = nullptr;
    MPI_Win_allocate_shared(local == 0 ? 64 : 0, 1, MPI_INFO_NULL, node, &base, &win);
    MPI_Aint bytes = 0;
    int unit = 0;
    void* line = nullptr;
    MPI_Win_shared_query(win, 0, &bytes, &unit, &line);
    auto* word = static_cast<std::int64_t*>(line);
    if (local == 0) *word = 0;
    MPI_Barrier(node);
    std::atomic_ref<std::int64_t> flag(*word);
    constexpr std::int64_t kStop = -1;
    if (local == 0) {
      // Batches of 16 round trips for about 20 ms (a batch is short where the ranks share a core
      // and each hand-over waits for the scheduler); the median batch's mean.
      using Clock = std::chrono::steady_clock;
      const Clock::time_point end = Clock::now() + std::chrono::milliseconds(20);
      std::vector<double> batches;
      std::int64_t value = 0;
      while (Clock::now() < end && batches.size() < 4096) {
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < 16; ++i) {
          flag.store(value + 1, std::memory_order_release);
          while (flag.load(std::memory_order_acquire) != value + 2) {
          }
          value += 2;
        }
        batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                          16);
      }
      flag.store(kStop, std::memory_order_release);
      std::nth_element(batches.begin(), batches.begin() + static_cast<long>(batches.size() / 2),
                       batches.end());
      median_ns = batches[batches.size() / 2];
    } else if (local == 1) {
      for (;;) {
        const std::int64_t value = flag.load(std::memory_order_acquire);
        if (value == kStop) break;
        if (value % 2 == 1) flag.store(value + 1, std::memory_order_release);
      }
    }
    MPI_Barrier(node);
    MPI_Win_free(&win);
  }
  MPI_Comm_free(&node);
  if (probed == 0) return std::nullopt;
  MPI_Bcast(&median_ns, 1, MPI_DOUBLE, 0, comm);
  return median_ns;
#endif
}

}  // namespace collx::bench
