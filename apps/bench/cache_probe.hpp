// Cache probing, for --cold: how large this core's last-level cache is (the pool of buffer sets
// must be larger than twice it for no call to find its data in cache).
#pragma once

#include <cstddef>
#include <string>

namespace collx::bench {

// The last-level cache of this rank's core, for --cold: sysconf's figure, else the highest
// level sysfs lists for cpu0, else 32 MiB; with where the figure came from.
struct CacheSize {
  std::size_t bytes = 0;
  std::string source;
};
CacheSize last_level_cache();

}  // namespace collx::bench
