// A 64-bit checksum of a byte range: what ranks compare to prove they hold the same weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace collx::train {

// Not cryptographic: a fast multiply-rotate hash over 8-byte words (then the tail bytes) whose
// avalanche makes any flipped bit change the result.
inline std::uint64_t checksum_bytes(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0x243F6A8885A308D3ull ^ (bytes * 0x9E3779B97F4A7C15ull);
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h ^= word * 0x87C37B91114253D5ull;
    h = ((h << 31) | (h >> 33)) * 0x4CF5AD432745937Full;
  }
  for (; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 33);
}

inline std::string checksum_hex(std::uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4)
    text[static_cast<std::size_t>(i)] = digits[value & 15];
  return text;
}

}  // namespace collx::train
