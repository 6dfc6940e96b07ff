// collx as a torch.distributed backend: a c10d process group whose collectives are collx's.
//
// PyTorch 2.x: a third-party backend is a c10d::Backend, which torch.distributed's ProcessGroup
// dispatches each operation to by device type (torch/requirements.txt pins the version tested).
#pragma once

#include <torch/version.h>
#if TORCH_VERSION_MAJOR < 2
#error "collx_torch needs PyTorch 2.x (torch/requirements.txt pins the version it is tested with)"
#endif
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <collx/collx.hpp>
#ifdef COLLX_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "work.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace collx_torch {

using BackendBase = c10d::Backend;

// Staging memory reused from call to call, one pool per process group: the buffers collx reads
// or writes in place of the caller's tensors where those are not one contiguous block (a list of
// separate tensors, a non-contiguous view, an output that overlaps its input). A fresh buffer per
// call costs more than the copy it stages: above glibc's mmap threshold the CPU allocator returns
// new pages, which the kernel faults in and zeroes on their first write, inside the collective:
// a list-form all_gather of separate tensors took several times as long as one into a single
// block at 64 MiB (docs/PERFORMANCE.md, "PyTorch"). Memory held: at most kMaxBuffers buffers and
// kMaxBytes in all per process group, the largest recent staging needs; beyond that a call
// stages in memory of its own, as before.
class StagingPool {
 public:
  // A contiguous tensor of `sizes` and `options`, in memory no call in flight uses: it stays
  // this call's until the tensor and every view of it are gone (the work's Staging released).
  at::Tensor take(at::IntArrayRef sizes, const at::TensorOptions& options);

 private:
  static constexpr std::size_t kMaxBuffers = 4;
  static constexpr int64_t kMaxBytes = int64_t{1} << 30;

  // Guards buffers_: a buffer is free when only buffers_ refers to its storage, and only take()
  // (under this mutex) makes new references to it, so a count of one cannot go up meanwhile.
  std::mutex mutex_;
  std::vector<at::Tensor> buffers_;  // uint8
};

// send/recv with a size check. Every send is a header (elements, dtype) and then the data, on
// the caller's tag; a recv receives the header first and then exactly the message it announces,
// so a recv never receives into a buffer smaller than the message (MPI_ERR_TRUNCATE on one rank;
// on large messages Open MPI 4.1.4's single-copy path then crashed or hung, README) nor fills
// part of a larger one unnoticed: a mismatch is received into scratch memory and raised.
// The receives of one (source, tag) post theirs in launch order: the next one's header receive
// only once the previous one's data receive is posted, or it would match that data message.
class Receives {
 public:
  struct Pending {
    int source = 0;
    int tag = 0;
    at::Tensor buffer;  // contiguous; the data lands here
    int64_t header[2] = {0, 0};
    collx::Request header_request;
    bool header_posted = false;
    bool data_posted = false;
    collx::Request data_request;  // moved to the work once posted
    at::Tensor scratch;           // a mismatched message lands here
    std::exception_ptr error;
  };

  Receives(std::shared_ptr<collx::Communicator> comm, std::shared_ptr<std::mutex> post_mutex)
      : comm_(std::move(comm)), post_mutex_(std::move(post_mutex)) {}
  // Queues a receive into `buffer` and posts what can be posted.
  std::shared_ptr<Pending> add(const at::Tensor& buffer, int source, int tag);
  // Moves the queue of p's (source, tag) on as far as headers have arrived (waiting for them
  // when `block`); true once p's data receive is posted.
  bool advance(const std::shared_ptr<Pending>& p, bool block);
  // Every process group's queues (work.hpp, wait_for); receives_awaiting(): whether any
  // receive in the process waits for its header.
  static void advance_all();
  static bool awaiting() { return awaiting_.load(std::memory_order_acquire) > 0; }
  // Makes `receives` one of those advance_all() moves on.
  static void enroll(const std::shared_ptr<Receives>& receives);

 private:
  // With mutex_ held: one pass over the queue; true once p's (if any) data receive is posted.
  bool advance_locked(std::deque<std::shared_ptr<Pending>>& queue, const Pending* p);

  static std::atomic<int> awaiting_;  // receives without their data receive, process-wide

  std::shared_ptr<collx::Communicator> comm_;
  std::shared_ptr<std::mutex> post_mutex_;  // the process group's: held to post
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<Pending>>> queues_;
};

// The block every rank of a collective must give alike: torch requires tensors of one size and
// dtype on every rank, and collx's collectives take each rank's own count on trust (a peer's
// larger message is a truncation error on one rank only; a smaller one fills part of the
// block and reports nothing; ranks whose sizes choose different algorithms wait for each other
// for ever).
struct Block {
  int64_t elements = 0;
  at::ScalarType dtype = at::ScalarType::Undefined;
  const char* what = "";  // "input tensor", "output tensor", ... for the error message
};

