#include "config.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "collx/error.hpp"

namespace collx::detail {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

// The pieces of `text` between any of `separators`, each trimmed (empty ones too).
std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> pieces;
  while (true) {
    const std::size_t end = text.find_first_of(separators);
    pieces.push_back(trim(text.substr(0, end)));
    if (end == std::string_view::npos) return pieces;
    text.remove_prefix(end + 1);
  }
}

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

[[noreturn]] void bad_value(const char* name, std::string_view value, std::string_view why) {
  throw Error(ErrorCode::config, "", -1,
              std::string(name) + "=\"" + std::string(value) + "\": " + std::string(why));
}

// Variable `name` where set, one of `choices` (each as spelled or in lower case) into `into`;
// anything else is bad_value saying it expected `what`.
template <class T>
void choice(const char* name, T& into,
            std::initializer_list<std::pair<std::string_view, std::type_identity_t<T>>> choices,
            const char* what) {
  const char* v = env(name);
  if (v == nullptr) return;
  const std::string_view given = trim(v);
  const auto lower = [](char g, char s) {
    return g == std::tolower(static_cast<unsigned char>(s));
  };
  for (const auto& [spelling, value] : choices) {
    if (given == spelling ||
        std::equal(given.begin(), given.end(), spelling.begin(), spelling.end(), lower)) {
      into = value;
      return;
    }
  }
  bad_value(name, v, std::string("expected ") + what);
}

// A bool or an optional<bool>.
template <class T>
void flag(const char* name, T& into) {
  choice(name, into, {{"0", false}, {"1", true}}, "0 or 1");
}

// Whether `text` (spaces around it aside) is a number from `low` to `high`, read into `n`.
template <class T>
bool number(std::string_view text, T& n, T low, T high) {
  const std::string_view s = trim(text);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  return ec == std::errc() && end == s.data() + s.size() && n >= low && n <= high;
}

// Variable `name` where set, a number (an int or seconds) from `low` to `high`, into `into`.
template <class T>
void number_in(const char* name, T& into, std::type_identity_t<T> low, std::type_identity_t<T> high,
               const char* what) {
  const char* v = env(name);
  if (v != nullptr && !number(v, into, low, high))
    bad_value(name, v, std::string("expected ") + what);
}

// Variable `name` where set, read by `parse` (which returns the error text) into `into`.
template <class T, class Parse>
void parsed(const char* name, T& into, Parse parse) {
  const char* v = env(name);
  if (v == nullptr) return;
  if (const std::optional<std::string> err = parse(v, into)) bad_value(name, v, *err);
}

// Variable `name` (or, where unset, its old name `alias`) where set, a size (K/M/G suffixes) from
// `low` to `high`, into `into`; the error names the one read.
void size_in(const char* name, const char* alias, std::size_t& into, std::size_t low,
             std::size_t high, const char* what) {
  const char* v = env(name);
  if (v == nullptr && alias != nullptr) v = env(name = alias);
  if (v == nullptr) return;
  const auto bytes = parse_byte_size(v);
  if (!bytes || *bytes < low || *bytes > high) bad_value(name, v, std::string("expected ") + what);
  into = *bytes;
}

// Replaced configurations are kept (not freed): a caller may still hold a reference to one.
const Config& install(const Config& c) {
  static std::vector<std::unique_ptr<Config>> configs;
  configs.push_back(std::make_unique<Config>(c));
  current_config.store(configs.back().get(), std::memory_order_release);
  return *configs.back();
}
std::mutex config_mutex;

}  // namespace

std::string_view to_string(TransportChoice transport) {
  if (transport == TransportChoice::automatic) return "automatic";
  return transport == TransportChoice::ucx ? "ucx" : "mpi";
}

std::optional<std::size_t> parse_byte_size(std::string_view text) {
  text = trim(text);
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  suffix = trim(suffix);
  static constexpr std::pair<std::string_view, int> kShifts[] = {
      {"", 0},   {"B", 0},    {"K", 10},  {"k", 10}, {"KiB", 10}, {"KB", 10},  {"M", 20},
      {"m", 20}, {"MiB", 20}, {"MB", 20}, {"G", 30}, {"g", 30},   {"GiB", 30}, {"GB", 30}};
  for (const auto& [name, shift] : kShifts) {
    if (suffix == name) return value << shift;
  }
  return std::nullopt;
}

std::optional<std::string> parse_node_layout(std::string_view text, std::vector<int>& into) {
  // Up to 2^20 ranks in all: a node count or size beyond it is a typo, not a machine.
  constexpr int kMaxRanks = 1 << 20;
  // "NxK" is two numbers around an x; anything else is a list.
  std::vector<std::string_view> items = split(text, "xX");
  const bool n_by_k = items.size() == 2;
  if (!n_by_k) items = split(text, ",");
  std::vector<int> sizes;
  for (std::string_view item : items) {
    if (!number(item, sizes.emplace_back(), 1, kMaxRanks)) {
      return "expected NxK (N nodes of K ranks) or a comma-separated list of node sizes, each "
             "from 1 to " +
             std::to_string(kMaxRanks) + ", got \"" + std::string(item) + "\"";
    }
  }
  if (n_by_k) sizes.assign(static_cast<std::size_t>(sizes[0]), sizes[1]);
  if (std::accumulate(sizes.begin(), sizes.end(), 0L) > kMaxRanks)
    return "more than " + std::to_string(kMaxRanks) + " ranks";
  into = std::move(sizes);
  return std::nullopt;
}

