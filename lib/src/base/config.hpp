// Runtime configuration from the environment (COLLX_*), read once.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collx/algorithm.hpp"
#include "collx/options.hpp"

namespace collx::detail {

// trials: auto's trial results alone, with no per-call line (info's lines, and the path they put
// every call on, change what the trials time: a delegated call then runs through collx).
enum class DebugLevel { none, warn, trials, info, trace };

// "mpi", "ucx" (how a communicator moves its bytes, see transport.hpp) or "automatic".
std::string_view to_string(TransportChoice transport);

// Which calls auto's trials cover (COLLX_AUTOTUNE).
enum class AutotuneMode { off, exact, all };

// How producers write into their shared-memory rings (ring_stores.hpp).
enum class RingStorePolicy { automatic, plain, streaming };

struct Config {
  // COLLX_ALGO="allreduce:ring;broadcast:binomial_tree": forced algorithm per collective.
  std::array<std::optional<Algorithm>, kCollectiveCount> algorithm{};
  // COLLX_SEGMENT_BYTES (old name COLLX_CHUNK_BYTES; K/M/G suffixes): segment size of pipelined
  // algorithms; 0 = tuned.
  std::size_t segment_bytes = 0;
  // COLLX_PIPELINE_DEPTH: segments in flight; 0 = tuned.
  int pipeline_depth = 0;
  // COLLX_TIMEOUT: seconds a wait may last before it becomes an error; 0 = forever.
  double timeout_seconds = 0;
  // COLLX_DEBUG=WARN|TRIALS|INFO|TRACE: TRIALS prints auto's trial results on stderr, INFO
  // those and each call's chosen algorithm.
  DebugLevel debug = DebugLevel::none;
  // COLLX_CHECK=1: every collective first verifies that all ranks made the same call.
  bool check = false;
  // COLLX_TUNING_FILE: a tuning table written by collx-bench --save-tuning.
  std::string tuning_file;
  // COLLX_AUTOTUNE=0|1|all (default 1): whether auto tries the candidates the table ranks
  // closest in the first blocking calls of each size class and keeps the fastest
  // (autotune.hpp). 1: where the algorithm cannot change a bit of the result (data movement,
  // integer reductions, min and max, any reduction at two ranks); all: floating-point sums,
  // products and averages too (their last bits then depend on which algorithm won on this
  // run, still the same on every rank); 0: the table alone.
  AutotuneMode autotune = AutotuneMode::exact;
  // COLLX_AUTOTUNE_WAIT (default 2, 0 to 16): a tried size class's first calls run the table's
  // choice, untimed, until they number this many times the calls its trials take; then the
  // trials start (autotune.hpp, ClassTuner::start). 0: the trials start at the class's first
  // call.
  int autotune_wait = 2;
  // COLLX_PROGRESS_THREAD=1: a background thread progresses nonblocking operations (needs
  // MPI_THREAD_MULTIPLE); COLLX_PROGRESS_INTERVAL_US: its polling interval.
  bool progress_thread = false;
  int progress_interval_us = 50;
  // COLLX_TRANSPORT=mpi|ucx: the transport of communicators created from now on. "ucx" is
  // accepted in every build; creating a communicator then fails in a build without UCX.
  TransportChoice transport = TransportChoice::mpi;  // never automatic
  // COLLX_CUDA_AWARE=0|1: whether the transports may be given device memory directly (1) or
  // device buffers are staged through pinned host memory (0); unset: what the MPI library
  // reports (MPIX_Query_cuda_support) and, for UCX, whether UCX was built with CUDA.
  std::optional<bool> cuda_aware;
  // COLLX_DEVICE_HOST_COPY_BYTES (K/M/G suffixes; 0 = never): blocking calls on device memory of at
  // most this many bytes (at most kDirectHostCopyBytes where the transport takes device memory)
  // run on a host copy of their buffers: a small call then pays two copies' round trips
  // instead of one per step (docs/DEVICE_MEMORY.md).
  std::size_t device_host_copy_bytes = std::size_t{256} << 10;
  // COLLX_SHM=0|1: whether communicators whose ranks share one node map a shared-memory arena
  // for the shared_memory algorithms (default 1); COLLX_SHM_SLOT_BYTES (old name
  // COLLX_SHM_CHUNK_BYTES): its slot size; COLLX_SHM_STORES=auto|plain|streaming: how producers
  // write into their rings (default auto: chosen from measured copy times, ring_stores.hpp).
  bool shared_memory = true;
  std::size_t shm_slot_bytes = 0;
  RingStorePolicy shm_stores = RingStorePolicy::automatic;
  // COLLX_SHM_DIRECT=0|1: whether the shared-memory allgather, allreduce and reduce_scatter
  // hand a rank's data over as a pointer, its readers copying it straight from its buffer
  // (process_vm_readv) instead of through its ring: 1 always (where the ranks may read each
  // other's memory), 0 never; unset: while plain stores into the rings are slow
  // (ring_stores.hpp), for allgather blocks of a size where that wins.
  std::optional<bool> shm_direct;
  // COLLX_NODE_LAYOUT="2x2" (2 nodes of 2 ranks) or "3,1" (a node of 3 ranks, then one of 1):
  // the node each rank of MPI_COMM_WORLD is on, in blocks of consecutive ranks, instead of
  // what MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) says. For testing the node-aware algorithms
  // on one machine; the sizes must add up to MPI_COMM_WORLD's size. Empty: discovered.
  std::vector<int> node_layout;
  // COLLX_SMPI_SHARED_BYTES (K/M/G suffixes; 0 = never, the default): in a build for SimGrid's
  // SMPI, scratch buffers of at least this many bytes come from SMPI's shared malloc, one block
  // every simulated rank maps, so 1,024 simulated ranks fit large sizes in one machine's memory.
  // Their contents are then meaningless: for timing runs only (docs/SCALE.md).
  std::size_t smpi_shared_bytes = 0;
  // COLLX_SMPI_REDUCE_GBPS (GB/s, a whole number; 0 = never, the default): in a build for
  // SimGrid's SMPI, every host reduction of b input bytes takes b / this rate of simulated time,
  // whatever smpi/simulate-computation says: the reductions view of docs/SCALE.md,
  // "Computation", beside collx-bench's --smpi-reduce-gbps for the MPI's side.
  int smpi_reduce_gbps = 0;
};

// Parses the COLLX_* variables; throws collx::Error(ErrorCode::config) on a malformed value.
Config config_from_environment();

// The configuration in force: read on every call, so a single atomic load once loaded.
extern std::atomic<const Config*> current_config;
const Config& load_config();
[[gnu::always_inline]] inline const Config& config() {
  const Config* c = current_config.load(std::memory_order_acquire);
  return c != nullptr ? *c : load_config();
}
// Tests replace the configuration (not thread-safe against calls in flight).
void set_config(const Config& replacement);

// "256K", "4M", "1G", "4096" -> bytes.
std::optional<std::size_t> parse_byte_size(std::string_view text);
// COLLX_NODE_LAYOUT's "NxK" (N nodes of K ranks) or "a,b,c" (node sizes) into node sizes, each
// at least 1; the error text on failure.
std::optional<std::string> parse_node_layout(std::string_view text, std::vector<int>& into);
// "allreduce:ring;bcast:binomial_tree" into `into`; the error text on failure.
std::optional<std::string> parse_algorithm_overrides(
    std::string_view text, std::array<std::optional<Algorithm>, kCollectiveCount>& into);

}  // namespace collx::detail