// The order in which a process group posts its collectives, where some cannot be posted at once.
// A call whose ranks agree on the block first (Block) posts one small allreduce (MAX of two
// int64: the group's largest and smallest block), nonblocking, and its collective only once that
// is complete and equal on every rank; where the blocks differ, every rank's call fails (its
// wait() raises) and nothing of it is sent. Every rank posts its collectives in one order, so the
// collectives a process group launches meanwhile wait behind such a call, in launch order.
//
// Nothing blocks at launch: a rank that issues several async_op=True calls before waiting on
// any (or an async call and then a recv that its peer's send needs first, or async calls on two
// groups that another rank issues in the other order) goes on to its next call, as on gloo.
// The waiting calls are posted by whoever drives progress: a wait() on any work (wait_for), the
// completion thread, or a later launch. When the agreement blocked inside the call, such
// programs hung (test_ops.py test_async_agreements).
class Sequence {
 public:
  using Start = std::function<std::vector<collx::Request>()>;
  struct Call {
    const char* op = "";
    bool agree = false;
    Block block;
    int64_t range[2] = {0, 0};  // the agreement's buffer: {key, -key}, then the group's MAX
    collx::Request agreement;
    bool agreement_posted = false;
    Start start;        // posts the collective; released once it has run
    bool done = false;  // nothing more to post (posted, or failed)
    std::vector<collx::Request> requests;  // the collective's, until its work takes them
    std::exception_ptr error;
  };

  Sequence(std::shared_ptr<collx::Communicator> comm, std::shared_ptr<std::mutex> post_mutex,
           collx::Options host)
      : comm_(std::move(comm)), post_mutex_(std::move(post_mutex)), host_(host) {}

  // Held to launch: with it held, idle_locked() says whether a call may be posted at once
  // (none waits), and queue_locked() adds one that waits (and posts what it can).
  std::mutex& mutex() { return mutex_; }
  bool idle_locked() const { return queue_.empty(); }
  void queue_locked(const std::shared_ptr<Call>& call);
  // Posts what can be posted, in order (waiting until `call` is done when `block`); true once
  // `call` is done: then its requests and error are the caller's to take.
  bool advance(const std::shared_ptr<Call>& call, bool block);
  // Every process group's sequence moved on once, without blocking (work.hpp, wait_for);
  // waiting(): whether any call in the process waits to be posted.
  static void advance_all();
  static bool waiting() { return waiting_.load(std::memory_order_acquire) > 0; }
  static void enroll(const std::shared_ptr<Sequence>& sequence);

 private:
  // With mutex_ held: posts and tests from the head on; true once `call` (if any) is done.
  bool advance_locked(const Call* call);
  // With mutex_ held: the head is done; the next call becomes the head.
  void pop_locked();

  static std::atomic<int> waiting_;  // calls queued and not done, process-wide

  std::shared_ptr<collx::Communicator> comm_;
  std::shared_ptr<std::mutex> post_mutex_;
  collx::Options host_;
  std::mutex mutex_;
  std::deque<std::shared_ptr<Call>> queue_;
};

// Where one call's buffers live: host memory, or CUDA device `device` on its current stream
// (a build with COLLX_TORCH_CUDA: collx and torch both built with CUDA).
struct CallMemory {
  collx::Options options;
  int device = -1;
};

// The current CUDA device set to `device` (>= 0) for its scope: collx's device path works on
// the current device. Nothing without CUDA, or for -1.
class DeviceScope {
 public:
  explicit DeviceScope(int device);

 private:
#ifdef COLLX_TORCH_CUDA
  std::optional<c10::cuda::CUDAGuard> guard_;
#endif
};

// How a reduction on a tensor runs: by collx itself where it has the dtype and the operation
// (bool as uint8 MAX/MIN, complex as pairs of reals for SUM and AVG, PREMUL_SUM as SUM of a
// scaled copy), else folded by torch: the ranks' blocks gathered by collx (allgather, gather,
// alltoall), then combined in rank order on every rank (int16, uint16, the bitwise operations,
// complex PRODUCT), so every rank's result has the same bits. Pairs neither can reduce are
// refused with an error that names them.
struct Reduction {
  static Reduction of(const c10d::ReduceOp& op, const at::Tensor& t, const char* name);
  // PREMUL_SUM: multiplies t (a buffer of the call's own) by the factor.
  void prescale(at::Tensor& t) const;
  bool scaled() const { return premul.has_value() || premul_tensor.defined(); }
  // The fold of the rows of `rows` (ranks x elements) in rank order.
  at::Tensor fold_rows(const at::Tensor& rows) const;

  bool fold = false;
  collx::DataType type = collx::DataType::uint8;  // collx's, when not folded
  collx::ReduceOp op = collx::ReduceOp::sum;
  int64_t units = 1;  // collx elements per tensor element
  c10d::ReduceOp::RedOpType torch_op = c10d::ReduceOp::SUM;
  std::optional<double> premul;
  at::Tensor premul_tensor;
};

