// The checks of torch's arguments (tensors, lists, ranks, tags, split sizes) before a call is
// mapped to collx's, and the error every refusal raises.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/StringUtil.h>

#include <collx/collx.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace collx_torch::detail {

// Every refusal is a RuntimeError in Python that names the torch.distributed operation.
template <class... Args>
[[noreturn]] void refuse(const char* op, const Args&... args) {
  throw std::runtime_error(c10::str("collx backend: ", op, ": ", args...));
}

void check_tensor(const at::Tensor& t, const char* op);

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op);

void check_same_kind(const at::Tensor& t, const at::Tensor& like, const char* op, const char* what);

// A list with one tensor per rank, each of `like`'s dtype and element count.
void check_list(const std::vector<at::Tensor>& list, int ranks, const at::Tensor& like,
                const char* op, const char* what);

// The root's list of one tensor per rank (gather_list, scatter_list), checked; null elsewhere,
// where torch passes no list.
const std::vector<at::Tensor>* root_list(const std::vector<std::vector<at::Tensor>>& lists,
                                         bool is_root, int ranks, const at::Tensor& like,
                                         const char* op, const char* what);

void check_numel(const at::Tensor& t, int64_t expected, const char* op, const char* what);

int rank_arg(int64_t rank, const char* op, const char* what);

// Tags kept for the backend's own point-to-point messages, on the communicator's point-to-point
// context, where the caller's send and recv have the others (which could never match them):
// all_to_all_single with split sizes, and monitored_barrier.
inline constexpr int kAlltoallTag = collx::Communicator::kMaxTag;
inline constexpr int kMonitorTag = collx::Communicator::kMaxTag - 1;
inline constexpr int kFirstReservedTag = kMonitorTag;

void check_tag(int tag, const char* op);

// all_to_all_single's split sizes (rows of dim 0 per rank) for t: the given ones, checked, or
// equal splits.
std::vector<int64_t> split_rows(const at::Tensor& t, const std::vector<int64_t>& splits, int ranks,
                                const char* op, const char* what);

}  // namespace collx_torch::detail
