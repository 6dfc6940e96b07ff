#include "tuning.hpp"

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "collx/error.hpp"
#include "config.hpp"

namespace collx::detail {

namespace {

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::config, "", -1, "tuning file " + path + ": " + why);
}

}  // namespace

TuningTable load_tuning_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad_file(path, "cannot be read");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad_file(path, std::string("not JSON: ") + e.what());
  }
  TuningTable table;
  try {
    table.machine = doc.value("machine", "");
    // "chunk_bytes": the key's old name, still read from files written before.
    table.segment_bytes = doc.value("segment_bytes", doc.value("chunk_bytes", std::size_t{0}));
    table.pipeline_depth = doc.value("pipeline_depth", 0);
    for (const auto& row : doc.at("rules")) {
      const auto collective = parse_collective(row.at("collective").get<std::string>());
      const auto algorithm = parse_algorithm(row.at("algorithm").get<std::string>());
      if (!collective) bad_file(path, "unknown collective in " + row.dump());
      if (!algorithm || !implements(*collective, *algorithm)) {
        bad_file(path, "unknown algorithm for the collective in " + row.dump());
      }
      SelectionRule rule{*collective, row.at("min_ranks").get<int>(),
                         row.at("max_ranks").get<int>(), kAnySize, *algorithm};
      if (!row.at("max_bytes").is_null()) rule.max_bytes = row.at("max_bytes").get<std::size_t>();
      if (rule.min_ranks < 1 || rule.max_ranks < rule.min_ranks) {
        bad_file(path, "bad rank range in " + row.dump());
      }
      table.rules.push_back(rule);
    }
  } catch (const nlohmann::json::exception& e) {
    bad_file(path, std::string("malformed: ") + e.what());
  }
  if (table.pipeline_depth < 0 || table.pipeline_depth > 64) {
    bad_file(path, "pipeline_depth out of 0..64");
  }
  return table;
}

void save_tuning_file(const std::string& path, const TuningTable& table) {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& r : table.rules) {
    rules.push_back({{"collective", std::string(to_string(r.collective))},
                     {"min_ranks", r.min_ranks},
                     {"max_ranks", r.max_ranks},
                     {"max_bytes", r.max_bytes == kAnySize ? nlohmann::json(nullptr)
                                                           : nlohmann::json(r.max_bytes)},
                     {"algorithm", std::string(to_string(r.algorithm))}});
  }
  const nlohmann::json doc = {{"machine", table.machine},
                              {"segment_bytes", table.segment_bytes},
                              {"pipeline_depth", table.pipeline_depth},
                              {"rules", rules}};
  // Temporary file, then rename: a reader never sees half a table.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary);
    out << doc.dump(2) << "\n";
    if (!out) bad_file(temporary, "cannot be written");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) bad_file(path, "cannot be replaced");
}

void replace_rules(TuningTable& table, Collective collective, int nranks,
                   const std::vector<SelectionRule>& rules) {
  std::erase_if(table.rules, [&](const SelectionRule& r) {
    return r.collective == collective && r.min_ranks == nranks && r.max_ranks == nranks;
  });
  table.rules.insert(table.rules.end(), rules.begin(), rules.end());
}

const TuningTable* active_tuning() {
  // Loaded once per configuration (tests replace the configuration); entries are kept, never
  // freed, since a caller may still hold one. The fast path compares one pointer.
  struct Entry {
    const Config* config;
    std::unique_ptr<TuningTable> table;
  };
  static std::mutex mutex;
  static std::vector<std::unique_ptr<Entry>> entries;
  static std::atomic<const Entry*> current{nullptr};
  const Config& c = config();
  const Entry* entry = current.load(std::memory_order_acquire);
  if (entry != nullptr && entry->config == &c) return entry->table.get();
  std::lock_guard lock(mutex);
  entry = current.load(std::memory_order_acquire);
  if (entry == nullptr || entry->config != &c) {
    auto fresh = std::make_unique<Entry>();
    fresh->config = &c;
    if (!c.tuning_file.empty()) {
      fresh->table = std::make_unique<TuningTable>(load_tuning_file(c.tuning_file));
    }
    entries.push_back(std::move(fresh));
    entry = entries.back().get();
    current.store(entry, std::memory_order_release);
  }
  return entry->table.get();
}

}  // namespace collx::detail
