#include "collx/types.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace collx {

namespace {
#define COLLX_NAME(name, ...) #name,
constexpr std::array<std::string_view, kDataTypeCount> kTypeNames = {
    COLLX_DATATYPE_LIST(COLLX_NAME)};
constexpr std::array<std::string_view, kReduceOpCount> kOpNames = {
    COLLX_REDUCE_OP_LIST(COLLX_NAME)};
#undef COLLX_NAME
}  // namespace

void detail::throw_not_a_type(DataType type) {
  throw std::out_of_range("collx: " + std::to_string(static_cast<int>(type)) +
                          " is not a DataType");
}

std::string_view to_string(DataType type) {
  const auto i = static_cast<std::size_t>(type);
  return i < kTypeNames.size() ? kTypeNames[i] : "invalid";
}

std::string_view to_string(ReduceOp op) {
  const auto i = static_cast<std::size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : "invalid";
}

std::optional<DataType> parse_datatype(std::string_view name) {
  for (std::size_t i = 0; i < kTypeNames.size(); ++i) {
    if (kTypeNames[i] == name) return static_cast<DataType>(i);
  }
  // Common aliases (nccl-tests and PyTorch spellings).
  if (name == "float" || name == "fp32") return DataType::float32;
  if (name == "double" || name == "fp64") return DataType::float64;
  if (name == "half" || name == "fp16") return DataType::float16;
  if (name == "bf16") return DataType::bfloat16;
  if (name == "int") return DataType::int32;
  if (name == "char") return DataType::int8;
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  }
  return std::nullopt;
}

}  // namespace collx
