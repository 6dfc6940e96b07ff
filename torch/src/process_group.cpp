// The collectives of the collx process group: torch's tensors and options checked and mapped to
// one collx call each, nonblocking, completed by CollxWork::wait() or the completion thread.
#include "process_group.hpp"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/StringUtil.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

namespace collx_torch {
namespace {

// The live objects of one kind that a waiting thread moves on (Receives, Sequence): held
// weakly, so a destroyed group's leave the list at the next enrolment.
template <class T>
class Enrolled {
 public:
  void add(const std::shared_ptr<T>& object) {
    std::lock_guard lock(mutex_);
    std::erase_if(objects_, [](const auto& o) { return o.expired(); });
    objects_.push_back(object);
  }
  // The ones alive now, taken out of the lock (moving them on takes their own locks).
  std::vector<std::shared_ptr<T>> alive() {
    std::vector<std::shared_ptr<T>> all;
    std::lock_guard lock(mutex_);
    for (const auto& o : objects_) {
      if (auto object = o.lock()) all.push_back(std::move(object));
    }
    return all;
  }

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<T>> objects_;
};

// Every refusal is a RuntimeError in Python that names the torch.distributed operation.
template <class... Args>
[[noreturn]] void refuse(const char* op, const Args&... args) {
  throw std::runtime_error(c10::str("collx backend: ", op, ": ", args...));
}

// How collx moves a tensor's elements: in collx's own type where it has one, else as bytes
// (bool, int16, uint16, complex, float8...: every dtype moves; only reductions need the type).
struct Moved {
  collx::DataType type;
  int64_t per_element;  // collx elements per tensor element
};

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

// collx's count for `elements` elements of t's dtype.
int64_t count_of(const at::Tensor& t, int64_t elements) {
  return elements * moved_as(t.scalar_type()).per_element;
}

const char* torch_op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

// How one reduction runs (process_group.hpp, Reduction).
Reduction Reduction::of(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) {
  using R = c10d::ReduceOp;
  const at::ScalarType s = t.scalar_type();
  const bool boolean = s == at::kBool;
  const bool complex = at::isComplexType(s);
  const bool floating = at::isFloatingType(s) && !at::isFloat8Type(s);
  const bool integral = at::isIntegralType(s, /*includeBool=*/false);
  auto refuse_pair = [&](const char* why) {
    refuse(name, "ReduceOp.", torch_op_name(op.op_), " on ", s, " tensors is not supported (", why,
           ")");
  };
  if (!boolean && !complex && !floating && !integral) {
    refuse_pair(
        "collx moves tensors of every dtype, but reduces only integer, bool, floating "
        "and complex ones");
  }
  Reduction r;
  auto native = [&](collx::DataType type, collx::ReduceOp rop, int64_t units = 1) {
    r.fold = false;
    r.type = type;
    r.op = rop;
    r.units = units;
  };
  auto folded = [&] { r.fold = true; };
  const Moved moved = moved_as(s);
  const bool has_native = moved.per_element == 1;
  switch (op.op_) {
    case R::PREMUL_SUM: {
      if (!floating && !complex) refuse_pair("PREMUL_SUM scales by a floating-point factor");
      auto* factor = dynamic_cast<c10d::PreMulSumSupplement*>(op.supplement_.get());
      if (!factor) refuse(name, "ReduceOp.PREMUL_SUM without its factor");
      if (factor->tensor_factor.defined()) {
        r.premul_tensor = factor->tensor_factor;
      } else {
        r.premul = factor->double_factor;
      }
      [[fallthrough]];
    }
    case R::SUM:
      if (boolean) {
        native(collx::DataType::uint8, collx::ReduceOp::max);  // torch's bool SUM: any
      } else if (complex) {
        native(s == at::kComplexDouble ? collx::DataType::float64 : collx::DataType::float32,
               collx::ReduceOp::sum, 2);
      } else if (has_native) {
        native(moved.type, collx::ReduceOp::sum);
      } else {
        folded();
      }
      break;
    case R::AVG:
      if (!floating && !complex)
        refuse_pair("collx averages floating-point and complex tensors only");
      if (complex) {
        native(s == at::kComplexDouble ? collx::DataType::float64 : collx::DataType::float32,
               collx::ReduceOp::avg, 2);
      } else {
        native(moved.type, collx::ReduceOp::avg);
      }
      break;
    case R::PRODUCT:
    case R::MIN:
    case R::MAX: {
      if (complex && op.op_ != R::PRODUCT) refuse_pair("complex numbers have no order");
      const collx::ReduceOp rop = op.op_ == R::PRODUCT ? collx::ReduceOp::prod
                                  : op.op_ == R::MIN   ? collx::ReduceOp::min
                                                       : collx::ReduceOp::max;
      if (boolean) {
        native(collx::DataType::uint8,
               op.op_ == R::MAX ? collx::ReduceOp::max : collx::ReduceOp::min);  // any / all
      } else if (has_native && !complex) {
        native(moved.type, rop);
      } else {
        folded();
      }
      break;
    }
    case R::BAND:
    case R::BOR:
    case R::BXOR:
      if (!integral && !boolean) refuse_pair("bitwise operations take integer and bool tensors");
      if (boolean && op.op_ != R::BXOR) {
        native(collx::DataType::uint8,
               op.op_ == R::BOR ? collx::ReduceOp::max : collx::ReduceOp::min);
      } else {
        folded();
      }
      break;
    default:
      refuse(name, "ReduceOp.", torch_op_name(op.op_), " is not supported");
  }
  r.torch_op = op.op_;
  return r;
}

void Reduction::prescale(at::Tensor& t) const {
  if (premul_tensor.defined()) {
    t.mul_(premul_tensor.to(t.device()));
  } else if (premul) {
    t.mul_(*premul);
  }
}

at::Tensor Reduction::fold_rows(const at::Tensor& rows) const {
  using R = c10d::ReduceOp;
  const at::ScalarType s = rows.scalar_type();
  // Sums, products and bitwise operations on a same-width signed view: torch lacks some of them
  // on unsigned types (uint16-64), and two's complement gives the same bits.
  at::Tensor in = rows;
  if (torch_op != R::MIN && torch_op != R::MAX) {
    switch (s) {
      case at::kUInt16:
        in = rows.view(at::kShort);
        break;
      case at::kUInt32:
        in = rows.view(at::kInt);
        break;
      case at::kUInt64:
        in = rows.view(at::kLong);
        break;
      default:
        break;
    }
  }
  at::Tensor acc = in[0].clone();
  for (int64_t j = 1; j < in.size(0); ++j) {
    const at::Tensor row = in[j];
    switch (torch_op) {
      case R::SUM:
        acc.add_(row);
        break;
      case R::PRODUCT:
        acc.mul_(row);
        break;
      case R::MIN:
        at::minimum_out(acc, acc, row);
        break;
      case R::MAX:
        at::maximum_out(acc, acc, row);
        break;
      case R::BAND:
        acc.bitwise_and_(row);
        break;
      case R::BOR:
        acc.bitwise_or_(row);
        break;
      case R::BXOR:
        acc.bitwise_xor_(row);
        break;
      default:
        break;  // Reduction::of folds no other operation
    }
  }
  return acc.view(s);
}

namespace {

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

// A list with one tensor per rank, each of `like`'s dtype and element count.
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

// The root's list of one tensor per rank (gather_list, scatter_list), checked; null elsewhere,
// where torch passes no list.
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

// Tags kept for the backend's own point-to-point messages, on the communicator's point-to-point
// context, where the caller's send and recv have the others (which could never match them):
// all_to_all_single with split sizes, and monitored_barrier.
constexpr int kAlltoallTag = collx::Communicator::kMaxTag;
constexpr int kMonitorTag = collx::Communicator::kMaxTag - 1;
constexpr int kFirstReservedTag = kMonitorTag;

void check_tag(int tag, const char* op) {
  if (tag < 0 || tag >= kFirstReservedTag) {
    refuse(op, "tag ", tag, " is outside the range 0..", kFirstReservedTag - 1,
           " (collx's tags end at ", collx::Communicator::kMaxTag,
           "; the backend keeps the last two for itself)");
  }
}

// ---- contiguous buffers for collx, staged (in the pool's memory) where the caller's tensors
// are not ----

// A tensor collx only reads.
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

// A tensor collx only writes: a non-contiguous one gets a buffer copied back on completion.
at::Tensor write_buffer(const at::Tensor& t, StagingPool& pool, Staging& s) {
  if (t.is_contiguous()) {
    s.keep_alive.push_back(t);
    return t;
  }
  at::Tensor c = pool.take(t.sizes(), t.options());
  s.copy_back.emplace_back(t, c);
  return c;
}

// An output collx writes while it reads `input`: staged where the two share memory, as torch
// allows (an output that is the rank's own chunk of the input) and collx does not.
at::Tensor write_buffer_apart(const at::Tensor& t, const at::Tensor& input, StagingPool& pool,
                              Staging& s) {
  if (at::get_overlap_status(t, input) == at::MemOverlapStatus::No) return write_buffer(t, pool, s);
  at::Tensor c = pool.take(t.sizes(), t.options());
  s.copy_back.emplace_back(t, c);
  return c;
}

// A tensor collx reads and writes (in place).
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

// The list as the one block of memory it already is (contiguous tensors back to back in one
// storage, as torch.chunk of a contiguous tensor makes them), or nothing.
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

// A list of equal tensors collx reads as one block.
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

// A list of equal tensors collx writes as one block.
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

// all_to_all_single's split sizes (rows of dim 0 per rank) for t: the given ones, checked, or
// equal splits.
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

}  // namespace

// ---------------------------------------------------------------- CUDA tensors

CallMemory ProcessGroupCollx::memory_of(const Staging& s, const char* op) const {
  CallMemory memory;
  memory.options = host_;
  std::optional<at::Device> device;
  auto look = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().is_cpu()) {
      if (device) refuse(op, "CPU and CUDA tensors in one call");
      return;
    }
    if (device && *device != t.device()) {
      refuse(op, "tensors on ", *device, " and ", t.device(), " in one call");
    }
    device = t.device();
  };
  bool cpu = false;
  for (const at::Tensor& t : s.keep_alive) {
    if (t.defined() && t.device().is_cpu()) cpu = true;
    look(t);
  }
  for (const at::Tensor& t : s.outputs) {
    if (t.defined() && t.device().is_cpu()) cpu = true;
    look(t);
  }
  if (device && cpu) refuse(op, "CPU and CUDA tensors in one call");
#ifdef COLLX_TORCH_CUDA
  if (device) {
    // collx reads the inputs after the work enqueued on the device's current stream, and its
    // request completes once the result is complete on the device (collx/options.hpp).
    memory.device = device->index();
    memory.options.memory = collx::MemoryKind::device;
    memory.options.stream = c10::cuda::getCurrentCUDAStream(device->index()).stream();
  }
#endif
  return memory;
}

