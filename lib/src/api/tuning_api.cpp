// collx/tuning.hpp over the policy layer's tuning files (policy/tuning.cpp reads and writes
// them, and checks what an application writes by reading it back).
#include "collx/tuning.hpp"

#include <string>

#include "collx/error.hpp"
#include "tuning.hpp"

namespace collx {

TuningFile load_tuning_file(const std::string& path) {
  return detail::load_tuning_file(path);  // a file holds no node rules
}

void save_tuning_file(const std::string& path, const TuningFile& file) {
  detail::save_tuning_file(path, file);
}

void replace_tuning_rules(TuningFile& file, Collective collective, int nranks,
                          std::span<const TuningRule> rules) {
  const auto invalid = [&](const std::string& why) {
    throw Error(ErrorCode::invalid_argument, "", -1,
                "tuning file: replace_tuning_rules for " + std::string(to_string(collective)) +
                    " on " + std::to_string(nranks) + " ranks: " + why);
  };
  if (nranks < 1) invalid("nranks below 1");
  for (const TuningRule& r : rules) {
    if (r.collective != collective || r.min_ranks != nranks || r.max_ranks != nranks) {
      invalid("a rule of " + std::string(to_string(r.collective)) + " on " +
              std::to_string(r.min_ranks) + ".." + std::to_string(r.max_ranks) + " ranks");
    }
  }
  std::erase_if(file.rules, [&](const TuningRule& r) {
    return r.collective == collective && r.min_ranks == nranks && r.max_ranks == nranks;
  });
  file.rules.insert(file.rules.end(), rules.begin(), rules.end());
}

}  // namespace collx
