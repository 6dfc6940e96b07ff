// Staging (staging.hpp): the pool of staging memory (process_group.hpp, StagingPool), and the
// contiguous buffers collx reads and writes in place of a call's tensors where those are not.
#include "staging.hpp"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/accumulate.h>

#include <cstddef>
#include <optional>

#include "process_group.hpp"

namespace collx_torch {

at::Tensor StagingPool::take(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const int64_t bytes =
      c10::multiply_integers(sizes) * static_cast<int64_t>(options.dtype().itemsize());
  // Device memory is torch's caching allocator's to reuse; the pool holds host memory.
  if (bytes == 0 || options.device().type() != at::kCPU) return at::empty(sizes, options);
  at::Tensor buffer;
  {
    std::lock_guard lock(mutex_);
    const auto is_free = [](const at::Tensor& b) { return b.storage().use_count() == 1; };
    // The smallest free buffer that fits; else the largest free one grows (replaced) or a new
    // one joins, within the limits.
    at::Tensor* fit = nullptr;
    at::Tensor* largest_free = nullptr;
    int64_t held = 0;
    for (at::Tensor& b : buffers_) {
      held += b.numel();
      if (!is_free(b)) continue;
      if (b.numel() >= bytes && (!fit || b.numel() < fit->numel())) fit = &b;
      if (!largest_free || b.numel() > largest_free->numel()) largest_free = &b;
    }
    if (fit) {
      buffer = *fit;
    } else if (largest_free && held - largest_free->numel() + bytes <= kMaxBytes) {
      *largest_free = at::Tensor();  // its memory goes back first
      *largest_free = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
      buffer = *largest_free;
    } else if (buffers_.size() < kMaxBuffers && held + bytes <= kMaxBytes) {
      buffers_.push_back(at::empty({bytes}, at::TensorOptions().dtype(at::kByte)));
      buffer = buffers_.back();
    }
  }
  if (!buffer.defined()) return at::empty(sizes, options);
  // A typed tensor over the buffer's memory whose deleter holds the buffer's storage (not the
  // buffer tensor, whose copies leave the storage's count alone): it stays in use, its count
  // above one, until the last view of this tensor is gone.
  return at::from_blob(
      buffer.data_ptr(), sizes,
      [storage = buffer.storage()](void*) mutable { storage = c10::Storage(); }, options);
}

namespace detail {
namespace {

// The list as the one block of memory it already is (contiguous tensors back to back in one
// storage, as torch.chunk() of a contiguous tensor makes them), or nothing.
std::optional<at::Tensor> as_one_block(const std::vector<at::Tensor>& list) {
  const at::Tensor& first = list.front();
  const int64_t n = first.numel();
  for (std::size_t i = 0; i < list.size(); ++i) {
    const at::Tensor& t = list[i];
    if (!t.is_contiguous() || !t.storage().is_alias_of(first.storage()) ||
        t.storage_offset() != first.storage_offset() + static_cast<int64_t>(i) * n) {
      return std::nullopt;
    }
  }
  return first.as_strided({n * static_cast<int64_t>(list.size())}, {1}, first.storage_offset());
}

}  // namespace

at::Tensor read_buffer(const at::Tensor& t, StagingPool& pool, Staging& s) {
  if (t.is_contiguous()) {
    s.keep_alive.push_back(t);
    return t;
  }
  at::Tensor c = pool.take(t.sizes(), t.options());
  c.copy_(t);
  s.keep_alive.push_back(c);
  return c;
}

at::Tensor write_buffer(const at::Tensor& t, StagingPool& pool, Staging& s) {
  if (t.is_contiguous()) {
    s.keep_alive.push_back(t);
    return t;
  }
  at::Tensor c = pool.take(t.sizes(), t.options());
  s.copy_back.emplace_back(t, c);
  return c;
}

at::Tensor write_buffer_apart(const at::Tensor& t, const at::Tensor& input, StagingPool& pool,
                              Staging& s) {
  if (at::get_overlap_status(t, input) == at::MemOverlapStatus::No) return write_buffer(t, pool, s);
  at::Tensor c = pool.take(t.sizes(), t.options());
  s.copy_back.emplace_back(t, c);
  return c;
}

at::Tensor update_buffer(const at::Tensor& t, StagingPool& pool, Staging& s) {
  if (t.is_contiguous()) {
    s.keep_alive.push_back(t);
    return t;
  }
  at::Tensor c = pool.take(t.sizes(), t.options());
  c.copy_(t);
  s.copy_back.emplace_back(t, c);
  return c;
}

at::Tensor read_list(const std::vector<at::Tensor>& list, StagingPool& pool, Staging& s) {
  if (std::optional<at::Tensor> block = as_one_block(list)) {
    s.keep_alive.push_back(*block);
    return *block;
  }
  const int64_t n = list.front().numel();
  at::Tensor flat = pool.take({n * static_cast<int64_t>(list.size())}, list.front().options());
  for (std::size_t i = 0; i < list.size(); ++i)
    flat.narrow(0, static_cast<int64_t>(i) * n, n).copy_(list[i].reshape({-1}));
  s.keep_alive.push_back(flat);
  return flat;
}

at::Tensor write_list(const std::vector<at::Tensor>& list, StagingPool& pool, Staging& s) {
  if (std::optional<at::Tensor> block = as_one_block(list)) {
    s.keep_alive.push_back(*block);
    return *block;
  }
  const int64_t n = list.front().numel();
  at::Tensor flat = pool.take({n * static_cast<int64_t>(list.size())}, list.front().options());
  for (std::size_t i = 0; i < list.size(); ++i) {
    s.copy_back.emplace_back(list[i],
                             flat.narrow(0, static_cast<int64_t>(i) * n, n).view(list[i].sizes()));
  }
  s.keep_alive.push_back(flat);
  return flat;
}

}  // namespace detail
}  // namespace collx_torch