class ProcessGroupCollx : public BackendBase {
 public:
  explicit ProcessGroupCollx(std::shared_ptr<collx::Communicator> comm);

  const std::string getBackendName() const override { return "collx"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

 private:
  // all_gather's list form where blocks are large: one broadcast per rank (rank j's input the
  // root's buffer, block j of the list elsewhere), all in flight at once, so every block lands
  // straight in its output tensor, and this rank's own is copied; not collx's allgather into
  // one staging block and a copy of every block out of it (at these sizes the copy costs as much
  // as the allgather: memory-bound). Broadcasts rather than point-to-point messages (until
  // 27 November): they run on collx's shared-memory path on one node, where Open MPI's large
  // point-to-point messages (a rendezvous each) took 1.1-2.9x as long at 1-64 MiB
  // (docs/PERFORMANCE.md, "PyTorch").
  c10::intrusive_ptr<c10d::Work> allgather_broadcasts(const std::vector<at::Tensor>& outputs,
                                                      const at::Tensor& in);
  // reduce_scatter's two forms once the input is one flat buffer (`src`): collx's reduce_scatter,
  // or an alltoall and a fold (Reduction).
  c10::intrusive_ptr<c10d::Work> reduce_scatter_flat(c10d::OpType type, const char* op, Staging s,
                                                     const Reduction& red, at::Tensor src,
                                                     const at::Tensor& out);
  static constexpr int64_t kExchangeBytes = int64_t{256} << 10;  // per block
  // The largest call (its largest buffer) the completion thread is not woken for.
  static constexpr int64_t kQuietBytes = int64_t{64} << 10;

  // Starts `start` (a function returning the collx::Request, or several) and wraps it in a
  // CollxWork; a collx::Error becomes a torch error that names the torch operation. With
  // `agree` (and more than one rank), the ranks first agree on that block (Sequence) and the
  // call is posted once they have; where they differ, the work's wait() raises. A call launched
  // while another waits in the sequence waits behind it. `start` may run after launch()
  // returns, on another thread: it holds what it uses by value. point_to_point: posted at
  // once, whatever waits in the sequence (send and recv are not ordered with collectives).
  // The memory of a call's tensors (its staging's): all on the CPU, or all on one CUDA device.
  CallMemory memory_of(const Staging& s, const char* op) const;
  template <class Start>
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* op, Staging staging,
                                        Start&& start, const Block* agree = nullptr,
                                        bool point_to_point = false);

  std::shared_ptr<collx::Communicator> comm_;
  // Held to post anything (collectives, point-to-point messages); never while anything is
  // waited on: the completion thread may post a recv's data receive meanwhile, which a peer's
  // blocking send may need before it joins a collective (test_ops.py test_recv_then_agree).
  std::shared_ptr<std::mutex> post_mutex_ = std::make_shared<std::mutex>();
  // Every call's buffers are CPU tensors (others are refused): a CUDA build of collx need not ask
  // CUDA where each buffer lives.
  collx::Options host_;
  StagingPool pool_;
  std::shared_ptr<Receives> receives_;
  // The collectives' order (Sequence); its mutex is held to launch one: calls from two threads
  // (the autograd engine's and a future callback on the completion thread, say) start one at a
  // time, in one order on every rank.
  std::shared_ptr<Sequence> sequence_;
  // monitored_barrier's messages still in flight when it gave up, and their buffers.
  struct Abandoned {
    std::shared_ptr<std::vector<uint8_t>> buffers;
    std::vector<collx::Request> requests;
  };
  std::mutex monitor_mutex_;
  std::vector<Abandoned> monitor_;
};

// The process-wide side of the binding (MPI and the world communicator), used by the module.
// Initialises MPI with MPI_THREAD_MULTIPLE (unless the application initialised it) and
// duplicates MPI_COMM_WORLD; throws when MPI provides less than MPI_THREAD_MULTIPLE.
void initialize();
// Finishes the works in flight (and stops the completion thread), frees every communicator a
// process group still holds, then finalises MPI if initialize() initialised it. Process groups
// used after this throw.
void finalize();
// Only MPI (MPI_Init_thread, the thread level checked), without the world communicator.
void initialize_mpi();
// Processes that are not one MPI job (torchrun's) join one: rank 0 opens a port (open_port()),
// every process calls join() with it and its torch rank; the world is then ordered by those
// ranks. Open MPI's singletons need an ompi-server to connect (collx_torch/__init__.py).
std::string open_port();
void join(const std::string& port, int rank, int size);
bool initialized();
std::string mpi_library();
int world_rank();
int world_size();
// Rank `root`'s string on every rank of MPI_COMM_WORLD.
std::string broadcast_string(const std::string& value, int root);
// The process group torch asks for: the world when `global_ranks` is empty (the default group),
// else a communicator of those ranks of MPI_COMM_WORLD (torch.distributed.new_group).
c10::intrusive_ptr<ProcessGroupCollx> create_process_group(
    int group_rank, int group_size, const std::vector<int64_t>& global_ranks);

}  // namespace collx_torch
