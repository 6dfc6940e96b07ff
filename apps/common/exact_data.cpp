#include "exact_data.hpp"

#include <cstring>
#include <type_traits>

namespace collx::verify {

std::int64_t input_value(ReduceOp op, int rank, int nranks, std::size_t i) {
  const auto r = static_cast<std::size_t>(rank);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg:
      return static_cast<std::int64_t>((i + r) % 4);  // sums stay <= 3 * nranks
    case ReduceOp::prod:
      // Exactly one rank holds 2 for each element, at a position that rotates with i, so a
      // lost or doubled contribution of any rank shows.
      return (i + r) % static_cast<std::size_t>(nranks) == 0 ? 2 : 1;
    case ReduceOp::min:
    case ReduceOp::max:
      return static_cast<std::int64_t>((i * 7 + r * 13) % 101);
  }
  return 0;
}

double expected_value(ReduceOp op, int nranks, std::size_t i) {
  std::int64_t acc = input_value(op, 0, nranks, i);
  for (int r = 1; r < nranks; ++r) {
    const std::int64_t v = input_value(op, r, nranks, i);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::max:
        acc = v > acc ? v : acc;
        break;
    }
  }
  return static_cast<double>(acc);
}

namespace {

template <class T>
T from_integer(std::int64_t v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    // Two's complement wrap, as the library's integer sum and product define.
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(static_cast<std::uint64_t>(v)));
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
T average_as(std::int64_t exact_sum, int nranks) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(exact_sum) / static_cast<float>(nranks));
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(static_cast<T>(exact_sum) / static_cast<T>(nranks));
  } else {
    return T{};
  }
}

// The exact result in T: avg divides the exact sum in the type's arithmetic precision (float32
// for the 16-bit types, then rounded once), as the library's fused last step does.
template <class T>
T expected_as(ReduceOp op, int nranks, std::size_t i) {
  const auto exact = static_cast<std::int64_t>(expected_value(op, nranks, i));
  return op == ReduceOp::avg ? average_as<T>(exact, nranks) : from_integer<T>(exact);
}

template <class T>
void fill_typed(void* buffer, ReduceOp op, int rank, int nranks, std::size_t count) {
  T* out = static_cast<T*>(buffer);
  for (std::size_t i = 0; i < count; ++i)
    out[i] = from_integer<T>(input_value(op, rank, nranks, i));
}

template <class T>
std::size_t wrong_typed(const void* result, ReduceOp op, int nranks, std::size_t count,
                        std::size_t first) {
  const T* in = static_cast<const T*>(result);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const T expected = expected_as<T>(op, nranks, first + i);
    if (std::memcmp(&expected, &in[i], sizeof(T)) != 0) ++wrong;
  }
  return wrong;
}

template <class T>
T pattern(int rank, std::size_t i) {
  // Distinct per (rank, i) within the range every type represents exactly.
  return from_integer<T>(
      static_cast<std::int64_t>((i * 31 + static_cast<std::size_t>(rank) * 7) % 113));
}

template <class F>
void dispatch(DataType type, F&& f) {
  switch (type) {
    case DataType::int8:
      return f(std::int8_t{});
    case DataType::uint8:
      return f(std::uint8_t{});
    case DataType::int32:
      return f(std::int32_t{});
    case DataType::uint32:
      return f(std::uint32_t{});
    case DataType::int64:
      return f(std::int64_t{});
    case DataType::uint64:
      return f(std::uint64_t{});
    case DataType::float16:
      return f(float16{});
    case DataType::bfloat16:
      return f(bfloat16{});
    case DataType::float32:
      return f(float{});
    case DataType::float64:
      return f(double{});
  }
}

}  // namespace

void fill_input(void* buffer, DataType type, ReduceOp op, int rank, int nranks, std::size_t count) {
  dispatch(type, [&](auto tag) { fill_typed<decltype(tag)>(buffer, op, rank, nranks, count); });
}

std::size_t count_wrong(const void* result, DataType type, ReduceOp op, int nranks,
                        std::size_t count, std::size_t first) {
  std::size_t wrong = 0;
  dispatch(type,
           [&](auto tag) { wrong = wrong_typed<decltype(tag)>(result, op, nranks, count, first); });
  return wrong;
}

void store_integer(void* buffer, DataType type, std::size_t index, std::int64_t value) {
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(buffer)[index] = from_integer<T>(value);
  });
}

void store_average(void* buffer, DataType type, std::size_t index, std::int64_t exact_sum,
                   int nranks) {
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    static_cast<T*>(buffer)[index] = average_as<T>(exact_sum, nranks);
  });
}

void fill_expected(void* out, DataType type, ReduceOp op, int nranks, std::size_t count,
                   std::size_t first) {
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (std::size_t i = 0; i < count; ++i)
      o[i] = expected_as<T>(op, nranks, first + i);
  });
}

void fill_pattern(void* buffer, DataType type, int rank, std::size_t count, std::size_t first) {
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    T* out = static_cast<T*>(buffer);
    for (std::size_t i = 0; i < count; ++i)
      out[i] = pattern<T>(rank, first + i);
  });
}

std::size_t count_pattern_wrong(const void* buffer, DataType type, int rank, std::size_t count,
                                std::size_t first) {
  std::size_t wrong = 0;
  dispatch(type, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(buffer);
    for (std::size_t i = 0; i < count; ++i) {
      const T expected = pattern<T>(rank, first + i);
      if (std::memcmp(&expected, &in[i], sizeof(T)) != 0) ++wrong;
    }
  });
  return wrong;
}

}  // namespace collx::verify
