// The collectives as collx-bench runs them: nccl-tests' sizes and bus factors, inputs with a
// known result, collx's call and the MPI library's own on the same buffers.
//
// With -m device the buffers the calls get are device memory (Buffer::arg()); inputs are made
// and results checked in the host copies, moved across around each check. The MPI library's
// call gets the device buffers where it is CUDA-aware; elsewhere it runs on host memory with the
// copies a user of such an MPI writes around it (inputs to the host before, results back after),
// and those copies count in its time.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bench_buffers.hpp"
#include "bench_collective.hpp"
#include "cuda_aware.hpp"
#include "exact_data.hpp"
#include "mpi_reference.hpp"

namespace collx::bench {

namespace {

// Buffers and the bookkeeping every collective shares. `count` is the per-call count the
// collective takes (per rank for the gathering ones).
class BenchBase : public CollectiveBench {
 public:
  explicit BenchBase(Communicator& comm) : comm_(comm), p_(comm.size()), me_(comm.rank()) {}

  void prepare(const Params& params, std::size_t count) final {
    fill(params, count);
    copy_.resize(params.memcpy_row ? memcpy_bytes() : 0);
    if (params.memcpy_row) {
      std::memset(copy_.data(), 0, copy_.size());
      copy_.to_device();
    }
    sets_ = 1;
    set_ = 0;
    const std::size_t set_bytes = Buffer::stride_for(send_.size()) +
                                  Buffer::stride_for(recv_.size()) +
                                  (params.memcpy_row ? Buffer::stride_for(copy_.size()) : 0);
    // --cold: enough sets that together they exceed the pool (twice the last-level cache), at
    // least two (no call on the set of the call before). Nothing to spread without data.
    if (params.cold_pool_bytes > 0 && send_.size() + recv_.size() > 0) {
      sets_ = std::max<std::size_t>(2, params.cold_pool_bytes / set_bytes + 1);
      for (Buffer* b : {&send_, &recv_, &copy_}) {
        if (b != &copy_ || params.memcpy_row) b->make_slots(sets_);
      }
    }
  }
  void next_buffers() final {
    if (sets_ == 1) return;
    set_ = (set_ + 1) % sets_;
    for (Buffer* b : {&send_, &recv_, &copy_})
      b->select(set_);
  }
  std::size_t buffer_sets() const final { return sets_; }
  std::size_t pool_bytes() const final {
    return send_.capacity() + recv_.capacity() + copy_.capacity();
  }
  // The result buffer's bytes (the root's size on every rank for the rooted ones).
  std::size_t memcpy_bytes() const override { return recv_.size(); }
  void run_memcpy() final {
    const std::size_t n = memcpy_bytes();
    if (n == 0) return;
    if (Buffer::on_device()) {
      copy_on_device(copy_.arg(), recv_.arg(), n);
    } else {
      std::memcpy(copy_.data(), recv_.data(), n);
    }
  }
  std::size_t check_memcpy() final {
    const std::size_t n = memcpy_bytes();
    if (n == 0) return 0;
    std::memset(copy_.data(), 0xA5, n);
    copy_.to_device();
    run_memcpy();
    copy_.to_host();
    recv_.to_host();
    return count_wrong(copy_.data(), recv_.data(), n, 1);
  }

 protected:
  // Allocates and fills send_, recv_ and expected_ for `count` elements (prepare() does the rest).
  virtual void fill(const Params& params, std::size_t count) = 0;
  std::size_t elem() const { return size_of(params_.type); }
  Options with(Algorithm a) const {
    Options o;
    o.algorithm = a;
    o.chunk_bytes = params_.chunk_bytes;
    o.pipeline_depth = params_.pipeline_depth;
    return o;
  }
  void fill_pattern(Buffer& b, int rank, std::size_t count, std::size_t first = 0) const {
    verify::fill_pattern(b.data(), params_.type, rank, count, first);
  }
  // Wrong elements of `result` against `expected` (both `count` elements).
  std::size_t wrong(const std::byte* result, const std::byte* expected, std::size_t count) const {
    return count_wrong(result, expected, count * elem(), elem());
  }
  MPI_Datatype mpi_datatype() const { return mpi_type(params_.type); }
  MPI_Op mpi_reduce_op() const { return mpi_op(params_.type, params_.op); }

