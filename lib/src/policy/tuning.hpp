// Tuning files: a decision table (and pipeline settings) measured on a machine by
// `collx-bench --save-tuning FILE`, read back through COLLX_TUNING_FILE. Its rows come before the
// built-in table; where they say nothing, the built-in table decides. The built-in table is a
// file of the same format (lib/data/builtin-rules.json, compiled in), read by the same parser.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "selector.hpp"

namespace collx::detail {

// A tuning file (collx/tuning.hpp) and the node rules only the built-in table has.
struct TuningTable : TuningFile {
  std::vector<NodeRule> node_rules;  // load_tuning_file rejects them
};

// A table in the tuning-file format (JSON: "rules", optional "node_rules", "segment_bytes",
// "pipeline_depth", "machine"); a row with "mpi": "mpich" or "openmpi" counts only under that
// library, and max_bytes / max_ranks null mean any. Throws collx::Error(ErrorCode::config)
// naming `source` and the problem.
TuningTable parse_tuning_table(std::string_view text, const std::string& source);
// What collx/tuning.hpp's two run (its comments say what they check and throw).
TuningTable load_tuning_file(const std::string& path);
void save_tuning_file(const std::string& path, const TuningFile& file);

// The table named by COLLX_TUNING_FILE, loaded once (nullptr without one).
const TuningTable* active_tuning();

}  // namespace collx::detail
