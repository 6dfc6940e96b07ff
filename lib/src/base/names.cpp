// The names of collectives, algorithms, data types and reduction ops (COLLX_COLLECTIVE_LIST,
// COLLX_ALGORITHM_LIST, COLLX_DATATYPE_LIST, COLLX_REDUCE_OP_LIST): what to_string prints and
// the parsers read. Which collective implements which algorithm is the registry's
// (coll/registry.cpp: algorithms_of, implements).
#include <algorithm>

#include "collx/algorithm.hpp"
#include "collx/types.hpp"

namespace collx {

namespace {

#define COLLX_NAME(name, ...) #name,
constexpr std::string_view kCollectiveNames[] = {COLLX_COLLECTIVE_LIST(COLLX_NAME)};
constexpr std::string_view kAlgorithmNames[] = {COLLX_ALGORITHM_LIST(COLLX_NAME)};
constexpr std::string_view kTypeNames[] = {COLLX_DATATYPE_LIST(COLLX_NAME)};
constexpr std::string_view kOpNames[] = {COLLX_REDUCE_OP_LIST(COLLX_NAME)};
#undef COLLX_NAME

// The name of enumerator `value` in its list `names` (in the enum's order).
template <class Enum, std::size_t N>
std::string_view name_of(const std::string_view (&names)[N], Enum value) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "invalid";
}

// The enumerator `name` names in `names`.
template <class Enum, std::size_t N>
std::optional<Enum> parse(const std::string_view (&names)[N], std::string_view name) {
  const auto i = static_cast<std::size_t>(std::find(names, names + N, name) - names);
  return i < N ? std::optional<Enum>(static_cast<Enum>(i)) : std::nullopt;
}

}  // namespace

std::string_view to_string(Collective collective) {
  return name_of(kCollectiveNames, collective);
}

std::string_view to_string(Algorithm algorithm) {
  return algorithm == Algorithm::automatic ? "auto" : name_of(kAlgorithmNames, algorithm);
}

std::string_view to_string(DataType type) {
  return name_of(kTypeNames, type);
}

std::string_view to_string(ReduceOp op) {
  return name_of(kOpNames, op);
}

std::optional<Collective> parse_collective(std::string_view name) {
  return name == "bcast" ? Collective::broadcast : parse<Collective>(kCollectiveNames, name);
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  if (name == "auto") return Algorithm::automatic;
  if (name == "shm") return Algorithm::shared_memory;
  return parse<Algorithm>(kAlgorithmNames, name);
}

std::optional<DataType> parse_datatype(std::string_view name) {
  // Common aliases (nccl-tests and PyTorch spellings).
  if (name == "float" || name == "fp32") return DataType::float32;
  if (name == "double" || name == "fp64") return DataType::float64;
  if (name == "half" || name == "fp16") return DataType::float16;
  if (name == "bf16") return DataType::bfloat16;
  if (name == "int") return DataType::int32;
  if (name == "char") return DataType::int8;
  return parse<DataType>(kTypeNames, name);
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  return parse<ReduceOp>(kOpNames, name);
}

}  // namespace collx
