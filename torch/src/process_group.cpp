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

collx::DataType data_type_of(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat: return collx::DataType::float32;
    case at::kDouble: return collx::DataType::float64;
    case at::kHalf: return collx::DataType::float16;
    case at::kBFloat16: return collx::DataType::bfloat16;
    case at::kChar: return collx::DataType::int8;
    case at::kByte: return collx::DataType::uint8;
    case at::kInt: return collx::DataType::int32;
    case at::kLong: return collx::DataType::int64;
    default: break;
  }
  refuse(op, "tensors of dtype ", t.scalar_type(),
         " are not supported (collx takes float32, float64, float16, bfloat16, int8, uint8, int32, "
         "int64)");
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

collx::ReduceOp reduce_op_of(const c10d::ReduceOp& op, const at::Tensor& t, const char* name) {
  collx::ReduceOp result;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: result = collx::ReduceOp::sum; break;
    case c10d::ReduceOp::AVG: result = collx::ReduceOp::avg; break;
    case c10d::ReduceOp::PRODUCT: result = collx::ReduceOp::prod; break;
    case c10d::ReduceOp::MIN: result = collx::ReduceOp::min; break;
    case c10d::ReduceOp::MAX: result = collx::ReduceOp::max; break;
    default:
      refuse(name, "ReduceOp.", torch_op_name(op.op_),
             " is not supported (collx reduces with SUM, AVG, PRODUCT, MIN and MAX)");
  }
  if (!collx::is_supported(data_type_of(t, name), result)) {
    refuse(name, "ReduceOp.", torch_op_name(op.op_), " on ", t.scalar_type(),
           " tensors is not supported (collx averages floating-point tensors only)");
  }
  return result;
}

void check_tensor(const at::Tensor& t, const char* op) {
  if (!t.defined()) refuse(op, "undefined tensor");
  if (!t.device().is_cpu()) {
    refuse(op, "a tensor on ", t.device(),
           ": this build of the collx backend takes CPU tensors only");
  }
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

// A tag kept for the backend's own point-to-point messages (all_gather's list form used it until
// 27 November; none does now), on the communicator's point-to-point context, where the caller's
// send and recv have the others: the two could never match each other's messages.
constexpr int kExchangeTag = collx::Communicator::kMaxTag;

void check_tag(int tag, const char* op) {
  if (tag < 0 || tag >= kExchangeTag) {
    refuse(op, "tag ", tag, " is outside the range 0..", kExchangeTag - 1, " (collx's tags end at ",
           collx::Communicator::kMaxTag, ", which the backend keeps for itself)");
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

// Elements per rank of all_to_all_single: dim 0 split equally (collx's alltoall moves blocks of
// one size).
int64_t alltoall_block(const at::Tensor& t, const std::vector<int64_t>& splits, int ranks,
                       const char* op, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % ranks != 0) {
      refuse(op, what, " has ", rows, " rows, not divisible by the group's ", ranks, " ranks");
    }
  } else {
    if (splits.size() != static_cast<std::size_t>(ranks)) {
      refuse(op, what, " split sizes list ", splits.size(), " entries for ", ranks, " ranks");
    }
    for (int64_t split : splits) {
      if (split * ranks != rows) {
        refuse(op, "uneven ", what, " split sizes are not supported (collx's alltoall moves ",
               "blocks of equal size: give ", rows / ranks, " rows to every rank)");
      }
    }
  }
  return rows == 0 ? 0 : t.numel() / rows * (rows / ranks);
}

}  // namespace

// ---------------------------------------------------------------- StagingPool