DeviceScope::DeviceScope(int device) {
#ifdef COLLX_TORCH_CUDA
  if (device >= 0) guard_.emplace(static_cast<c10::DeviceIndex>(device));
#else
  (void)device;
#endif
}

// ---------------------------------------------------------------- StagingPool

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

// ---------------------------------------------------------------- Receives

std::atomic<int> Receives::awaiting_{0};

namespace {
Enrolled<Receives> enrolled_receives;
}  // namespace

void Receives::enroll(const std::shared_ptr<Receives>& receives) {
  enrolled_receives.add(receives);
}

void Receives::advance_all() {
  for (const auto& receives : enrolled_receives.alive()) {
    std::lock_guard lock(receives->mutex_);
    for (auto& [key, queue] : receives->queues_)
      receives->advance_locked(queue, nullptr);
  }
}

bool receives_awaiting() {
  return Receives::awaiting();
}

void advance_receives() {
  Receives::advance_all();
}

std::shared_ptr<Receives::Pending> Receives::add(const at::Tensor& buffer, int source, int tag) {
  auto p = std::make_shared<Pending>();
  p->source = source;
  p->tag = tag;
  p->buffer = buffer;
  std::lock_guard lock(mutex_);
  auto& queue = queues_[{source, tag}];
  queue.push_back(p);
  awaiting_.fetch_add(1, std::memory_order_acq_rel);
  advance_locked(queue, p.get());
  return p;
}

bool Receives::advance(const std::shared_ptr<Pending>& p, bool block) {
  // Blocking: tests back to back for a while (a header usually follows soon), then sleeps
  // between tests, up to a millisecond, so that a long wait for a sender leaves the core.
  auto sleep = std::chrono::microseconds(0);
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard lock(mutex_);
      if (p->data_posted) return true;
      auto it = queues_.find({p->source, p->tag});
      if (advance_locked(it->second, p.get())) return true;
    }
    if (!block) return false;
    // A peer may need this rank's collectives posted before it sends the header.
    if (Sequence::waiting()) Sequence::advance_all();
    if (tries < 1000) {
      std::this_thread::yield();
    } else {
      sleep = std::min(std::max(sleep * 2, std::chrono::microseconds(10)),
                       std::chrono::microseconds(1000));
      std::this_thread::sleep_for(sleep);
    }
  }
}

