#include "config.hpp"

#include <atomic>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
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

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return (value != nullptr && *value != '\0') ? value : nullptr;
}

// A variable under its name or, where that is unset, under its old name (an alias the README
// lists); `used` is the one read, for the error message.
const char* env_or_alias(const char* name, const char* alias, const char*& used) {
  used = name;
  if (const char* v = env(name)) return v;
  used = alias;
  return env(alias);
}

[[noreturn]] void bad_value(const char* name, std::string_view value, std::string_view why) {
  throw Error(ErrorCode::config, "", -1,
              std::string(name) + "=\"" + std::string(value) + "\": " + std::string(why));
}

// The whole number `value` of variable `name`, from `low` to `high`, else bad_value saying it
// expected `what`.
int int_in(const char* name, std::string_view value, int low, int high, std::string_view what) {
  int n = 0;
  const std::string_view s = trim(value);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || end != s.data() + s.size() || n < low || n > high) {
    bad_value(name, value, "expected " + std::string(what));
  }
  return n;
}

// Read on every call, so lock-free once loaded. Replaced configurations are kept (not freed):
// a caller may still hold a reference to the old one.
std::atomic<const Config*>& current() {
  return current_config;
}
std::vector<std::unique_ptr<Config>>& all_configs() {
  static std::vector<std::unique_ptr<Config>> configs;
  return configs;
}
std::mutex& config_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::string_view to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::mpi:
      return "mpi";
    case TransportKind::ucx:
      return "ucx";
  }
  return "?";
}

std::optional<std::size_t> parse_byte_size(std::string_view text) {
  text = trim(text);
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  suffix = trim(suffix);
  std::size_t scale = 1;
  if (suffix.empty() || suffix == "B") {
    scale = 1;
  } else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") {
    scale = std::size_t{1} << 10;
  } else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") {
    scale = std::size_t{1} << 20;
  } else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") {
    scale = std::size_t{1} << 30;
  } else {
    return std::nullopt;
  }
  return value * scale;
}

