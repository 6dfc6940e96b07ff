// Tuning files: auto's decision table as measured on one machine (`collx-bench --save-tuning`
// writes them), with the pipeline settings measured alongside. The library reads the file that
// COLLX_TUNING_FILE names; its rules come before the built-in table, and where they say nothing
// the built-in table decides (collx::selection_table() prints both).
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx {

// A rule's max_bytes that matches calls of every size.
inline constexpr std::size_t kAnyBytes = std::numeric_limits<std::size_t>::max();

// One row of the table: for `collective` on min_ranks..max_ranks ranks and calls of at most
// max_bytes bytes (the whole buffer, as collx-bench's size column counts), run `algorithm`.
// The first rule that matches a call wins.
struct TuningRule {
  Collective collective = Collective::allreduce;
  int min_ranks = 1;
  int max_ranks = 1;
  std::size_t max_bytes = kAnyBytes;
  Algorithm algorithm = Algorithm::automatic;
};

// What a tuning file holds.
struct TuningFile {
  std::vector<TuningRule> rules;
  std::size_t segment_bytes = 0;  // segment size of the pipelined algorithms; 0: not tuned
  int pipeline_depth = 0;         // segments in flight; 0: not tuned
  std::string machine;            // free text: where it was measured
};

// The file at `path`, as the library reads it for COLLX_TUNING_FILE. Throws
// collx::Error(ErrorCode::config) naming the file and the problem: it cannot be read, is not
// JSON, lacks a field, names a collective or an algorithm the library does not know (or one
// its collective does not implement), has a rule with an empty rank range, or a pipeline_depth
// outside 0..64.
TuningFile load_tuning_file(const std::string& path);

// Writes `file` to `path` whole (a temporary file, then a rename: a reader never sees half of
// it). Throws collx::Error(ErrorCode::invalid_argument) for what load_tuning_file would reject
// (an algorithm its collective does not implement, Algorithm::automatic included; a rank range
// that is empty or starts below 1; a pipeline_depth outside 0..64), writing nothing, and
// collx::Error(ErrorCode::config) where the file cannot be written.
void save_tuning_file(const std::string& path, const TuningFile& file);

// Makes `rules` the rules of `collective` for exactly `nranks` ranks: removes the file's rules
// of that collective whose range is nranks..nranks and appends `rules` in their order (rules
// for other rank ranges stay, and match first where they come first). Throws
// collx::Error(ErrorCode::invalid_argument), changing nothing, when nranks < 1 or a rule is for
// another collective or another rank range.
void replace_tuning_rules(TuningFile& file, Collective collective, int nranks,
                          std::span<const TuningRule> rules);

}  // namespace collx