std::optional<std::string> parse_algorithm_overrides(
    std::string_view text, std::array<std::optional<Algorithm>, kCollectiveCount>& into) {
  for (std::string_view item : split(text, ";,")) {
    if (item.empty()) continue;
    const std::vector<std::string_view> names = split(item, ":");
    if (names.size() != 2)
      return "expected collective:algorithm, got \"" + std::string(item) + "\"";
    const auto coll = parse_collective(names[0]);
    if (!coll) return "unknown collective \"" + std::string(names[0]) + "\"";
    const auto algo = parse_algorithm(names[1]);
    if (!algo) return "unknown algorithm \"" + std::string(names[1]) + "\"";
    into[static_cast<int>(*coll)] =
        *algo == Algorithm::automatic ? std::nullopt : std::optional<Algorithm>(*algo);
  }
  return std::nullopt;
}

Config config_from_environment() {
  Config c;
  parsed("COLLX_ALGO", c.algorithm, parse_algorithm_overrides);
  constexpr std::size_t kAny = std::numeric_limits<std::size_t>::max();
  size_in("COLLX_SEGMENT_BYTES", "COLLX_CHUNK_BYTES", c.segment_bytes, 1, kAny, "a positive size");
  number_in("COLLX_PIPELINE_DEPTH", c.pipeline_depth, 1, 64, "an integer from 1 to 64");
  number_in("COLLX_TIMEOUT", c.timeout_seconds, 0.0, std::numeric_limits<double>::infinity(),
            "seconds >= 0");
  choice("COLLX_DEBUG", c.debug,
         {{"WARN", DebugLevel::warn},
          {"TRIALS", DebugLevel::trials},
          {"INFO", DebugLevel::info},
          {"TRACE", DebugLevel::trace},
          {"NONE", DebugLevel::none},
          {"0", DebugLevel::none}},
         "NONE, WARN, TRIALS, INFO or TRACE");
  flag("COLLX_CHECK", c.check);
  if (const char* v = env("COLLX_TUNING_FILE")) c.tuning_file = v;
  choice("COLLX_AUTOTUNE", c.autotune,
         {{"0", AutotuneMode::off}, {"1", AutotuneMode::exact}, {"all", AutotuneMode::all}},
         "0, 1 or all");
  number_in("COLLX_AUTOTUNE_WAIT", c.autotune_wait, 0, 16, "a whole number from 0 to 16");
  flag("COLLX_PROGRESS_THREAD", c.progress_thread);
  number_in("COLLX_PROGRESS_INTERVAL_US", c.progress_interval_us, 0, 1000000,
            "microseconds from 0 to 1000000");
  choice("COLLX_TRANSPORT", c.transport,
         {{"MPI", TransportChoice::mpi}, {"UCX", TransportChoice::ucx}}, "mpi or ucx");
  flag("COLLX_CUDA_AWARE", c.cuda_aware);
  size_in("COLLX_DEVICE_HOST_COPY_BYTES", nullptr, c.device_host_copy_bytes, 0, kAny,
          "a size (0: never)");
  flag("COLLX_SHM", c.shared_memory);
  size_in("COLLX_SHM_SLOT_BYTES", "COLLX_SHM_CHUNK_BYTES", c.shm_slot_bytes, 4096,
          std::size_t{64} << 20, "a size from 4K to 64M");
  flag("COLLX_SHM_DIRECT", c.shm_direct);
  flag("COLLX_SHM_BOUNCE", c.shm_bounce);
  choice("COLLX_SHM_STORES", c.shm_stores,
         {{"auto", RingStorePolicy::automatic},
          {"plain", RingStorePolicy::plain},
          {"streaming", RingStorePolicy::streaming}},
         "auto, plain or streaming");
  size_in("COLLX_SMPI_SHARED_BYTES", nullptr, c.smpi_shared_bytes, 0, kAny, "a size (0: never)");
  number_in("COLLX_SMPI_REDUCE_GBPS", c.smpi_reduce_gbps, 0, 1000000, "GB/s, 0 to 1000000");
  parsed("COLLX_NODE_LAYOUT", c.node_layout, parse_node_layout);
  return c;
}

std::atomic<const Config*> current_config{nullptr};

const Config& load_config() {
  std::lock_guard lock(config_mutex);
  if (const Config* loaded = current_config.load(std::memory_order_acquire)) return *loaded;
  return install(config_from_environment());
}

void set_config(const Config& replacement) {
  std::lock_guard lock(config_mutex);
  install(replacement);
}

}  // namespace collx::detail