std::optional<std::string> parse_node_layout(std::string_view text, std::vector<int>& into) {
  // Up to 2^20 ranks in all: a node count or size beyond it is a typo, not a machine.
  constexpr long kMaxRanks = 1 << 20;
  auto number = [](std::string_view s, int& out) {
    s = trim(s);
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size() && !s.empty() && out >= 1 &&
           out <= kMaxRanks;
  };
  std::vector<int> sizes;
  const std::string_view s = trim(text);
  if (s.empty()) return "expected NxK (N nodes of K ranks) or a list of node sizes like 3,1";
  const std::size_t x = s.find_first_of("xX");
  if (x != std::string_view::npos) {
    int nodes = 0;
    int per_node = 0;
    if (!number(s.substr(0, x), nodes) || !number(s.substr(x + 1), per_node)) {
      return "expected NxK with N nodes and K ranks per node, both from 1 to " +
             std::to_string(kMaxRanks);
    }
    if (static_cast<long>(nodes) * per_node > kMaxRanks) {
      return "more than " + std::to_string(kMaxRanks) + " ranks";
    }
    sizes.assign(static_cast<std::size_t>(nodes), per_node);
  } else {
    long total = 0;
    std::string_view rest = s;
    while (true) {
      const std::size_t comma = rest.find(',');
      int size = 0;
      if (!number(rest.substr(0, comma), size)) {
        return "expected a comma-separated list of node sizes (ranks per node, each from 1 to " +
               std::to_string(kMaxRanks) + "), got \"" + std::string(trim(rest.substr(0, comma))) +
               "\"";
      }
      total += size;
      if (total > kMaxRanks) return "more than " + std::to_string(kMaxRanks) + " ranks";
      sizes.push_back(size);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  into = std::move(sizes);
  return std::nullopt;
}

std::optional<std::string> parse_algorithm_overrides(
    std::string_view text, std::array<std::optional<Algorithm>, kCollectiveCount>& into) {
  while (!text.empty()) {
    const std::size_t end = text.find_first_of(";,");
    std::string_view item = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      return "expected collective:algorithm, got \"" + std::string(item) + "\"";
    }
    const std::string_view coll_name = trim(item.substr(0, colon));
    const std::string_view algo_name = trim(item.substr(colon + 1));
    const auto coll = parse_collective(coll_name);
    if (!coll) return "unknown collective \"" + std::string(coll_name) + "\"";
    const auto algo = parse_algorithm(algo_name);
    if (!algo) return "unknown algorithm \"" + std::string(algo_name) + "\"";
    into[static_cast<int>(*coll)] =
        *algo == Algorithm::automatic ? std::nullopt : std::optional<Algorithm>(*algo);
  }
  return std::nullopt;
}

Config config_from_environment() {
  Config c;
  if (const char* v = env("COLLX_ALGO")) {
    if (auto err = parse_algorithm_overrides(v, c.algorithm)) bad_value("COLLX_ALGO", v, *err);
  }
  const char* used = nullptr;
  if (const char* v = env_or_alias("COLLX_SEGMENT_BYTES", "COLLX_CHUNK_BYTES", used)) {
    const auto bytes = parse_byte_size(v);
    if (!bytes || *bytes == 0) bad_value(used, v, "expected a positive size");
    c.segment_bytes = *bytes;
  }
  if (const char* v = env("COLLX_PIPELINE_DEPTH")) {
    c.pipeline_depth = int_in("COLLX_PIPELINE_DEPTH", v, 1, 64, "an integer from 1 to 64");
  }
  if (const char* v = env("COLLX_TIMEOUT")) {
    char* end = nullptr;
    const double seconds = std::strtod(v, &end);
    if (end == v || *trim(end).data() != '\0' || seconds < 0) {
      bad_value("COLLX_TIMEOUT", v, "expected seconds >= 0");
    }
    c.timeout_seconds = seconds;
  }
  if (const char* v = env("COLLX_DEBUG")) {
    const std::string_view s = trim(v);
    if (s == "WARN" || s == "warn") {
      c.debug = DebugLevel::warn;
    } else if (s == "INFO" || s == "info") {
      c.debug = DebugLevel::info;
    } else if (s == "TRACE" || s == "trace") {
      c.debug = DebugLevel::trace;
    } else if (s == "NONE" || s == "none" || s == "0") {
      c.debug = DebugLevel::none;
    } else {
      bad_value("COLLX_DEBUG", v, "expected NONE, WARN, INFO or TRACE");
    }
  }
  if (const char* v = env("COLLX_CHECK")) {
    const std::string_view s = trim(v);
    if (s != "0" && s != "1") bad_value("COLLX_CHECK", v, "expected 0 or 1");
    c.check = s == "1";
  }
  if (const char* v = env("COLLX_TUNING_FILE")) c.tuning_file = v;
  if (const char* v = env("COLLX_AUTOTUNE")) {
    const std::string_view s = trim(v);
    if (s == "0") {
      c.autotune = AutotuneMode::off;
    } else if (s == "1") {
      c.autotune = AutotuneMode::exact;
    } else if (s == "all") {
      c.autotune = AutotuneMode::all;
    } else {
      bad_value("COLLX_AUTOTUNE", v, "expected 0, 1 or all");
    }
  }
  if (const char* v = env("COLLX_AUTOTUNE_WAIT")) {
    c.autotune_wait = int_in("COLLX_AUTOTUNE_WAIT", v, 0, 16, "a whole number from 0 to 16");
  }
  if (const char* v = env("COLLX_PROGRESS_THREAD")) {
    const std::string_view s = trim(v);
    if (s != "0" && s != "1") bad_value("COLLX_PROGRESS_THREAD", v, "expected 0 or 1");
    c.progress_thread = s == "1";
  }
  if (const char* v = env("COLLX_PROGRESS_INTERVAL_US")) {
    c.progress_interval_us = int_in("COLLX_PROGRESS_INTERVAL_US", v, 0, 1000000,
                                    "microseconds from 0 to 1000000");
  }
  if (const char* v = env("COLLX_TRANSPORT")) {
    const std::string_view s = trim(v);
    if (s == "mpi" || s == "MPI") {
      c.transport = TransportKind::mpi;
    } else if (s == "ucx" || s == "UCX") {
      c.transport = TransportKind::ucx;
    } else {
      bad_value("COLLX_TRANSPORT", v, "expected mpi or ucx");
    }
  }
  if (const char* v = env("COLLX_CUDA_AWARE")) {
    const std::string_view s = trim(v);
    if (s != "0" && s != "1") bad_value("COLLX_CUDA_AWARE", v, "expected 0 or 1");
    c.cuda_aware = s == "1";
  }
  if (const char* v = env("COLLX_DEVICE_HOST_COPY_BYTES")) {
    const auto bytes = parse_byte_size(v);
    if (!bytes) bad_value("COLLX_DEVICE_HOST_COPY_BYTES", v, "expected a size (0: never)");
    c.device_host_copy_bytes = *bytes;
  }
  if (const char* v = env("COLLX_SHM")) {
    const std::string_view s = trim(v);
    if (s != "0" && s != "1") bad_value("COLLX_SHM", v, "expected 0 or 1");
    c.shared_memory = s == "1";
  }
  if (const char* v = env_or_alias("COLLX_SHM_SLOT_BYTES", "COLLX_SHM_CHUNK_BYTES", used)) {
    const auto bytes = parse_byte_size(trim(v));
    if (!bytes || *bytes < 4096 || *bytes > (std::size_t{64} << 20)) {
      bad_value(used, v, "expected a size from 4K to 64M");
    }
    c.shm_slot_bytes = *bytes;
  }
  if (const char* v = env("COLLX_SHM_DIRECT")) {
    const std::string_view s = trim(v);
    if (s != "0" && s != "1") bad_value("COLLX_SHM_DIRECT", v, "expected 0 or 1");
    c.shm_direct = s == "1";
  }
  if (const char* v = env("COLLX_SHM_STORES")) {
    const std::string_view s = trim(v);
    if (s == "auto") {
      c.shm_stores = RingStorePolicy::automatic;
    } else if (s == "plain") {
      c.shm_stores = RingStorePolicy::plain;
    } else if (s == "streaming") {
      c.shm_stores = RingStorePolicy::streaming;
    } else {
      bad_value("COLLX_SHM_STORES", v, "expected auto, plain or streaming");
    }
  }
  if (const char* v = env("COLLX_SMPI_SHARED_BYTES")) {
    const auto bytes = parse_byte_size(trim(v));
    if (!bytes) bad_value("COLLX_SMPI_SHARED_BYTES", v, "expected a size (0: never)");
    c.smpi_shared_bytes = *bytes;
  }
  if (const char* v = env("COLLX_NODE_LAYOUT")) {
    if (auto err = parse_node_layout(v, c.node_layout)) bad_value("COLLX_NODE_LAYOUT", v, *err);
  }
  return c;
}

std::atomic<const Config*> current_config{nullptr};

const Config& load_config() {
  std::lock_guard lock(config_mutex());
  if (const Config* loaded = current().load(std::memory_order_acquire)) return *loaded;
  all_configs().push_back(std::make_unique<Config>(config_from_environment()));
  current().store(all_configs().back().get(), std::memory_order_release);
  return *all_configs().back();
}

void set_config(const Config& replacement) {
  std::lock_guard lock(config_mutex());
  all_configs().push_back(std::make_unique<Config>(replacement));
  current().store(all_configs().back().get(), std::memory_order_release);
}

}  // namespace collx::detail