bool Receives::advance_locked(std::deque<std::shared_ptr<Pending>>& queue, const Pending* p) {
  while (!queue.empty()) {
    Pending& head = *queue.front();
    if (!head.header_posted) {
      std::lock_guard post(*post_mutex_);
      head.header_request =
          comm_->irecv(head.header, 2, collx::DataType::int64, head.source, head.tag);
      head.header_posted = true;
    }
    bool arrived = false;
    try {
      arrived = head.header_request.test();
    } catch (const collx::Error& e) {
      // Out of step with the sender (its data where a header was expected): no data receive.
      head.error =
          std::make_exception_ptr(std::runtime_error(c10::str("collx backend: recv: ", e.what())));
      head.data_posted = true;
      awaiting_.fetch_sub(1, std::memory_order_acq_rel);
      queue.pop_front();
      continue;
    }
    if (!arrived) break;
    const int64_t elements = head.header[0];
    const auto dtype = static_cast<at::ScalarType>(head.header[1]);
    {
      std::lock_guard post(*post_mutex_);
      if (elements == head.buffer.numel() && dtype == head.buffer.scalar_type()) {
        head.data_request = comm_->irecv(head.buffer.data_ptr(), count_of(head.buffer, elements),
                                         data_type_of(head.buffer, "recv"), head.source, head.tag);
      } else {
        // Received whole, where no one reads it, then refused (no receive for a header that
        // cannot be one of ours).
        const bool known = dtype >= at::ScalarType::Byte && dtype < at::ScalarType::NumOptions &&
                           elements >= 0 && elements <= (int64_t{1} << 40);
        if (known && elements > 0) {
          const int64_t bytes = elements * static_cast<int64_t>(c10::elementSize(dtype));
          head.scratch = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
          head.data_request = comm_->irecv(head.scratch.data_ptr(), bytes, collx::DataType::uint8,
                                           head.source, head.tag);
        }
        head.error = std::make_exception_ptr(std::runtime_error(
            c10::str("collx backend: recv: the message from rank ", head.source, " (tag ", head.tag,
                     ") holds ", elements, " elements of ", dtype, ", this recv's tensor ",
                     head.buffer.numel(), " elements of ", head.buffer.scalar_type(),
                     ": send and recv must use tensors of the same size and dtype (the message was "
                     "received and dropped)")));
      }
    }
    head.data_posted = true;
    awaiting_.fetch_sub(1, std::memory_order_acq_rel);
    queue.pop_front();
  }
  return p != nullptr && p->data_posted;
}

// ---------------------------------------------------------------- Sequence

std::atomic<int> Sequence::waiting_{0};

namespace {
Enrolled<Sequence> enrolled_sequences;

// One key per (elements, dtype), ordered by elements; the MAX of {key, -key} is the group's
// largest and (negated) smallest key, the same on every rank.
constexpr int64_t kTypes = 64;
static_assert(static_cast<int64_t>(at::ScalarType::NumOptions) <= kTypes);
int64_t key_of(const Block& block) {
  return block.elements * kTypes + static_cast<int64_t>(block.dtype);
}

std::exception_ptr as_torch_error(const Sequence::Call& call, const char* what) {
  return std::make_exception_ptr(
      std::runtime_error(c10::str("collx backend: ", call.op, ": ", what)));
}
}  // namespace

void Sequence::enroll(const std::shared_ptr<Sequence>& sequence) {
  enrolled_sequences.add(sequence);
}

void Sequence::advance_all() {
  for (const auto& sequence : enrolled_sequences.alive()) {
    // Never waits for a sequence another thread is moving on (it may be this thread's launch).
    std::unique_lock lock(sequence->mutex_, std::try_to_lock);
    if (lock.owns_lock()) sequence->advance_locked(nullptr);
  }
}

bool sequences_waiting() {
  return Sequence::waiting();
}

void advance_sequences() {
  Sequence::advance_all();
}

void Sequence::queue_locked(const std::shared_ptr<Call>& call) {
  if (call->agree) {
    const int64_t key = key_of(call->block);
    call->range[0] = key;
    call->range[1] = -key;
  }
  queue_.push_back(call);
  waiting_.fetch_add(1, std::memory_order_acq_rel);
  advance_locked(nullptr);
}

void Sequence::pop_locked() {
  Call& head = *queue_.front();
  head.done = true;
  head.start = nullptr;  // what it held (the caller's tensors) is the work's to release
  waiting_.fetch_sub(1, std::memory_order_acq_rel);
  queue_.pop_front();
}

bool Sequence::advance_locked(const Call* call) {
  while (!queue_.empty()) {
    Call& head = *queue_.front();
    if (head.agree) {
      try {
        if (!head.agreement_posted) {
          std::lock_guard post(*post_mutex_);
          head.agreement = comm_->iallreduce(head.range, head.range, 2, collx::DataType::int64,
                                             collx::ReduceOp::max, host_);
          head.agreement_posted = true;
        }
        if (!head.agreement.test()) break;
      } catch (const collx::Error& e) {
        head.error = as_torch_error(head, e.what());
        pop_locked();
        continue;
      }
      const int64_t key = key_of(head.block);
      const int64_t largest = head.range[0];
      const int64_t smallest = -head.range[1];
      if (smallest != key || largest != key) {
        const int64_t other = largest != key ? largest : smallest;
        head.error = as_torch_error(
            head,
            c10::str("the ranks' ", head.block.what, "s differ in size or dtype (rank ",
                     comm_->rank(), " has ", head.block.elements, " elements of ", head.block.dtype,
                     ", another rank ", other / kTypes, " elements of ",
                     static_cast<at::ScalarType>(other % kTypes),
                     "): every rank of the group must pass tensors of the same size and dtype; "
                     "nothing was sent, on any rank")
                .c_str());
        pop_locked();
        continue;
      }
    }
    try {
      std::lock_guard post(*post_mutex_);
      head.requests = head.start();
    } catch (const collx::Error& e) {
      head.error = as_torch_error(head, e.what());
    } catch (...) {
      head.error = std::current_exception();
    }
    pop_locked();
  }
  return call != nullptr && call->done;
}