at::Tensor StagingPool::take(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const int64_t bytes =
      c10::multiply_integers(sizes) * static_cast<int64_t>(options.dtype().itemsize());
  if (bytes == 0) return at::empty(sizes, options);
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
        head.data_request = comm_->irecv(head.buffer.data_ptr(), elements,
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
  try {
    std::unique_lock order(sequence_->mutex(), std::defer_lock);
    if (!point_to_point) order.lock();
    if (point_to_point || (!agrees && sequence_->idle_locked())) {
      std::lock_guard post(*post_mutex_);
      requests = as_list(start());
    } else {
      call = std::make_shared<Sequence::Call>();
      call->op = op;
      call->agree = agrees;
      if (agrees) call->block = *agree;
      call->start = [as_list, start = std::forward<Start>(start)]() mutable {
        return as_list(start());
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
  return launch(c10d::OpType::BROADCAST, op, std::move(s), [=, comm = comm_, host = host_] {
    return comm->ibroadcast(buf.data_ptr(), buf.numel(), data_type_of(t, op), root, host);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const char* op = "all_reduce";
  const at::Tensor& t = single(tensors, op);
  const collx::ReduceOp rop = reduce_op_of(opts.reduceOp, t, op);
  Staging s;
  s.outputs = {t};
  at::Tensor buf = update_buffer(t, pool_, s);
  return launch(c10d::OpType::ALLREDUCE, op, std::move(s), [=, comm = comm_, host = host_] {
    return comm->iallreduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), data_type_of(t, op), rop,
                             host);
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
  const collx::ReduceOp rop = reduce_op_of(opts.reduceOp, tensors.front(), op);
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
  return launch(c10d::OpType::ALLREDUCE_COALESCED, op, std::move(s), [=, comm = comm_, host = host_] {
    return comm->iallreduce(flat.data_ptr(), flat.data_ptr(), total,
                             data_type_of(tensors.front(), op), rop, host);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const char* op = "reduce";
  const at::Tensor& t = single(tensors, op);
  if (opts.rootTensor != 0) refuse(op, "rootTensor must be 0 (one tensor per process)");
  const int root = rank_arg(opts.rootRank, op, "dst");
  const collx::ReduceOp rop = reduce_op_of(opts.reduceOp, t, op);
  Staging s;
  s.outputs = {t};
  // Only the root's tensor is written (in place); the others are only read.
  at::Tensor buf = comm_->rank() == root ? update_buffer(t, pool_, s) : read_buffer(t, pool_, s);
  return launch(c10d::OpType::REDUCE, op, std::move(s), [=, comm = comm_, host = host_] {
    return comm->ireduce(buf.data_ptr(), comm->rank() == root ? buf.data_ptr() : nullptr,
                          buf.numel(), data_type_of(t, op), rop, root, host);
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
      [=, comm = comm_, host = host_] {
        return comm->iallgather(src.data_ptr(), dst.data_ptr(), src.numel(), data_type_of(in, op),
                                 host);
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
      [=, comm = comm_, host = host_] {
        // One broadcast per rank, in rank order on every rank, all in flight at once: rank j's
        // input lands straight in block j of every other rank's list.
        std::vector<collx::Request> requests;
        requests.reserve(static_cast<std::size_t>(size));
        for (int j = 0; j < size; ++j) {
          const at::Tensor& block = j == rank ? src : dst[static_cast<std::size_t>(j)];
          requests.push_back(comm->ibroadcast(block.data_ptr(), block.numel(), type, j, host));
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
      [=, comm = comm_, host = host_] {
        return comm->iallgather(src.data_ptr(), dst.data_ptr(), src.numel(),
                                 data_type_of(input, op), host);
      },
      &block);
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
      [=, comm = comm_, host = host_] {
        return comm->igather(src.data_ptr(), is_root ? dst.data_ptr() : nullptr, src.numel(),
                              data_type_of(in, op), root, host);
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
      [=, comm = comm_, host = host_] {
        return comm->iscatter(is_root ? src.data_ptr() : nullptr, dst.data_ptr(), dst.numel(),
                               data_type_of(out, op), root, host);
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
  const collx::ReduceOp rop = reduce_op_of(opts.reduceOp, out, op);
  Staging s;
  s.outputs = {out};
  at::Tensor src = read_list(inputs[0], pool_, s);
  at::Tensor dst = write_buffer_apart(out, src, pool_, s);
  const Block block{out.numel(), out.scalar_type(), "output tensor"};
  return launch(
      c10d::OpType::REDUCE_SCATTER, op, std::move(s),
      [=, comm = comm_, host = host_] {
        return comm->ireduce_scatter(src.data_ptr(), dst.data_ptr(), dst.numel(),
                                      data_type_of(out, op), rop, host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor";
  check_tensor(output, op);
  check_same_kind(input, output, op, "the input tensor");
  check_numel(input, output.numel() * comm_->size(), op, "the input tensor");
  const collx::ReduceOp rop = reduce_op_of(opts.reduceOp, output, op);
  Staging s;
  s.outputs = {output};
  at::Tensor src = read_buffer(input, pool_, s);
  at::Tensor dst = write_buffer_apart(output, src, pool_, s);
  const Block block{output.numel(), output.scalar_type(), "output tensor"};
  return launch(
      c10d::OpType::_REDUCE_SCATTER_BASE, op, std::move(s),
      [=, comm = comm_, host = host_] {
        return comm->ireduce_scatter(src.data_ptr(), dst.data_ptr(), dst.numel(),
                                      data_type_of(output, op), rop, host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& /*opts*/) {
  const char* op = "all_to_all_single";
  check_tensor(input, op);
  check_same_kind(output, input, op, "the output tensor");
  check_numel(output, input.numel(), op, "the output tensor");
  const int64_t block_elements =
      alltoall_block(input, input_split_sizes, comm_->size(), op, "input");
  alltoall_block(output, output_split_sizes, comm_->size(), op, "output");
  Staging s;
  s.outputs = {output};
  at::Tensor src = read_buffer(input, pool_, s);
  at::Tensor dst = write_buffer_apart(output, src, pool_, s);
  const Block block{block_elements, input.scalar_type(), "per-rank block"};
  return launch(
      c10d::OpType::ALLTOALL_BASE, op, std::move(s),
      [=, comm = comm_, host = host_] {
        return comm->ialltoall(src.data_ptr(), dst.data_ptr(), block_elements,
                                data_type_of(input, op), host);
      },
      &block);
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
      [=, comm = comm_, host = host_] {
        return comm->ialltoall(src.data_ptr(), dst.data_ptr(), inputs.front().numel(),
                                data_type_of(inputs.front(), op), host);
      },
      &block);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::send(std::vector<at::Tensor>& tensors,
                                                       int dst_rank, int tag) {
  const char* op = "send";
  const at::Tensor& t = single(tensors, op);
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
      [&] {
        std::vector<collx::Request> requests;
        requests.push_back(
            comm_->isend(header.data_ptr(), 2, collx::DataType::int64, dst_rank, tag));
        requests.push_back(
            comm_->isend(src.data_ptr(), src.numel(), data_type_of(t, op), dst_rank, tag));
        return requests;
      },
      nullptr, /*point_to_point=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCollx::recv(std::vector<at::Tensor>& tensors,
                                                       int src_rank, int tag) {
  const char* op = "recv";
  const at::Tensor& t = single(tensors, op);
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
                [=, comm = comm_, host = host_] { return comm->ibarrier(host); });
}

}  // namespace collx_torch
