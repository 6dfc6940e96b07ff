// Contiguous buffers for collx, staged (in the pool's memory, process_group.hpp, StagingPool)
// where the caller's tensors are not: what collx reads, writes, or reads and writes in place of
// a call's tensors, and the copies back into them on completion (work.hpp, Staging).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace collx_torch {
class StagingPool;
struct Staging;
}  // namespace collx_torch

namespace collx_torch::detail {

// A tensor collx only reads.
at::Tensor read_buffer(const at::Tensor& t, StagingPool& pool, Staging& s);

// A tensor collx only writes: a non-contiguous one gets a buffer copied back on completion.
at::Tensor write_buffer(const at::Tensor& t, StagingPool& pool, Staging& s);

// An output collx writes while it reads `input`: staged where the two share memory, as torch
// allows (an output that is the rank's own block of the input) and collx does not.
at::Tensor write_buffer_apart(const at::Tensor& t, const at::Tensor& input, StagingPool& pool,
                              Staging& s);

// A tensor collx reads and writes (in place).
at::Tensor update_buffer(const at::Tensor& t, StagingPool& pool, Staging& s);

// A list of equal tensors collx reads as one block.
at::Tensor read_list(const std::vector<at::Tensor>& list, StagingPool& pool, Staging& s);

// A list of equal tensors collx writes as one block.
at::Tensor write_list(const std::vector<at::Tensor>& list, StagingPool& pool, Staging& s);

}  // namespace collx_torch::detail
