// The collectives of the collx process group: torch's tensors and options checked and mapped to
// one collx call each, nonblocking, completed by CollxWork::wait() or the completion thread.
// The pieces they are made of, one file each: the argument checks (checks.hpp), the dtypes'
// collx types (dtypes.hpp), the reductions (reduction.cpp), the staging buffers (staging.hpp),
// where a call's tensors live (call_memory.cpp), the pending receives (receives.cpp) and the
// order of the calls (sequence.cpp).
#include "process_group.hpp"

#include <ATen/MemoryOverlap.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <type_traits>

#include "checks.hpp"
#include "dtypes.hpp"
#include "staging.hpp"

namespace collx_torch {
using namespace detail;

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
