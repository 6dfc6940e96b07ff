// Measuring one size: its rows timed and checked, their figures (bandwidths, vs_mpi, x_memcpy,
// --overlap's share hidden) printed and added to the JSON.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "collx/collx.hpp"
#include "run.hpp"

namespace collx::bench {

// The rows of one size, measured, printed (rank 0) and added to `json_rows`; the fastest collx
// algorithm (not auto, not mpi) added to `fastest` for --save-tuning. Wrong elements found.
unsigned long long measure_size(Run& run, std::size_t size, nlohmann::json& json_rows,
                                std::vector<std::pair<std::size_t, Algorithm>>& fastest);

}  // namespace collx::bench
