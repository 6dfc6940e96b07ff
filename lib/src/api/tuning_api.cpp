// collx/tuning.hpp over the policy layer's tuning files (policy/tuning.cpp reads and writes
// them; this file checks what an application writes).
#include "collx/tuning.hpp"

#include <string>

#include "collx/error.hpp"
#include "selector.hpp"
#include "tuning.hpp"

namespace collx {

namespace {

constexpr int kMaxPipelineDepth = 64;  // what load_tuning_file accepts

[[noreturn]] void invalid(const std::string& why) {
  throw Error(ErrorCode::invalid_argument, "", -1, "tuning file: " + why);
}

std::string describe(const TuningRule& r) {
  return std::string(to_string(r.collective)) + " on " + std::to_string(r.min_ranks) + ".." +
         std::to_string(r.max_ranks) + " ranks -> " + std::string(to_string(r.algorithm));
}

// What load_tuning_file would reject, so a file written here always reads back.
void check_readable(const TuningRule& r) {
  if (!implements(r.collective, r.algorithm)) {
    invalid("rule " + describe(r) + ": not an algorithm of the collective");
  }
  if (r.min_ranks < 1 || r.max_ranks < r.min_ranks) {
    invalid("rule " + describe(r) + ": empty rank range");
  }
}

}  // namespace

TuningFile load_tuning_file(const std::string& path) {
  return detail::load_tuning_file(path);  // a file holds no node rules
}

void save_tuning_file(const std::string& path, const TuningFile& file) {
  if (file.pipeline_depth < 0 || file.pipeline_depth > kMaxPipelineDepth) {
    invalid("pipeline_depth " + std::to_string(file.pipeline_depth) + " outside 0.." +
            std::to_string(kMaxPipelineDepth));
  }
  for (const TuningRule& r : file.rules)
    check_readable(r);
  detail::save_tuning_file(path, file);
}

void replace_tuning_rules(TuningFile& file, Collective collective, int nranks,
                          std::span<const TuningRule> rules) {
  if (nranks < 1) invalid("replace_tuning_rules: nranks " + std::to_string(nranks));
  for (const TuningRule& r : rules) {
    if (r.collective != collective || r.min_ranks != nranks || r.max_ranks != nranks) {
      invalid("replace_tuning_rules for " + std::string(to_string(collective)) + " on " +
              std::to_string(nranks) + " ranks: rule " + describe(r));
    }
  }
  std::erase_if(file.rules, [&](const TuningRule& r) {
    return r.collective == collective && r.min_ranks == nranks && r.max_ranks == nranks;
  });
  file.rules.insert(file.rules.end(), rules.begin(), rules.end());
}

}  // namespace collx
