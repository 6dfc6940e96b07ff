#include "tuning_writer.hpp"

#include <fstream>

namespace collx::bench {

void write_tuning(const std::string& path, Collective collective, int nranks,
                  const std::vector<std::pair<std::size_t, Algorithm>>& fastest,
                  std::size_t segment_bytes, int depth, const std::string& mpi_library) {
  collx::TuningFile file;
  if (std::ifstream(path).good()) file = collx::load_tuning_file(path);
  std::vector<collx::TuningRule> rules;
  for (std::size_t i = 0; i < fastest.size(); ++i) {
    const bool last = i + 1 == fastest.size();
    if (!last && fastest[i + 1].second == fastest[i].second) continue;
    rules.push_back({collective, nranks, nranks, last ? collx::kAnyBytes : fastest[i].first,
                     fastest[i].second});
  }
  collx::replace_tuning_rules(file, collective, nranks, rules);
  if (segment_bytes) file.segment_bytes = segment_bytes;
  if (depth) file.pipeline_depth = depth;
  if (file.machine.empty()) file.machine = "measured by collx-bench --save-tuning; " + mpi_library;
  collx::save_tuning_file(path, file);
}

}  // namespace collx::bench
