#include "cache_probe.hpp"

#include <fstream>

#include <unistd.h>

#include "cli_numbers.hpp"

namespace collx::bench {

using collx::apps::parse_size;

CacheSize last_level_cache() {
  const long reported = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (reported > 0) return {static_cast<std::size_t>(reported), "sysconf"};
  CacheSize best;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    std::ifstream type_file(dir + "type");
    int level = 0;
    std::string size_text;
    std::string type;
    if (!(level_file >> level) || !(size_file >> size_text)) continue;
    type_file >> type;
    if (type == "Instruction" || level < best_level) continue;
    const auto bytes = parse_size(size_text);
    if (!bytes || *bytes == 0) continue;
    best = {*bytes, "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i)};
    best_level = level;
  }
  if (best.bytes > 0) return best;
  return {std::size_t{32} << 20, "not reported; assumed"};
}

}  // namespace collx::bench
