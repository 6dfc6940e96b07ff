#include "collx/types.hpp"

#include <array>

namespace collx {

namespace {
constexpr std::array<std::string_view, kDataTypeCount> kTypeNames = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",
    "uint64", "float16", "bfloat16", "float32", "float64"};
constexpr std::array<std::size_t, kDataTypeCount> kTypeSizes = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
constexpr std::array<std::string_view, kReduceOpCount> kOpNames = {"sum", "prod", "min", "max",
                                                                   "avg"};
}  // namespace

std::size_t size_of(DataType type) {
  return kTypeSizes.at(static_cast<std::size_t>(type));
}

bool is_floating(DataType type) {
  return type == DataType::float16 || type == DataType::bfloat16 || type == DataType::float32 ||
         type == DataType::float64;
}

bool is_supported(DataType type, ReduceOp op) {
  if (static_cast<int>(type) >= kDataTypeCount || static_cast<int>(op) >= kReduceOpCount) {
    return false;
  }
  return op != ReduceOp::avg || is_floating(type);
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
