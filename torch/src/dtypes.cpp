// How collx moves a tensor's elements (dtypes.hpp).
#include "dtypes.hpp"

namespace collx_torch::detail {

Moved moved_as(at::ScalarType s) {
  switch (s) {
    case at::kFloat:
      return {collx::DataType::float32, 1};
    case at::kDouble:
      return {collx::DataType::float64, 1};
    case at::kHalf:
      return {collx::DataType::float16, 1};
    case at::kBFloat16:
      return {collx::DataType::bfloat16, 1};
    case at::kChar:
      return {collx::DataType::int8, 1};
    case at::kByte:
      return {collx::DataType::uint8, 1};
    case at::kInt:
      return {collx::DataType::int32, 1};
    case at::kLong:
      return {collx::DataType::int64, 1};
    case at::kUInt32:
      return {collx::DataType::uint32, 1};
    case at::kUInt64:
      return {collx::DataType::uint64, 1};
    default:
      return {collx::DataType::uint8, static_cast<int64_t>(c10::elementSize(s))};
  }
}

collx::DataType data_type_of(const at::Tensor& t, const char* /*op*/) {
  return moved_as(t.scalar_type()).type;
}

int64_t count_of(const at::Tensor& t, int64_t elements) {
  return elements * moved_as(t.scalar_type()).per_element;
}

}  // namespace collx_torch::detail
