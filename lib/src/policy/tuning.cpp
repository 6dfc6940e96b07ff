#include "tuning.hpp"

#include <mpi.h>  // MPICH_VERSION, OPEN_MPI: rows for one MPI library

#include <atomic>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "collx/error.hpp"
#include "config.hpp"

namespace collx::detail {

namespace {

[[noreturn]] void bad_table(const std::string& source, const std::string& why) {
  throw Error(ErrorCode::config, "", -1, source + ": " + why);
}

// The MPI library this build calls: a row with an "mpi" key counts only under that one (a
// protocol step, such as an eager limit, that moves an edge under one library only).
bool row_is_for_this_mpi(const nlohmann::json& row, const std::string& source) {
  if (!row.contains("mpi")) return true;
  const std::string mpi = row.at("mpi").get<std::string>();
  if (mpi != "mpich" && mpi != "openmpi") {
    bad_table(source, "\"mpi\" is neither \"mpich\" nor \"openmpi\" in " + row.dump());
  }
#if defined(MPICH_VERSION)
  return mpi == "mpich";
#elif defined(OPEN_MPI)
  return mpi == "openmpi";
#else
  return false;
#endif
}

// null: any size (kAnyBytes).
std::size_t bytes_or_any(const nlohmann::json& value) {
  return value.is_null() ? kAnyBytes : value.get<std::size_t>();
}

Algorithm rule_algorithm(const nlohmann::json& row, Collective collective,
                         const std::string& source) {
  const auto algorithm = parse_algorithm(row.at("algorithm").get<std::string>());
  if (!algorithm || !implements(collective, *algorithm)) {
    bad_table(source, "unknown algorithm for the collective in " + row.dump());
  }
  return *algorithm;
}

Collective rule_collective(const nlohmann::json& row, const std::string& source) {
  const auto collective = parse_collective(row.at("collective").get<std::string>());
  if (!collective) bad_table(source, "unknown collective in " + row.dump());
  return *collective;
}

TuningRule parse_rule(const nlohmann::json& row, const std::string& source) {
  const Collective collective = rule_collective(row, source);
  TuningRule rule{collective, row.at("min_ranks").get<int>(), kAnyRanks,
                  bytes_or_any(row.at("max_bytes")), rule_algorithm(row, collective, source)};
  // null: any rank count (kAnyRanks); files written by save_tuning_file hold numbers.
  if (!row.at("max_ranks").is_null()) rule.max_ranks = row.at("max_ranks").get<int>();
  if (rule.min_ranks < 1 || rule.max_ranks < rule.min_ranks) {
    bad_table(source, "bad rank range in " + row.dump());
  }
  return rule;
}

NodeRule parse_node_rule(const nlohmann::json& row, const std::string& source) {
  const Collective collective = rule_collective(row, source);
  NodeRule rule{collective,
                row.at("min_bytes").get<std::size_t>(),
                bytes_or_any(row.at("max_bytes")),
                row.at("uniform_only").get<bool>(),
                rule_algorithm(row, collective, source),
                row.value("one_per_node", false),
                row.value("max_nodes", 0),
                row.value("min_nodes", 0),
                row.value("min_per_node", 0)};
  if (rule.max_bytes < rule.min_bytes || rule.max_nodes < 0 || rule.min_nodes < 0 ||
      rule.min_per_node < 0 || (rule.max_nodes > 0 && rule.max_nodes < rule.min_nodes)) {
    bad_table(source, "bad byte or node range in " + row.dump());
  }
  return rule;
}

}  // namespace

TuningTable parse_tuning_table(std::string_view text, const std::string& source) {
  TuningTable table;
  try {
    const nlohmann::json doc = nlohmann::json::parse(text);
    table.machine = doc.value("machine", "");
    // "chunk_bytes": the key's old name, still read from files written before.
    table.segment_bytes = doc.value("segment_bytes", doc.value("chunk_bytes", std::size_t{0}));
    table.pipeline_depth = doc.value("pipeline_depth", 0);
    // A row's "provenance" (where it was measured, by which command, when) is for its readers.
    for (const auto& row : doc.at("rules")) {
      if (row_is_for_this_mpi(row, source)) table.rules.push_back(parse_rule(row, source));
    }
    for (const auto& row : doc.value("node_rules", nlohmann::json::array())) {
      if (row_is_for_this_mpi(row, source))
        table.node_rules.push_back(parse_node_rule(row, source));
    }
  } catch (const nlohmann::json::parse_error& e) {
    bad_table(source, std::string("not JSON: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    bad_table(source, std::string("malformed: ") + e.what());
  }
  if (table.pipeline_depth < 0 || table.pipeline_depth > 64) {
    bad_table(source, "pipeline_depth out of 0..64");
  }
  return table;
}

TuningTable load_tuning_file(const std::string& path) {
  const std::string source = "tuning file " + path;
  std::ifstream in(path);
  if (!in) bad_table(source, "cannot be read");
  TuningTable table =
      parse_tuning_table(std::string(std::istreambuf_iterator<char>(in), {}), source);
  // The node rules are the built-in table's only: the autotuner's trials consult the built-in
  // table's layout-free rows (table_decides), so a file's node rule would be tried over.
  if (!table.node_rules.empty()) {
    bad_table(source, "node_rules are read from the built-in table only; use rules");
  }
  return table;
}

void save_tuning_file(const std::string& path, const TuningFile& table) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : table.rules) {
    rules.push_back({{"collective", std::string(to_string(r.collective))},
                     {"min_ranks", r.min_ranks},
                     {"max_ranks", r.max_ranks},
                     {"max_bytes", r.max_bytes == kAnyBytes ? nlohmann::json(nullptr)
                                                            : nlohmann::json(r.max_bytes)},
                     {"algorithm", std::string(to_string(r.algorithm))}});
  }
  const nlohmann::json doc = {{"machine", table.machine},
                              {"segment_bytes", table.segment_bytes},
                              {"pipeline_depth", table.pipeline_depth},
                              {"rules", rules}};
  const std::string text = doc.dump(2) + "\n";
  // Read back first: what the reader would reject is not written, and the writer's checks are the
  // reader's.
  try {
    (void)parse_tuning_table(text, "tuning file " + path);
  } catch (const Error& e) {
    throw Error(ErrorCode::invalid_argument, "", -1, e.detail());
  }
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << text;
    if (!out) bad_table("tuning file " + temporary, "cannot be written");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    bad_table("tuning file " + path, "cannot be replaced");
}

const TuningTable* active_tuning() {
  // Loaded once per configuration (tests replace the configuration); kept, never freed, since a
  // caller may still hold one. The fast path compares one pointer.
  struct Loaded {
    const Config* config;
    std::unique_ptr<TuningTable> table;
  };
  static std::mutex mutex;
  static std::vector<std::unique_ptr<Loaded>> kept;
  static std::atomic<const Loaded*> current{nullptr};
  const Config& c = config();
  const Loaded* loaded = current.load(std::memory_order_acquire);
  if (loaded == nullptr || loaded->config != &c) [[unlikely]] {
    auto table = c.tuning_file.empty()
                     ? nullptr
                     : std::make_unique<TuningTable>(load_tuning_file(c.tuning_file));
    std::lock_guard lock(mutex);
    loaded = kept.emplace_back(std::make_unique<Loaded>(&c, std::move(table))).get();
    current.store(loaded, std::memory_order_release);
  }
  return loaded->table.get();
}

}  // namespace collx::detail
