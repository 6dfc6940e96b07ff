// How collx moves a tensor's elements: the collx type and count of a tensor of each dtype
// (process_group.cpp's calls, Receives, and Reduction, which reduces in collx's own type).
#pragma once

#include <ATen/core/Tensor.h>

#include <collx/collx.hpp>

#include <cstdint>

namespace collx_torch::detail {

// How collx moves a tensor's elements: in collx's own type where it has one, else as bytes
// (bool, int16, uint16, complex, float8...: every dtype moves; only reductions need the type).
struct Moved {
  collx::DataType type;
  int64_t per_element;  // collx elements per tensor element
};

Moved moved_as(at::ScalarType s);

collx::DataType data_type_of(const at::Tensor& t, const char* op);

// collx's count for `elements` elements of t's dtype.
int64_t count_of(const at::Tensor& t, int64_t elements);

}  // namespace collx_torch::detail
