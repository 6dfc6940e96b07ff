// Replaces the library's configuration for a scope (tests of COLLX_* behaviour on real ranks);
// the previous one comes back on destruction. Not thread-safe against calls in flight.
#pragma once

#include "config.hpp"

namespace collx::testing {

class ConfigOverride {
 public:
  explicit ConfigOverride(const collx::detail::Config& c) : saved_(collx::detail::config()) {
    collx::detail::set_config(c);
  }
  ~ConfigOverride() { collx::detail::set_config(saved_); }
  ConfigOverride(const ConfigOverride&) = delete;
  ConfigOverride& operator=(const ConfigOverride&) = delete;

 private:
  collx::detail::Config saved_;
};

}  // namespace collx::testing
