// Strict numbers on the apps' command lines, and the memory a node has for their buffers.
//
// CLI11 2.1 converts an option's text with strtoull / strtoll / strtold in base 0 and checks
// little: an unsigned option takes "-1" as 2^64 - 1, a 64-bit one silently saturates
// "9223372036854775808" to 2^63 - 1, "010" is octal and "0x10" hexadecimal, leading spaces are
// skipped (but not trailing ones), and a floating-point option takes "nan", which every
// CLI::Range lets through (it compares false). These validators read the text first: a decimal
// integer or a finite decimal number in a range, else an error that CLI11 prefixes with the
// option's name ("--iters: ...").
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <system_error>

namespace collx::apps {

// A whole number of type T in [lo, hi]: decimal digits with a '-' in front for a negative one;
// no spaces, no '+', no base prefix, no fraction or exponent.
template <class T>
CLI::Validator integer_in(T lo, T hi) {
  const std::string range = hi == std::numeric_limits<T>::max()
                                ? "of " + std::to_string(lo) + " or more"
                                : "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const char* first = text.data();
        const char* last = text.data() + text.size();
        const bool negative = !text.empty() && text[0] == '-';
        const bool digits =
            text.size() > (negative ? 1u : 0u) &&
            text.find_first_not_of("0123456789", negative ? 1 : 0) == std::string::npos;
        if (!digits) return "\"" + text + "\" is not a whole number (decimal digits only)";
        const bool zero = text.find_first_not_of("0", negative ? 1 : 0) == std::string::npos;
        if (negative && !zero && lo >= 0) return text + " is negative: give a number " + range;
        if (negative && zero) ++first;  // "-0": an unsigned T's from_chars takes no sign
        T value{};
        const auto [end, error] = std::from_chars(first, last, value);
        if (error == std::errc::result_out_of_range || value < lo || value > hi) {
          return text + " is out of range: give a number " + range;
        }
        if (error != std::errc{} || end != last) {
          return "\"" + text + "\" is not a whole number (decimal digits only)";
        }
        return {};
      },
      "INT " + range);
}

// Any whole number of type T (zero and, for a signed T, negatives included).
template <class T>
CLI::Validator whole_number() {
  return integer_in<T>(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
}

// A finite decimal number in [lo, hi] ("0.5", "1e-3", "-2"): not nan, not inf, no hexadecimal,
// no spaces.
inline CLI::Validator number_in(double lo, double hi) {
  char range_text[64];
  std::snprintf(range_text, sizeof range_text, "in [%g, %g]", lo, hi);
  const std::string range = range_text;
  return CLI::Validator(
      [lo, hi, range](std::string& text) -> std::string {
        const bool allowed = !text.empty() &&
                             text.find_first_not_of("0123456789.eE+-") == std::string::npos &&
                             text.find_first_of("0123456789") != std::string::npos;
        char* end = nullptr;
        const double value = allowed ? std::strtod(text.c_str(), &end) : 0.0;
        if (!allowed || end != text.c_str() + text.size()) {
          return "\"" + text + "\" is not a number";
        }
        if (!std::isfinite(value) || value < lo || value > hi) {
          return text + " is out of range: give a number " + range;
        }
        return {};
      },
      "NUMBER " + range);
}

// Any finite number.
inline CLI::Validator finite_number() {
  return number_in(std::numeric_limits<double>::lowest(), std::numeric_limits<double>::max());
}

// A size in bytes: decimal digits with an optional suffix B, K, M or G (either case); nullopt for
// anything else (a sign, spaces, a fraction, a base prefix) and for more than 2^64 - 1 bytes.
inline std::optional<std::size_t> parse_size(const std::string& text) {
  const std::size_t digits = text.find_first_not_of("0123456789");
  if (digits == 0 || text.empty()) return std::nullopt;
  std::size_t value = 0;
  const char* end = text.data() + (digits == std::string::npos ? text.size() : digits);
  if (std::from_chars(text.data(), end, value).ec != std::errc{}) return std::nullopt;
  const std::string suffix = text.substr(static_cast<std::size_t>(end - text.data()));
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (!suffix.empty() && suffix != "B")
    return std::nullopt;
  if (value > (std::numeric_limits<std::size_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

// Why `text` is no size for `flag` ("" when it is one), for the error message.
inline std::string size_error(const std::string& flag, const std::string& text) {
  if (parse_size(text)) return "";
  const bool digits_then_suffix = !text.empty() &&
                                  std::isdigit(static_cast<unsigned char>(text[0])) &&
                                  text.find_first_not_of("0123456789KkMmGgB") == std::string::npos;
  return flag + " \"" + text + "\": " +
         (digits_then_suffix ? "more than 2^64 - 1 bytes, or a suffix other than one of B, K, M, G"
                             : "not a size: give bytes as decimal digits, with an optional K, M "
                               "or G suffix (e.g. 64M)");
}

// The memory this process may use on its node: the physical memory, or the container's limit
// (cgroup v2 memory.max, v1 memory.limit_in_bytes) where that is lower. 0 where unknown.
inline std::size_t node_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  std::size_t bytes =
      pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page) : 0;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream file(path);
    unsigned long long limit = 0;
    if (file >> limit && limit > 0) {  // "max" (no limit) reads as nothing
      bytes = bytes ? std::min<std::size_t>(bytes, limit) : limit;
    }
  }
  return bytes;
}

// "23.4 GiB", "512.0 MiB": a byte count for a message.
inline std::string describe_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, unit ? "%.1f %s" : "%.0f %s", bytes, units[unit]);
  return text;
}

}  // namespace collx::apps
