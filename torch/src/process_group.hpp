// collx as a torch.distributed backend: a c10d process group whose collectives are collx's.
//
// Written against PyTorch 1.13 (Debian 12), where a third-party backend derives from
// c10d::ProcessGroup; from PyTorch 2.0 on it derives from c10d::Backend with the same virtual
// methods, which is what BackendBase picks.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <collx/collx.hpp>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace collx_torch {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// What a call needs after its collx request completes: staging buffers copied back into the
// caller's tensors (non-contiguous tensors, tensor lists that are not one block of memory), and
// every tensor the request reads or writes, kept alive until then.
struct Staging {
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back;  // (caller's tensor, staging buffer)
  std::vector<at::Tensor> keep_alive;
  std::vector<at::Tensor> outputs;  // Work::result() and the future's value
};

// A torch Work over one collx request: wait() completes the request (driving collx's progress),
// then copies staged results back.
class CollxWork : public c10d::Work {
 public:
  CollxWork(int rank, c10d::OpType type, collx::Request request, Staging staging);

  bool isCompleted() override;
  // Blocks until the request completes. `timeout` is not used: collx's own COLLX_TIMEOUT turns
  // a hang into an error that names the collective and the peer.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override;
  // Completes the work first (DDP's reducer chains on the future right after launching the
  // allreduce and nothing else would drive collx's progress), then returns a completed future.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  // Completes the request (blocking, or one test when !block) and, once done, the copy-backs;
  // an error is kept for wait() and isSuccess().
  void drive(bool block);

  collx::Request request_;
  Staging staging_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
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
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Starts `start` (a function returning the collx::Request) and wraps it in a CollxWork; a
  // collx::Error becomes a torch error that names the torch operation.
  template <class Start>
  c10::intrusive_ptr<c10d::Work> launch(c10d::OpType type, const char* op, Staging staging,
                                        Start&& start);

  std::shared_ptr<collx::Communicator> comm_;
  // Every call's buffers are CPU tensors (others are refused): a CUDA build of collx need not ask
  // CUDA where each buffer lives.
  collx::Options host_;
};

// The process-wide side of the binding (MPI and the world communicator), used by the module.
// Initialises MPI (unless the application did) and duplicates MPI_COMM_WORLD.
void initialize();
// Frees every communicator a process group still holds, then finalises MPI if initialize()
// initialised it. Process groups used after this throw.
void finalize();
int world_rank();
int world_size();
// Rank `root`'s string on every rank of MPI_COMM_WORLD.
std::string broadcast_string(const std::string& value, int root);
// The process group torch asks for: the world when `global_ranks` is empty (the default group),
// else a communicator of those ranks of MPI_COMM_WORLD (torch.distributed.new_group).
c10::intrusive_ptr<ProcessGroupCollx> create_process_group(int group_rank, int group_size,
                                                           const std::vector<int64_t>& global_ranks);

}  // namespace collx_torch
