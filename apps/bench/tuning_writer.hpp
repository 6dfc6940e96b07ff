// --save-tuning's writer: the fastest collx algorithm per measured size, as a tuning file's rules.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "collx/collx.hpp"

namespace collx::bench {

// Turns the fastest algorithm per measured size into table rows for this rank count (a row per
// run of sizes with the same winner, its bound the run's last size; the last row open-ended)
// and merges them into the tuning file.
void write_tuning(const std::string& path, Collective collective, int nranks,
                  const std::vector<std::pair<std::size_t, Algorithm>>& fastest,
                  std::size_t segment_bytes, int depth, const std::string& mpi_library);

}  // namespace collx::bench