  // The MPI library's view of a buffer: the device copy where MPI takes device memory, else the
  // host memory, staged by hand (mpi_in before the call, mpi_out after).
  bool mpi_takes_device() const {
    return Buffer::on_device() && detail::cuda_awareness().mpi_direct();
  }
  bool mpi_staged() const { return Buffer::on_device() && !mpi_takes_device(); }
  std::byte* mpi(Buffer& b) const { return mpi_takes_device() ? b.arg() : b.data(); }
  void mpi_in(Buffer& b) const {
    if (mpi_staged()) b.to_host();
  }
  void mpi_out(Buffer& b) const {
    if (mpi_staged()) b.to_device();
  }
  // avg after an MPI sum: divided where the data is.
  void mpi_average(Buffer& b, std::size_t count) const {
    if (mpi_takes_device()) b.to_host();
    mpi_finish_average(b.data(), params_.type, count, p_);
    if (mpi_takes_device()) b.to_device();
  }
  Communicator& comm_;
  int p_;
  int me_;
  Params params_;
  std::size_t count_ = 0;
  Buffer send_;
  Buffer recv_;
  Buffer expected_;
  Buffer copy_;           // the memcpy row's destination
  std::size_t sets_ = 1;  // --cold: buffer sets in the pool, and the one in use
  std::size_t set_ = 0;
};

// nccl-tests' per-rank count for the collectives whose size is the whole gathered buffer.
std::size_t per_rank(std::size_t bytes, std::size_t elem, int p) {
  return bytes / elem / static_cast<std::size_t>(p);
}

class AllreduceBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::allreduce; }
  double bus_factor(int n) const override { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }
  bool reduces() const override { return true; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int) const override { return bytes / e; }
  std::size_t bytes_for(std::size_t count, int) const override { return count * elem(); }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    send_.resize(count * elem());
    recv_.resize(count * elem());
    expected_.resize(count * elem());
    verify::fill_input(send_.data(), params.type, params.op, me_, p_, count);
    std::memcpy(recv_.data(), send_.data(), count * elem());
    verify::fill_expected(expected_.data(), params.type, params.op, p_, count);
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm a) override {
    comm_.allreduce(params_.in_place ? recv_.arg() : send_.arg(), recv_.arg(), count_, params_.type,
                    params_.op, with(a));
  }
  void run_mpi() override {
    mpi_in(params_.in_place ? recv_ : send_);
    MPI_Allreduce(params_.in_place ? MPI_IN_PLACE : mpi(send_), mpi(recv_), checked_int(count_),
                  mpi_datatype(), mpi_reduce_op(), comm_.mpi_comm());
    if (params_.op == ReduceOp::avg) mpi_average(recv_, count_);
    mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    if (params_.in_place) {
      verify::fill_input(recv_.data(), params_.type, params_.op, me_, p_, count_);
    } else {
      std::memset(recv_.data(), 0xA5, count_ * elem());
    }
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_);
  }
  bool supports_overlap() const override {
    return params_.op != ReduceOp::avg && !Buffer::on_device();
  }
  Request start(Algorithm a) override {
    return comm_.iallreduce(params_.in_place ? recv_.arg() : send_.arg(), recv_.arg(), count_,
                            params_.type, params_.op, with(a));
  }
  void start_mpi(MPI_Request* request) override {
    MPI_Iallreduce(params_.in_place ? MPI_IN_PLACE : send_.data(), recv_.data(),
                   checked_int(count_), mpi_datatype(), mpi_reduce_op(), comm_.mpi_comm(), request);
  }
};

class BroadcastBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::broadcast; }
  double bus_factor(int) const override { return 1.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int) const override { return bytes / e; }
  std::size_t bytes_for(std::size_t count, int) const override { return count * elem(); }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    recv_.resize(count * elem());
    expected_.resize(count * elem());
    fill_pattern(expected_, params.root, count);
    std::memcpy(recv_.data(), expected_.data(), count * elem());
    recv_.to_device();
  }
  void run(Algorithm a) override {
    comm_.broadcast(recv_.arg(), count_, params_.type, params_.root, with(a));
  }
  void run_mpi() override {
    if (me_ == params_.root) mpi_in(recv_);
    MPI_Bcast(mpi(recv_), checked_int(count_), mpi_datatype(), params_.root, comm_.mpi_comm());
    if (me_ != params_.root) mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    if (me_ != params_.root) std::memset(recv_.data(), 0xA5, count_ * elem());
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_);
  }
};

class ReduceBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::reduce; }
  double bus_factor(int) const override { return 1.0; }
  bool reduces() const override { return true; }
  bool rooted() const override { return true; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int) const override { return bytes / e; }
  std::size_t bytes_for(std::size_t count, int) const override { return count * elem(); }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    send_.resize(count * elem());
    recv_.resize(count * elem());
    expected_.resize(count * elem());
    verify::fill_input(send_.data(), params.type, params.op, me_, p_, count);
    verify::fill_expected(expected_.data(), params.type, params.op, p_, count);
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm a) override {
    comm_.reduce(send_.arg(), recv_.arg(), count_, params_.type, params_.op, params_.root, with(a));
  }
  void run_mpi() override {
    mpi_in(send_);
    MPI_Reduce(mpi(send_), mpi(recv_), checked_int(count_), mpi_datatype(), mpi_reduce_op(),
               params_.root, comm_.mpi_comm());
    if (me_ == params_.root) {
      if (params_.op == ReduceOp::avg) mpi_average(recv_, count_);
      mpi_out(recv_);
    }
  }
  std::size_t check(bool mpi, Algorithm a) override {
    std::memset(recv_.data(), 0xA5, count_ * elem());
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return me_ == params_.root ? wrong(recv_.data(), expected_.data(), count_) : 0;
  }
};

class AllgatherBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::allgather; }
  double bus_factor(int n) const override { return n > 1 ? (n - 1.0) / n : 0.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    return per_rank(bytes, e, n);
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    return count * elem() * static_cast<std::size_t>(n);
  }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    const std::size_t block = count * elem();
    send_.resize(block);
    recv_.resize(block * p_);
    expected_.resize(block * p_);
    fill_pattern(send_, me_, count);
    for (int r = 0; r < p_; ++r) {
      verify::fill_pattern(expected_.data() + r * block, params.type, r, count);
    }
    std::memcpy(recv_.data(), expected_.data(), block * p_);
    send_.to_device();
    recv_.to_device();
  }
  std::size_t own() const { return static_cast<std::size_t>(me_) * count_ * elem(); }
  void run(Algorithm a) override {
    comm_.allgather(params_.in_place ? recv_.arg() + own() : send_.arg(), recv_.arg(), count_,
                    params_.type, with(a));
  }
  void run_mpi() override {
    const int n = checked_int(count_);
    mpi_in(params_.in_place ? recv_ : send_);
    MPI_Allgather(params_.in_place ? MPI_IN_PLACE : mpi(send_), n, mpi_datatype(), mpi(recv_), n,
                  mpi_datatype(), comm_.mpi_comm());
    mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    std::memset(recv_.data(), 0xA5, count_ * elem() * p_);
    if (params_.in_place) std::memcpy(recv_.data() + own(), send_.data(), count_ * elem());
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_ * p_);
  }
};

class ReduceScatterBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::reduce_scatter; }
  double bus_factor(int n) const override { return n > 1 ? (n - 1.0) / n : 0.0; }
  bool reduces() const override { return true; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    return per_rank(bytes, e, n);
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    return count * elem() * static_cast<std::size_t>(n);
  }
  // recv_ holds the whole input for the in-place form; the result is this rank's block.
  std::size_t memcpy_bytes() const override { return count_ * elem(); }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    const std::size_t total = count * static_cast<std::size_t>(p_);
    send_.resize(total * elem());
    recv_.resize(total * elem());
    expected_.resize(count * elem());
    verify::fill_input(send_.data(), params.type, params.op, me_, p_, total);
    std::memcpy(recv_.data(), send_.data(), total * elem());
    verify::fill_expected(expected_.data(), params.type, params.op, p_, count,
                          static_cast<std::size_t>(me_) * count);
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm a) override {
    comm_.reduce_scatter(params_.in_place ? recv_.arg() : send_.arg(), recv_.arg(), count_,
                         params_.type, params_.op, with(a));
  }
  void run_mpi() override {
    mpi_in(params_.in_place ? recv_ : send_);
    MPI_Reduce_scatter_block(params_.in_place ? MPI_IN_PLACE : mpi(send_), mpi(recv_),
                             checked_int(count_), mpi_datatype(), mpi_reduce_op(),
                             comm_.mpi_comm());
    if (params_.op == ReduceOp::avg) mpi_average(recv_, count_);
    mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    if (params_.in_place) {
      verify::fill_input(recv_.data(), params_.type, params_.op, me_, p_,
                         count_ * static_cast<std::size_t>(p_));
    } else {
      std::memset(recv_.data(), 0xA5, count_ * elem());
    }
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_);
  }
};

class GatherBench final : public BenchBase {
 public:
  GatherBench(Communicator& comm, bool scatter) : BenchBase(comm), scatter_(scatter) {}
  Collective collective() const override {
    return scatter_ ? Collective::scatter : Collective::gather;
  }
  double bus_factor(int n) const override { return n > 1 ? (n - 1.0) / n : 0.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return true; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    return per_rank(bytes, e, n);
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    return count * elem() * static_cast<std::size_t>(n);
  }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    const std::size_t block = count * elem();
    if (scatter_) {
      send_.resize(block * p_);  // the root's blocks
      recv_.resize(block);
      expected_.resize(block);
      fill_pattern(send_, params.root, count * p_);
      verify::fill_pattern(expected_.data(), params.type, params.root, count,
                           static_cast<std::size_t>(me_) * count);
    } else {
      send_.resize(block);
      recv_.resize(block * p_);
      expected_.resize(block * p_);
      fill_pattern(send_, me_, count);
      for (int r = 0; r < p_; ++r) {
        verify::fill_pattern(expected_.data() + r * block, params.type, r, count);
      }
    }
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm a) override {
    if (scatter_) {
      comm_.scatter(send_.arg(), recv_.arg(), count_, params_.type, params_.root, with(a));
    } else {
      comm_.gather(send_.arg(), recv_.arg(), count_, params_.type, params_.root, with(a));
    }
  }
  void run_mpi() override {
    const int n = checked_int(count_);
    const bool root = me_ == params_.root;
    if (scatter_) {
      if (root) mpi_in(send_);
      MPI_Scatter(mpi(send_), n, mpi_datatype(), mpi(recv_), n, mpi_datatype(), params_.root,
                  comm_.mpi_comm());
      mpi_out(recv_);
    } else {
      mpi_in(send_);
      MPI_Gather(mpi(send_), n, mpi_datatype(), mpi(recv_), n, mpi_datatype(), params_.root,
                 comm_.mpi_comm());
      if (root) mpi_out(recv_);
    }
  }
  std::size_t check(bool mpi, Algorithm a) override {
    const std::size_t out_count = scatter_ ? count_ : count_ * p_;
    std::memset(recv_.data(), 0xA5, out_count * elem());
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    if (!scatter_ && me_ != params_.root) return 0;
    return wrong(recv_.data(), expected_.data(), out_count);
  }

 private:
  bool scatter_;
};

class AlltoallBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::alltoall; }
  double bus_factor(int n) const override { return n > 1 ? (n - 1.0) / n : 0.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    return per_rank(bytes, e, n);
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    return count * elem() * static_cast<std::size_t>(n);
  }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    const std::size_t block = count * elem();
    send_.resize(block * p_);
    recv_.resize(block * p_);
    expected_.resize(block * p_);
    fill_pattern(send_, me_, count * p_);  // block j holds elements j*count ..
    for (int i = 0; i < p_; ++i) {
      verify::fill_pattern(expected_.data() + i * block, params.type, i, count,
                           static_cast<std::size_t>(me_) * count);
    }
    std::memcpy(recv_.data(), send_.data(), block * p_);
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm a) override {
    comm_.alltoall(params_.in_place ? recv_.arg() : send_.arg(), recv_.arg(), count_, params_.type,
                   with(a));
  }
  void run_mpi() override {
    const int n = checked_int(count_);
    mpi_in(params_.in_place ? recv_ : send_);
    MPI_Alltoall(params_.in_place ? MPI_IN_PLACE : mpi(send_), n, mpi_datatype(), mpi(recv_), n,
                 mpi_datatype(), comm_.mpi_comm());
    mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    if (params_.in_place) {
      std::memcpy(recv_.data(), send_.data(), count_ * elem() * p_);
    } else {
      std::memset(recv_.data(), 0xA5, count_ * elem() * p_);
    }
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_ * p_);
  }
};

// Every rank sends to the next and receives from the previous (nccl-tests' sendrecv).
class SendrecvBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::sendrecv; }
  double bus_factor(int) const override { return 1.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int) const override { return bytes / e; }
  std::size_t bytes_for(std::size_t count, int) const override { return count * elem(); }

  void fill(const Params& params, std::size_t count) override {
    params_ = params;
    count_ = count;
    send_.resize(count * elem());
    recv_.resize(count * elem());
    expected_.resize(count * elem());
    fill_pattern(send_, me_, count);
    fill_pattern(expected_, (me_ + p_ - 1) % p_, count);
    send_.to_device();
    recv_.to_device();
  }
  void run(Algorithm) override {
    comm_.sendrecv(send_.arg(), count_, (me_ + 1) % p_, recv_.arg(), count_, (me_ + p_ - 1) % p_,
                   params_.type, 0);
  }
  void run_mpi() override {
    const int n = checked_int(count_);
    mpi_in(send_);
    MPI_Sendrecv(mpi(send_), n, mpi_datatype(), (me_ + 1) % p_, 0, mpi(recv_), n, mpi_datatype(),
                 (me_ + p_ - 1) % p_, 0, comm_.mpi_comm(), MPI_STATUS_IGNORE);
    mpi_out(recv_);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    std::memset(recv_.data(), 0xA5, count_ * elem());
    recv_.to_device();
    mpi ? run_mpi() : run(a);
    recv_.to_host();
    return wrong(recv_.data(), expected_.data(), count_);
  }
};

class BarrierBench final : public BenchBase {
 public:
  using BenchBase::BenchBase;
  Collective collective() const override { return Collective::barrier; }
  double bus_factor(int) const override { return 0.0; }
  bool reduces() const override { return false; }
  bool rooted() const override { return false; }
  std::size_t count_for(std::size_t, std::size_t, int) const override { return 0; }
  std::size_t bytes_for(std::size_t, int) const override { return 0; }
  void fill(const Params& params, std::size_t) override { params_ = params; }
  void run(Algorithm a) override { comm_.barrier(with(a)); }
  void run_mpi() override { MPI_Barrier(comm_.mpi_comm()); }
  std::size_t check(bool mpi, Algorithm a) override {
    mpi ? run_mpi() : run(a);
    return 0;
  }
};

}  // namespace

std::unique_ptr<CollectiveBench> make_bench(Collective collective, Communicator& comm) {
  switch (collective) {
    case Collective::allreduce:
      return std::make_unique<AllreduceBench>(comm);
    case Collective::broadcast:
      return std::make_unique<BroadcastBench>(comm);
    case Collective::reduce:
      return std::make_unique<ReduceBench>(comm);
    case Collective::allgather:
      return std::make_unique<AllgatherBench>(comm);
    case Collective::reduce_scatter:
      return std::make_unique<ReduceScatterBench>(comm);
    case Collective::gather:
      return std::make_unique<GatherBench>(comm, false);
    case Collective::scatter:
      return std::make_unique<GatherBench>(comm, true);
    case Collective::alltoall:
      return std::make_unique<AlltoallBench>(comm);
    case Collective::sendrecv:
      return std::make_unique<SendrecvBench>(comm);
    case Collective::barrier:
      return std::make_unique<BarrierBench>(comm);
    default:
      return nullptr;
  }
}

}  // namespace collx::bench