bool Sequence::advance(const std::shared_ptr<Call>& call, bool block) {
  if (!block) {
    // The completion thread, or a poll: never waits for a thread that holds the sequence.
    std::unique_lock lock(mutex_, std::try_to_lock);
    return lock.owns_lock() && (call->done || advance_locked(call.get()));
  }
  // Blocking. Where nothing else in the process waits to be posted (the usual blocking call),
  // the head's agreement is waited on in collx (Request::wait(): the engine's own waits). Else
  // the sequence is tested back to back for a while, then with yields and at last with sleeps
  // (up to a millisecond, so that a long wait for a peer leaves the core), and every other
  // receive and sequence moves on meanwhile: a peer may need them first.
  auto sleep = std::chrono::microseconds(0);
  for (int tries = 0;; ++tries) {
    {
      std::lock_guard lock(mutex_);
      if (call->done || advance_locked(call.get())) return true;
      Call& head = *queue_.front();
      if (head.agree && head.agreement.valid() && !receives_awaiting() &&
          waiting_.load(std::memory_order_acquire) == static_cast<int>(queue_.size())) {
        try {
          head.agreement.wait();  // then test() finds it complete
        } catch (const collx::Error& e) {
          head.error = as_torch_error(head, e.what());
          pop_locked();
        }
        continue;
      }
    }
    advance_receives();
    advance_all();
    if (tries < 100) continue;
    if (tries < 2000) {
      std::this_thread::yield();
    } else {
      sleep = std::min(std::max(sleep * 2, std::chrono::microseconds(10)),
                       std::chrono::microseconds(1000));
      std::this_thread::sleep_for(sleep);
    }
  }
}

// ---------------------------------------------------------------- ProcessGroupCollx

ProcessGroupCollx::ProcessGroupCollx(std::shared_ptr<collx::Communicator> comm)
    : BackendBase(comm->rank(), comm->size()), comm_(std::move(comm)) {
  host_.memory = collx::MemoryKind::host;
  receives_ = std::make_shared<Receives>(comm_, post_mutex_);
  Receives::enroll(receives_);
  sequence_ = std::make_shared<Sequence>(comm_, post_mutex_, host_);
  Sequence::enroll(sequence_);
}

