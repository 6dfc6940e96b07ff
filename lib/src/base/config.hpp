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

// The COLLX_* variables: README.md, "Environment" (the SMPI ones: docs/SCALE.md).
struct Config {
  std::array<std::optional<Algorithm>, kCollectiveCount> algorithm{};  // COLLX_ALGO
  std::size_t segment_bytes = 0;        // COLLX_SEGMENT_BYTES (or COLLX_CHUNK_BYTES); 0 = tuned
  int pipeline_depth = 0;               // COLLX_PIPELINE_DEPTH; 0 = tuned
  double timeout_seconds = 0;           // COLLX_TIMEOUT; 0 = forever
  DebugLevel debug = DebugLevel::none;  // COLLX_DEBUG
  bool check = false;                   // COLLX_CHECK
  std::string tuning_file;              // COLLX_TUNING_FILE
  AutotuneMode autotune = AutotuneMode::exact;  // COLLX_AUTOTUNE (autotune.hpp)
  int autotune_wait = 2;                        // COLLX_AUTOTUNE_WAIT
  bool progress_thread = false;                 // COLLX_PROGRESS_THREAD
  int progress_interval_us = 50;                // COLLX_PROGRESS_INTERVAL_US
  // COLLX_TRANSPORT: "ucx" is accepted in every build; a communicator then fails without UCX.
  TransportChoice transport = TransportChoice::mpi;             // never automatic
  std::optional<bool> cuda_aware;                               // COLLX_CUDA_AWARE; unset: detected
  std::size_t device_host_copy_bytes = std::size_t{256} << 10;  // COLLX_DEVICE_HOST_COPY_BYTES
  bool shared_memory = true;                                    // COLLX_SHM
  std::size_t shm_slot_bytes = 0;  // COLLX_SHM_SLOT_BYTES (or COLLX_SHM_CHUNK_BYTES)
  RingStorePolicy shm_stores = RingStorePolicy::automatic;  // COLLX_SHM_STORES
  std::optional<bool> shm_direct;                           // COLLX_SHM_DIRECT
  std::optional<bool> shm_bounce;                           // COLLX_SHM_BOUNCE; unset: measured
  std::vector<int> node_layout;  // COLLX_NODE_LAYOUT (node sizes); empty: discovered
  // COLLX_SMPI_SHARED_BYTES: under SMPI, scratch of at least this size comes from SMPI's shared
  // malloc (contents meaningless: for timing runs only); 0 = never.
  std::size_t smpi_shared_bytes = 0;
  // COLLX_SMPI_REDUCE_GBPS: under SMPI, a host reduction of b bytes takes b / this rate of
  // simulated time; 0 = never.
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
