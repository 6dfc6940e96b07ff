// The checks of torch's arguments (checks.hpp).
#include "checks.hpp"

#include <cstddef>
#include <limits>

#include "dtypes.hpp"

namespace collx_torch::detail {

void check_tensor(const at::Tensor& t, const char* op) {
  if (!t.defined()) refuse(op, "undefined tensor");
#ifdef COLLX_TORCH_CUDA
  if (!t.device().is_cpu() && !t.device().is_cuda()) {
    refuse(op, "a tensor on ", t.device(), ": the collx backend takes CPU and CUDA tensors");
  }
#else
  if (!t.device().is_cpu()) {
    refuse(op, "a tensor on ", t.device(),
           ": this build of the collx backend takes CPU tensors only (CUDA tensors need collx and "
           "torch both built with CUDA)");
  }
#endif
  if (t.layout() != at::kStrided) refuse(op, "only dense (strided) tensors are supported");
  data_type_of(t, op);
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1) {
    refuse(op, "takes one tensor per process, got ", tensors.size(),
           " (the multi-GPU forms are not supported)");
  }
  check_tensor(tensors[0], op);
  return tensors[0];
}

void check_same_kind(const at::Tensor& t, const at::Tensor& like, const char* op,
                     const char* what) {
  check_tensor(t, op);
  if (t.scalar_type() != like.scalar_type()) {
    refuse(op, what, " holds a ", t.scalar_type(), " tensor where ", like.scalar_type(),
           " was expected");
  }
}

void check_list(const std::vector<at::Tensor>& list, int ranks, const at::Tensor& like,
                const char* op, const char* what) {
  if (list.size() != static_cast<std::size_t>(ranks)) {
    refuse(op, what, " has ", list.size(), " tensors for a group of ", ranks, " ranks");
  }
  for (const at::Tensor& t : list) {
    check_same_kind(t, like, op, what);
    if (t.numel() != like.numel()) {
      refuse(op, what, " holds a tensor of ", t.numel(), " elements where ", like.numel(),
             " were expected (collx moves blocks of equal size)");
    }
  }
}

const std::vector<at::Tensor>* root_list(const std::vector<std::vector<at::Tensor>>& lists,
                                         bool is_root, int ranks, const at::Tensor& like,
                                         const char* op, const char* what) {
  if (!is_root) {
    if (!lists.empty()) refuse(op, what, " is for the root rank only");
    return nullptr;
  }
  if (lists.size() != 1) refuse(op, "the root takes one ", what, ", got ", lists.size());
  check_list(lists[0], ranks, like, op, what);
  return &lists[0];
}

void check_numel(const at::Tensor& t, int64_t expected, const char* op, const char* what) {
  if (t.numel() != expected) {
    refuse(op, what, " has ", t.numel(), " elements, ", expected, " expected");
  }
}

int rank_arg(int64_t rank, const char* op, const char* what) {
  if (rank < 0 || rank > std::numeric_limits<int>::max()) refuse(op, "invalid ", what, " ", rank);
  return static_cast<int>(rank);
}

void check_tag(int tag, const char* op) {
  if (tag < 0 || tag >= kFirstReservedTag) {
    refuse(op, "tag ", tag, " is outside the range 0..", kFirstReservedTag - 1,
           " (collx's tags end at ", collx::Communicator::kMaxTag,
           "; the backend keeps the last two for itself)");
  }
}

std::vector<int64_t> split_rows(const at::Tensor& t, const std::vector<int64_t>& splits, int ranks,
                                const char* op, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % ranks != 0) {
      refuse(op, what, " has ", rows, " rows, not divisible by the group's ", ranks, " ranks");
    }
    return std::vector<int64_t>(static_cast<std::size_t>(ranks), rows / ranks);
  }
  if (splits.size() != static_cast<std::size_t>(ranks)) {
    refuse(op, what, " split sizes list ", splits.size(), " entries for ", ranks, " ranks");
  }
  int64_t total = 0;
  for (int64_t split : splits) {
    if (split < 0) refuse(op, what, " split sizes hold a negative size, ", split);
    total += split;
  }
  if (total != rows) {
    refuse(op, what, " split sizes add up to ", total, " rows, the tensor has ", rows);
  }
  return splits;
}

}  // namespace collx_torch::detail