template <class Start>
c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::launch(c10d::OpType type, const char* op,
                                                         Staging staging, Start&& start,
                                                         const Block* agree, bool point_to_point) {
  auto as_list = [](auto&& posted) {
    if constexpr (std::is_same_v<std::decay_t<decltype(posted)>, collx::Request>) {
      std::vector<collx::Request> list;
      list.push_back(std::move(posted));
      return list;
    } else {
      return std::vector<collx::Request>(std::move(posted));
    }
  };
  std::vector<collx::Request> requests;
  std::shared_ptr<Sequence::Call> call;
  const bool agrees = agree != nullptr && comm_->size() > 1;
  // Where the call's buffers live (CPU, or one CUDA device on its current stream).
  const CallMemory memory = memory_of(staging, op);
  try {
    std::unique_lock order(sequence_->mutex(), std::defer_lock);
    if (!point_to_point) order.lock();
    if (point_to_point || (!agrees && sequence_->idle_locked())) {
      std::lock_guard post(*post_mutex_);
      DeviceScope device(memory.device);
      requests = as_list(start(memory.options));
    } else {
      call = std::make_shared<Sequence::Call>();
      call->op = op;
      call->agree = agrees;
      if (agrees) call->block = *agree;
      call->start = [as_list, memory, start = std::forward<Start>(start)]() mutable {
        DeviceScope device(memory.device);
        return as_list(start(memory.options));
      };
      sequence_->queue_locked(call);
    }
  } catch (const collx::Error& e) {
    refuse(op, e.what());
  }
  // Small calls are left to their caller's wait() (work.hpp, Completer); a large one may be
  // waited on late, after the caller's computation, which the completion thread overlaps.
  int64_t bytes = 0;
  for (const at::Tensor& t : staging.keep_alive)
    bytes = std::max(bytes, static_cast<int64_t>(t.nbytes()));
  auto work = c10::make_intrusive<CollxWork>(comm_->rank(), type, op, std::move(requests),
                                             std::move(staging));
  if (call) {
    work->set_prelude([sequence = sequence_, call](bool block,
                                                   std::vector<collx::Request>& requests,
                                                   std::exception_ptr& error) {
      if (!sequence->advance(call, block)) return false;
      for (collx::Request& r : call->requests)
        requests.push_back(std::move(r));
      call->requests.clear();
      if (call->error && !error) error = call->error;
      return true;
    });
  }
  Completer::instance().add(work, bytes > kQuietBytes);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const char* op = "broadcast";
  const at::Tensor& t = single(tensors, op);
  if (opts.rootTensor != 0) refuse(op, "rootTensor must be 0 (one tensor per process)");
  const int root = rank_arg(opts.rootRank, op, "src");
  Staging s;
  s.outputs = {t};
  at::Tensor buf = update_buffer(t, pool_, s);
  return launch(c10d::OpType::BROADCAST, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  return comm->ibroadcast(buf.data_ptr(), count_of(t, buf.numel()),
                                          data_type_of(t, op), root, host);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const char* op = "all_reduce";
  const at::Tensor& t = single(tensors, op);
  const Reduction red = Reduction::of(opts.reduceOp, t, op);
  Staging s;
  s.outputs = {t};
  if (red.fold) {
    // Every rank's block gathered, then folded in rank order on every rank.
    at::Tensor src = read_buffer(t, pool_, s);
    at::Tensor rows = pool_.take({comm_->size(), t.numel()}, t.options());
    s.finish.push_back([red, rows, t]() mutable { t.copy_(red.fold_rows(rows).view(t.sizes())); });
    return launch(c10d::OpType::ALLREDUCE, op, std::move(s),
                  [=, comm = comm_](const collx::Options& host) {
                    return comm->iallgather(src.data_ptr(), rows.data_ptr(), count_of(t, t.numel()),
                                            data_type_of(t, op), host);
                  });
  }
  at::Tensor buf = update_buffer(t, pool_, s);
  red.prescale(buf);  // PREMUL_SUM: the result overwrites the scaled input
  return launch(c10d::OpType::ALLREDUCE, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  return comm->iallreduce(buf.data_ptr(), buf.data_ptr(), buf.numel() * red.units,
                                          red.type, red.op, host);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const char* op = "all_reduce_coalesced";
  if (tensors.empty()) refuse(op, "no tensors");
  int64_t total = 0;
  for (const at::Tensor& t : tensors) {
    check_same_kind(t, tensors.front(), op, "the tensor list");
    total += t.numel();
  }
  const Reduction red = Reduction::of(opts.reduceOp, tensors.front(), op);
  // One allreduce over the tensors laid end to end.
  Staging s;
  s.outputs = tensors;
  at::Tensor flat = pool_.take({total}, tensors.front().options());
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    at::Tensor piece = flat.narrow(0, offset, t.numel());
    piece.copy_(t.reshape({-1}));
    s.copy_back.emplace_back(t, piece.view(t.sizes()));
    offset += t.numel();
  }
  s.keep_alive.push_back(flat);
  const at::Tensor& like = tensors.front();
  if (red.fold) {
    at::Tensor rows = pool_.take({comm_->size(), total}, like.options());
    s.finish.push_back([red, rows, flat]() mutable { flat.copy_(red.fold_rows(rows)); });
    return launch(c10d::OpType::ALLREDUCE_COALESCED, op, std::move(s),
                  [=, comm = comm_](const collx::Options& host) {
                    return comm->iallgather(flat.data_ptr(), rows.data_ptr(), count_of(like, total),
                                            data_type_of(like, op), host);
                  });
  }
  red.prescale(flat);
  return launch(c10d::OpType::ALLREDUCE_COALESCED, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  return comm->iallreduce(flat.data_ptr(), flat.data_ptr(), total * red.units,
                                          red.type, red.op, host);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  const at::Tensor& t = single(tensors, op);
  if (opts.rootTensor != 0) refuse(op, "rootTensor must be 0 (one tensor per process)");
  const int root = rank_arg(opts.rootRank, op, "dst");
  const Reduction red = Reduction::of(opts.reduceOp, t, op);
  const bool is_root = comm_->rank() == root;
  Staging s;
  s.outputs = {t};
  if (red.fold) {
    at::Tensor src = read_buffer(t, pool_, s);
    at::Tensor rows;
    if (is_root) {
      rows = pool_.take({comm_->size(), t.numel()}, t.options());
      s.finish.push_back(
          [red, rows, t]() mutable { t.copy_(red.fold_rows(rows).view(t.sizes())); });
    }
    return launch(c10d::OpType::REDUCE, op, std::move(s),
                  [=, comm = comm_](const collx::Options& host) {
                    return comm->igather(src.data_ptr(), is_root ? rows.data_ptr() : nullptr,
                                         count_of(t, t.numel()), data_type_of(t, op), root, host);
                  });
  }
  // Only the root's tensor is written (in place); the others are only read (PREMUL_SUM: a scaled
  // copy of theirs).
  at::Tensor buf;
  if (is_root) {
    buf = update_buffer(t, pool_, s);
    red.prescale(buf);
  } else if (red.scaled()) {
    buf = pool_.take(t.sizes(), t.options());
    buf.copy_(t);
    red.prescale(buf);
    s.keep_alive.push_back(buf);
  } else {
    buf = read_buffer(t, pool_, s);
  }
  return launch(c10d::OpType::REDUCE, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  return comm->ireduce(buf.data_ptr(), is_root ? buf.data_ptr() : nullptr,
                                       buf.numel() * red.units, red.type, red.op, root, host);
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "all_gather";
  const at::Tensor& in = single(inputs, op);
  if (outputs.size() != 1) refuse(op, "takes one output list per process, got ", outputs.size());
  check_list(outputs[0], comm_->size(), in, op, "the output list");
  // Every rank takes the same path (a rank's way of sending must match its peers' way of
  // receiving), so the choice depends on the block's size only, never on the list's layout.
  if (comm_->size() > 1 && in.numel() * static_cast<int64_t>(in.element_size()) >= kExchangeBytes)
    return allgather_broadcasts(outputs[0], in);
  Staging s;
  s.outputs = outputs[0];
  at::Tensor src = read_buffer(in, pool_, s);
  at::Tensor dst = write_list(outputs[0], pool_, s);
  const Block block{in.numel(), in.scalar_type(), "input tensor"};
  return launch(
      c10d::OpType::ALLGATHER, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->iallgather(src.data_ptr(), dst.data_ptr(), count_of(in, src.numel()),
                                data_type_of(in, op), host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allgather_broadcasts(
    const std::vector<at::Tensor>& outputs, const at::Tensor& in) {
  const char* op = "all_gather";
  const int rank = comm_->rank();
  const int size = comm_->size();
  Staging s;
  s.outputs = outputs;
  at::Tensor src = read_buffer(in, pool_, s);
  // An input that shares memory with another rank's slot would be overwritten while it is sent.
  for (int j = 0; j < size; ++j) {
    if (j != rank && at::get_overlap_status(outputs[j], src) != at::MemOverlapStatus::No) {
      at::Tensor copy = pool_.take(src.sizes(), src.options());
      copy.copy_(src);
      src = copy;
      s.keep_alive.push_back(src);
      break;
    }
  }
  // The other ranks' blocks land in their tensors (staged only where one is not contiguous);
  // this rank's is a local copy (none where the input is its own slot, the in-place form), made
  // below.
  std::vector<at::Tensor> dst(static_cast<std::size_t>(size));
  for (int j = 0; j < size; ++j) {
    if (j != rank) dst[static_cast<std::size_t>(j)] = write_buffer(outputs[j], pool_, s);
  }
  const collx::DataType type = data_type_of(in, op);
  const Block block{in.numel(), in.scalar_type(), "input tensor"};
  return launch(
      c10d::OpType::ALLGATHER, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        // One broadcast per rank, in rank order on every rank, all in flight at once: rank j's
        // input lands straight in block j of every other rank's list.
        std::vector<collx::Request> requests;
        requests.reserve(static_cast<std::size_t>(size));
        for (int j = 0; j < size; ++j) {
          const at::Tensor& block = j == rank ? src : dst[static_cast<std::size_t>(j)];
          requests.push_back(
              comm->ibroadcast(block.data_ptr(), count_of(in, block.numel()), type, j, host));
        }
        // This rank's own block once the broadcasts are posted, so the peers read this rank's
        // input meanwhile; before the work can complete (its prelude, or launch(), runs this
        // before the work tests a request).
        if (!outputs[rank].is_same(in)) outputs[rank].copy_(in);
        return requests;
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "all_gather_into_tensor";
  check_tensor(input, op);
  check_same_kind(output, input, op, "the output tensor");
  check_numel(output, input.numel() * comm_->size(), op, "the output tensor");
  Staging s;
  s.outputs = {output};
  at::Tensor src = read_buffer(input, pool_, s);
  at::Tensor dst = write_buffer(output, pool_, s);
  const Block block{input.numel(), input.scalar_type(), "input tensor"};
  return launch(
      c10d::OpType::_ALLGATHER_BASE, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->iallgather(src.data_ptr(), dst.data_ptr(), count_of(input, src.numel()),
                                data_type_of(input, op), host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "all_gather_into_tensor (coalesced)";
  if (outputs.size() != inputs.size()) {
    refuse(op, outputs.size(), " outputs for ", inputs.size(), " inputs");
  }
  Staging s;
  s.outputs = outputs;
  std::vector<at::Tensor> src, dst;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(inputs[i], op);
    check_same_kind(outputs[i], inputs[i], op, "an output tensor");
    check_numel(outputs[i], inputs[i].numel() * comm_->size(), op, "an output tensor");
    src.push_back(read_buffer(inputs[i], pool_, s));
    dst.push_back(write_buffer(outputs[i], pool_, s));
  }
  // One allgather per pair, all in flight at once.
  return launch(c10d::OpType::COALESCED, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  std::vector<collx::Request> requests;
                  for (std::size_t i = 0; i < src.size(); ++i) {
                    requests.push_back(comm->iallgather(src[i].data_ptr(), dst[i].data_ptr(),
                                                        count_of(src[i], src[i].numel()),
                                                        data_type_of(src[i], op), host));
                  }
                  return requests;
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor (coalesced)";
  if (outputs.size() != inputs.size()) {
    refuse(op, outputs.size(), " outputs for ", inputs.size(), " inputs");
  }
  Staging s;
  s.outputs = outputs;
  std::vector<at::Tensor> src, dst;
  std::vector<Reduction> reductions;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(outputs[i], op);
    check_same_kind(inputs[i], outputs[i], op, "an input tensor");
    check_numel(inputs[i], outputs[i].numel() * comm_->size(), op, "an input tensor");
    Reduction red = Reduction::of(opts.reduceOp, outputs[i], op);
    if (red.fold) {
      refuse(op, "ReduceOp on ", outputs[i].scalar_type(),
             " tensors is folded, not reduced by collx: call reduce_scatter_tensor one by one");
    }
    at::Tensor in = read_buffer(inputs[i], pool_, s);
    if (red.scaled()) {
      at::Tensor scaled = pool_.take(in.sizes(), in.options());
      scaled.copy_(in);
      red.prescale(scaled);
      in = scaled;
      s.keep_alive.push_back(in);
    }
    src.push_back(in);
    dst.push_back(write_buffer_apart(outputs[i], in, pool_, s));
    reductions.push_back(std::move(red));
  }
  return launch(c10d::OpType::COALESCED, op, std::move(s),
                [=, comm = comm_](const collx::Options& host) {
                  std::vector<collx::Request> requests;
                  for (std::size_t i = 0; i < src.size(); ++i) {
                    const Reduction& red = reductions[i];
                    requests.push_back(comm->ireduce_scatter(src[i].data_ptr(), dst[i].data_ptr(),
                                                             dst[i].numel() * red.units, red.type,
                                                             red.op, host));
                  }
                  return requests;
                });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* op = "gather";
  const at::Tensor& in = single(inputs, op);
  const int root = rank_arg(opts.rootRank, op, "dst");
  const bool is_root = comm_->rank() == root;
  Staging s;
  at::Tensor dst;
  if (const auto* list = root_list(outputs, is_root, comm_->size(), in, op, "gather_list")) {
    s.outputs = *list;
    dst = write_list(*list, pool_, s);
  }
  at::Tensor src = read_buffer(in, pool_, s);
  const Block block{in.numel(), in.scalar_type(), "input tensor"};
  return launch(
      c10d::OpType::GATHER, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->igather(src.data_ptr(), is_root ? dst.data_ptr() : nullptr,
                             count_of(in, src.numel()), data_type_of(in, op), root, host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* op = "scatter";
  const at::Tensor& out = single(outputs, op);
  const int root = rank_arg(opts.rootRank, op, "src");
  const bool is_root = comm_->rank() == root;
  Staging s;
  s.outputs = {out};
  at::Tensor src;
  if (const auto* list = root_list(inputs, is_root, comm_->size(), out, op, "scatter_list")) {
    src = read_list(*list, pool_, s);
  }
  at::Tensor dst = write_buffer(out, pool_, s);
  const Block block{out.numel(), out.scalar_type(), "output tensor"};
  return launch(
      c10d::OpType::SCATTER, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->iscatter(is_root ? src.data_ptr() : nullptr, dst.data_ptr(),
                              count_of(out, dst.numel()), data_type_of(out, op), root, host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter";
  const at::Tensor& out = single(outputs, op);
  if (inputs.size() != 1) refuse(op, "takes one input list per process, got ", inputs.size());
  check_list(inputs[0], comm_->size(), out, op, "the input list");
  const Reduction red = Reduction::of(opts.reduceOp, out, op);
  Staging s;
  s.outputs = {out};
  at::Tensor src = read_list(inputs[0], pool_, s);
  return reduce_scatter_flat(c10d::OpType::REDUCE_SCATTER, op, std::move(s), red, src, out);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  check_tensor(output, op);
  check_same_kind(input, output, op, "the input tensor");
  check_numel(input, output.numel() * comm_->size(), op, "the input tensor");
  const Reduction red = Reduction::of(opts.reduceOp, output, op);
  Staging s;
  s.outputs = {output};
  at::Tensor src = read_buffer(input, pool_, s);
  return reduce_scatter_flat(c10d::OpType::_REDUCE_SCATTER_BASE, op, std::move(s), red, src,
                             output);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce_scatter_flat(c10d::OpType type,
                                                                      const char* op, Staging s,
                                                                      const Reduction& red,
                                                                      at::Tensor src,
                                                                      const at::Tensor& out) {
  const Block block{out.numel(), out.scalar_type(), "output tensor"};
  if (red.fold) {
    // Block j of every rank's input comes to rank j (alltoall), which folds them in rank order.
    at::Tensor rows = pool_.take({comm_->size(), out.numel()}, out.options());
    s.finish.push_back(
        [red, rows, out]() mutable { out.copy_(red.fold_rows(rows).view(out.sizes())); });
    return launch(
        type, op, std::move(s),
        [=, comm = comm_](const collx::Options& host) {
          return comm->ialltoall(src.data_ptr(), rows.data_ptr(), count_of(out, out.numel()),
                                 data_type_of(out, op), host);
        },
        &block);
  }
  if (red.scaled()) {
    at::Tensor scaled = pool_.take(src.sizes(), src.options());
    scaled.copy_(src);
    red.prescale(scaled);
    src = scaled;
    s.keep_alive.push_back(src);
  }
  at::Tensor dst = write_buffer_apart(out, src, pool_, s);
  return launch(
      type, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->ireduce_scatter(src.data_ptr(), dst.data_ptr(), dst.numel() * red.units,
                                     red.type, red.op, host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& /*opts*/) {
  const char* op = "all_to_all_single";
  check_tensor(input, op);
  check_same_kind(output, input, op, "the output tensor");
  const int size = comm_->size();
  const int rank = comm_->rank();
  const std::vector<int64_t> in_rows = split_rows(input, input_split_sizes, size, op, "input");
  const std::vector<int64_t> out_rows = split_rows(output, output_split_sizes, size, op, "output");
  // Elements per row (dim 0) of each tensor; both must agree.
  const int64_t row = input.dim() <= 1 ? 1 : c10::multiply_integers(input.sizes().slice(1));
  const int64_t out_row = output.dim() <= 1 ? 1 : c10::multiply_integers(output.sizes().slice(1));
  if (row != out_row) {
    refuse(op, "the input's rows hold ", row, " elements, the output's ", out_row);
  }
  Staging s;
  s.outputs = {output};
  at::Tensor src = read_buffer(input, pool_, s);
  at::Tensor dst = write_buffer_apart(output, src, pool_, s);
  const collx::DataType type = data_type_of(input, op);
  if (input_split_sizes.empty() && output_split_sizes.empty()) {
    // Equal blocks: collx's alltoall, once the ranks agree on the block.
    check_numel(output, input.numel(), op, "the output tensor");
    const int64_t block_elements = in_rows[0] * row;
    const Block block{block_elements, input.scalar_type(), "per-rank block"};
    return launch(
        c10d::OpType::ALLTOALL_BASE, op, std::move(s),
        [=, comm = comm_](const collx::Options& host) {
          return comm->ialltoall(src.data_ptr(), dst.data_ptr(), count_of(input, block_elements),
                                 type, host);
        },
        &block);
  }
  if (!input.device().is_cpu()) {
    refuse(op, "split sizes with tensors on ", input.device(),
           " (the point-to-point path takes "
           "CPU tensors; equal splits without split sizes take CUDA tensors)");
  }
  // Split sizes given: block j of the input goes to rank j as one point-to-point message (on
  // the backend's own tag), every receive posted before its send, and this rank's own block is
  // copied. The sizes are taken on trust, as MPI_Alltoallv does: a peer's larger block is an
  // error on the receiving rank, a smaller one fills part of its rows.
  if (in_rows[static_cast<std::size_t>(rank)] != out_rows[static_cast<std::size_t>(rank)]) {
    refuse(op, "this rank sends itself ", in_rows[static_cast<std::size_t>(rank)],
           " rows but receives ", out_rows[static_cast<std::size_t>(rank)], " from itself");
  }
  std::vector<int64_t> in_offset(static_cast<std::size_t>(size) + 1, 0);
  std::vector<int64_t> out_offset(static_cast<std::size_t>(size) + 1, 0);
  for (std::size_t j = 0; j < static_cast<std::size_t>(size); ++j) {
    in_offset[j + 1] = in_offset[j] + in_rows[j] * row;
    out_offset[j + 1] = out_offset[j] + out_rows[j] * row;
  }
  at::Tensor src_flat = src.reshape({-1});
  at::Tensor dst_flat = dst.reshape({-1});
  return launch(
      c10d::OpType::ALLTOALL_BASE, op, std::move(s),
      [=, comm = comm_](const collx::Options& /*host*/) {
        const auto piece = [&](const at::Tensor& flat, const std::vector<int64_t>& off, int j) {
          const auto k = static_cast<std::size_t>(j);
          return flat.narrow(0, off[k], off[k + 1] - off[k]);
        };
        std::vector<collx::Request> requests;
        for (int step = 1; step < size; ++step) {
          const int from = (rank - step + size) % size;
          at::Tensor in = piece(dst_flat, out_offset, from);
          requests.push_back(
              comm->irecv(in.data_ptr(), count_of(input, in.numel()), type, from, kAlltoallTag));
        }
        for (int step = 1; step < size; ++step) {
          const int to = (rank + step) % size;
          at::Tensor out = piece(src_flat, in_offset, to);
          requests.push_back(
              comm->isend(out.data_ptr(), count_of(input, out.numel()), type, to, kAlltoallTag));
        }
        piece(dst_flat, out_offset, rank).copy_(piece(src_flat, in_offset, rank));
        return requests;
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& /*opts*/) {
  const char* op = "all_to_all";
  if (inputs.empty()) refuse(op, "empty input list");
  check_list(inputs, comm_->size(), inputs.front(), op, "the input list");
  check_list(outputs, comm_->size(), inputs.front(), op, "the output list");
  Staging s;
  s.outputs = outputs;
  at::Tensor dst = write_list(outputs, pool_, s);
  at::Tensor src = read_list(inputs, pool_, s);
  // Lists that share memory: the input read from a copy.
  if (at::get_overlap_status(dst, src) != at::MemOverlapStatus::No) {
    at::Tensor copy = pool_.take(src.sizes(), src.options());
    copy.copy_(src);
    src = copy;
    s.keep_alive.push_back(src);
  }
  const Block block{inputs.front().numel(), inputs.front().scalar_type(), "input tensor"};
  return launch(
      c10d::OpType::ALLTOALL, op, std::move(s),
      [=, comm = comm_](const collx::Options& host) {
        return comm->ialltoall(src.data_ptr(), dst.data_ptr(),
                               count_of(inputs.front(), inputs.front().numel()),
                               data_type_of(inputs.front(), op), host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::send(std::vector<at::Tensor>& tensors,
                                                       int dst_rank, int tag) {
  const char* op = "send";
  const at::Tensor& t = single(tensors, op);
  if (!t.device().is_cpu()) {
    refuse(op, "a tensor on ", t.device(),
           ": send and recv take CPU tensors (collx's point-to-point "
           "messages are in host memory)");
  }
  check_tag(tag, op);
  Staging s;
  at::Tensor src = read_buffer(t, pool_, s);
  // The header (Receives), then the data, on the same tag: MPI keeps their order.
  at::Tensor header = at::empty({2}, at::TensorOptions().dtype(at::kLong));
  header[0] = src.numel();
  header[1] = static_cast<int64_t>(src.scalar_type());
  s.keep_alive.push_back(header);
  return launch(
      c10d::OpType::SEND, op, std::move(s),
      [&](const collx::Options& /*host*/) {
        std::vector<collx::Request> requests;
        requests.push_back(
            comm_->isend(header.data_ptr(), 2, collx::DataType::int64, dst_rank, tag));
        requests.push_back(comm_->isend(src.data_ptr(), count_of(t, src.numel()),
                                        data_type_of(t, op), dst_rank, tag));
        return requests;
      },
      nullptr, /*point_to_point=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::recv(std::vector<at::Tensor>& tensors,
                                                       int src_rank, int tag) {
  const char* op = "recv";
  const at::Tensor& t = single(tensors, op);
  if (!t.device().is_cpu()) {
    refuse(op, "a tensor on ", t.device(),
           ": send and recv take CPU tensors (collx's point-to-point "
           "messages are in host memory)");
  }
  check_tag(tag, op);
  if (src_rank < 0 || src_rank >= comm_->size()) refuse(op, "invalid src ", src_rank);
  Staging s;
  s.outputs = {t};
  at::Tensor dst = write_buffer(t, pool_, s);
  std::shared_ptr<Receives::Pending> pending;
  try {
    pending = receives_->add(dst, src_rank, tag);
  } catch (const collx::Error& e) {
    refuse(op, e.what());
  }
  auto work = c10::make_intrusive<CollxWork>(comm_->rank(), c10d::OpType::RECV, op,
                                             std::vector<collx::Request>{}, std::move(s));
  work->set_prelude([receives = receives_, pending](bool block,
                                                    std::vector<collx::Request>& requests,
                                                    std::exception_ptr& error) {
    if (!receives->advance(pending, block)) return false;
    if (pending->data_request.valid()) requests.push_back(std::move(pending->data_request));
    if (pending->error && !error) error = pending->error;
    return true;
  });
  Completer::instance().add(work, dst.nbytes() > static_cast<std::size_t>(kQuietBytes));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::recvAnysource(
    std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  refuse("recv",
         "a receive from any source (src=None) is not supported: collx receives from a "
         "named rank");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::barrier(const c10d::BarrierOptions& /*opts*/) {
  return launch(c10d::OpType::BARRIER, "barrier", Staging{},
                [=, comm = comm_](const collx::Options& host) { return comm->ibarrier(host); });
}

// gloo's protocol: every other rank sends rank 0 a token and waits for its answer; rank 0 waits
// for the tokens until the timeout, then answers every rank (1: passed, 0: failed), so a rank
// that comes late still finds its token received and its answer sent. What is still in flight
// when this rank gives up is kept (monitor_) until it completes or the group is freed.
void ProcessGroupCollx::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const char* op = "monitored_barrier";
  const int size = comm_->size();
  const int rank = comm_->rank();
  if (size == 1) return;
  const auto timeout =
      opts.timeout.count() > 0 ? opts.timeout : std::chrono::milliseconds(30 * 60 * 1000);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto buffers = std::make_shared<std::vector<uint8_t>>(static_cast<std::size_t>(2 * size), 0);
  uint8_t* token = buffers->data();          // [j]: rank j's token (rank 0), or this rank's
  uint8_t* answer = buffers->data() + size;  // [j]: rank 0's answer to rank j
  std::vector<collx::Request> requests;
  // Tests `requests[first..]` until all complete or the deadline; returns those still in flight.
  auto wait_until = [&](std::size_t first) {
    std::vector<std::size_t> open;
    for (;;) {
      open.clear();
      for (std::size_t i = first; i < requests.size(); ++i) {
        if (requests[i].valid() && !requests[i].test()) open.push_back(i);
      }
      if (open.empty() || std::chrono::steady_clock::now() >= deadline) return open;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  };
  auto keep = [&] {
    std::lock_guard lock(monitor_mutex_);
    monitor_.push_back({buffers, std::move(requests)});
  };
  try {
    if (rank == 0) {
      {
        std::lock_guard post(*post_mutex_);
        for (int j = 1; j < size; ++j)
          requests.push_back(comm_->irecv(token + j, 1, collx::DataType::uint8, j, kMonitorTag));
      }
      const std::vector<std::size_t> missing = wait_until(0);
      const uint8_t passed = missing.empty() ? 1 : 0;
      {
        std::lock_guard post(*post_mutex_);
        for (int j = 1; j < size; ++j) {
          answer[j] = passed;
          requests.push_back(comm_->isend(answer + j, 1, collx::DataType::uint8, j, kMonitorTag));
        }
      }
      if (!missing.empty()) {
        std::string ranks;
        const std::size_t shown = wait_all_ranks ? missing.size() : 1;
        for (std::size_t i = 0; i < shown; ++i)
          ranks += (i ? ", " : "") + std::to_string(missing[i] + 1);
        keep();
        refuse(op, wait_all_ranks ? "ranks " : "rank ", ranks,
               " failed to pass monitoredBarrier in ", timeout.count(), " ms");
      }
      const std::size_t answers = requests.size() - static_cast<std::size_t>(size - 1);
      if (!wait_until(answers).empty()) {
        keep();
        refuse(op, "a rank did not take rank 0's answer within ", timeout.count(), " ms");
      }
    } else {
      token[0] = 1;
      {
        std::lock_guard post(*post_mutex_);
        requests.push_back(comm_->irecv(answer, 1, collx::DataType::uint8, 0, kMonitorTag));
        requests.push_back(comm_->isend(token, 1, collx::DataType::uint8, 0, kMonitorTag));
      }
      if (!wait_until(0).empty()) {
        keep();
        refuse(op, "rank 0 did not answer within ", timeout.count(), " ms");
      }
      if (answer[0] != 1) {
        refuse(op, "rank 0 reports that another rank failed to pass monitoredBarrier in time");
      }
    }
  } catch (const collx::Error& e) {
    keep();
    refuse(op, e.what());
  }
}

}  // namespace collx_torch
