// Argument checks run before a collective sends anything; each failure names the collective,
// the rank and the argument. The tests are inline (they run on every call); the messages are
// built out of line, only on failure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "collx/algorithm.hpp"
#include "collx/error.hpp"
#include "collx/types.hpp"

namespace collx::detail {

class ArgCheck {
 public:
  ArgCheck(Collective collective, int rank) : collective_(collective), rank_(rank) {}

  [[noreturn]] void fail(ErrorCode code, std::string_view message) const;
  // A valid DataType value.
  void type(DataType type) const {
    if (static_cast<unsigned>(type) >= kDataTypeCount) [[unlikely]]
      bad_type(type);
  }
  // A valid, supported (type, op) pair.
  void type_op(DataType type, ReduceOp op) const {
    this->type(type);
    if (static_cast<unsigned>(op) >= kReduceOpCount || !is_supported(type, op)) [[unlikely]] {
      bad_op(type, op);
    }
  }
  // No object is larger than PTRDIFF_MAX bytes: a count beyond it is a caller's error (and
  // would overflow the offset arithmetic of the schedules).
  static constexpr std::size_t kMaxBytes =
      static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());
  // count * size_of(type) for each of `nranks` ranks (a gathered or scattered buffer), rejecting
  // counts whose byte size no buffer can have. (Multiplications checked for overflow, not a
  // division: this runs on every call; with one rank the second folds away.)
  std::size_t bytes(std::size_t count, DataType type, int nranks = 1) const {
    std::size_t block = 0;
    std::size_t product = 0;
    if (__builtin_mul_overflow(count, size_of(type), &block) ||
        __builtin_mul_overflow(block, static_cast<std::size_t>(nranks), &product) ||
        product > kMaxBytes) [[unlikely]]
      bad_count(count, type, nranks);
    return product;
  }
  // A null pointer with a non-zero size.
  void buffer(const void* buffer, std::size_t bytes, std::string_view name) const {
    if (buffer == nullptr && bytes != 0) [[unlikely]]
      null_buffer(name);
  }
  // Two buffers that overlap without being the same buffer.
  void no_partial_overlap(const void* a, std::size_t a_bytes, std::string_view a_name,
                          const void* b, std::size_t b_bytes, std::string_view b_name) const {
    const auto a0 = reinterpret_cast<std::uintptr_t>(a);
    const auto b0 = reinterpret_cast<std::uintptr_t>(b);
    if (a0 != b0 && a_bytes != 0 && b_bytes != 0 && a0 < b0 + b_bytes && b0 < a0 + a_bytes)
        [[unlikely]] {
      overlap(a_name, b_name);
    }
  }
  void rank_in_range(int value, int size, std::string_view name) const {
    if (value < 0 || value >= size) [[unlikely]]
      bad_rank(value, size, name);
  }

 private:
  [[noreturn]] void bad_type(DataType type) const;
  [[noreturn]] void bad_op(DataType type, ReduceOp op) const;
  [[noreturn]] void bad_count(std::size_t count, DataType type, int nranks) const;
  [[noreturn]] void null_buffer(std::string_view name) const;
  [[noreturn]] void overlap(std::string_view a_name, std::string_view b_name) const;
  [[noreturn]] void bad_rank(int value, int size, std::string_view name) const;

  Collective collective_;
  int rank_;
};

}  // namespace collx::detail
