// The collectives as collx-bench runs them: nccl-tests' sizes and bus factors, inputs with a
// known result, collx's call and the MPI library's own on the same buffers.
//
// One descriptor per collective (a table row, below) says what differs: the bus factor, whether it
// reduces and is rooted, its in-place form, how big its buffers are, where its input and result
// are, how its inputs and expected result are made, and its collx and MPI calls. Everything else
// (the buffers, --cold's sets, the memcpy row, the exact check, the MPI row's staging) is one
// class, DescribedBench.
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
#include "exact_data.hpp"
#include "mpi_reference.hpp"

namespace collx::bench {

namespace {

// How many elements a buffer holds: none, one block (`count`, the count the collective is called
// with) or a block per rank (count x nranks).
enum class Extent { none, block, all };

// Where a collective's in-place form finds this rank's input: nowhere (it has none), at the start
// of recv or at this rank's block of recv (with --in-place), or always in recv (broadcast: the
// root's buffer is the data).
enum class InPlace { none, recv_start, recv_own_block, always };

// The ranks something happens on.
enum class Ranks { all, root, all_but_root };

// What every collective's hooks work on: the communicator, the run's parameters, the buffers.
struct State {
  State(Communicator& c, InPlace form) : comm(c), p(c.size()), me(c.rank()), in_place_form(form) {}

  std::size_t elem() const { return size_of(params.type); }
  std::size_t elements(Extent e) const {
    return e == Extent::none ? 0 : e == Extent::block ? count : count * static_cast<std::size_t>(p);
  }
  std::size_t block_bytes() const { return count * elem(); }
  bool root() const { return me == params.root; }
  bool on(Ranks ranks) const { return ranks == Ranks::all || (ranks == Ranks::root) == root(); }
  int next() const { return (me + 1) % p; }
  int previous() const { return (me + p - 1) % p; }
  Options with(Algorithm a) const {
    Options o;
    o.algorithm = a;
    o.segment_bytes = params.segment_bytes;
    o.pipeline_depth = params.pipeline_depth;
    return o;
  }

  // Whether this call is the in-place form, and where in recv its input is then.
  bool in_place() const {
    return in_place_form == InPlace::always || (in_place_form != InPlace::none && params.in_place);
  }
  std::size_t in_place_offset() const {
    return in_place_form == InPlace::recv_own_block ? static_cast<std::size_t>(me) * block_bytes()
                                                    : 0;
  }
  // The buffer the call reads its input from, and the send argument of collx's call.
  Buffer& input_buffer() { return in_place() ? recv : send; }
  const void* send_arg() { return in_place() ? recv.arg() + in_place_offset() : send.arg(); }

  // Inputs and results with a known value (exact_data.hpp).
  void input(Buffer& b, std::size_t n) {
    verify::fill_input(b.data(), params.type, params.op, me, p, n);
  }
  void pattern(std::byte* at, int rank, std::size_t n, std::size_t first = 0) const {
    verify::fill_pattern(at, params.type, rank, n, first);
  }
  void reduced(std::size_t first = 0) {
    verify::fill_expected(expected.data(), params.type, params.op, p, count, first);
  }
  // Every block r of `expected` holds rank r's pattern (from element `first` on).
  void blocks_of_every_rank(std::size_t first = 0) {
    for (int r = 0; r < p; ++r)
      pattern(expected.data() + r * block_bytes(), r, count, first);
  }

  // The MPI library's view of a buffer: the device copy where MPI takes device memory, else the
  // host memory, staged by hand (mpi_in before the call, mpi_out after).
  MPI_Datatype mpi_datatype() const { return mpi_type(params.type); }
  MPI_Op mpi_reduce_op() const { return mpi_op(params.type, params.op); }
  MPI_Comm mpi_comm() const { return comm.mpi_comm(); }
  int mpi_count() const { return checked_int(count); }
  bool mpi_takes_device() const { return Buffer::on_device() && collx::mpi_takes_device_memory(); }
  bool mpi_staged() const { return Buffer::on_device() && !mpi_takes_device(); }
  void* mpi(Buffer& b) const { return mpi_takes_device() ? b.arg() : b.data(); }
  // The send argument of an MPI call with an in-place form.
  void* mpi_source() { return in_place() ? MPI_IN_PLACE : mpi(send); }
  void mpi_in(Buffer& b) const {
    if (mpi_staged()) b.to_host();
  }
  void mpi_out(Buffer& b) const {
    if (mpi_staged()) b.to_device();
  }
  // avg has no MPI op: a sum, then the division where the data is (what an MPI user writes).
  void mpi_average(Buffer& b) const {
    if (params.op != ReduceOp::avg) return;
    if (mpi_takes_device()) b.to_host();
    mpi_finish_average(b.data(), params.type, count, p);
    if (mpi_takes_device()) b.to_device();
  }

  Communicator& comm;
  int p;
  int me;
  InPlace in_place_form;
  Params params;
  std::size_t count = 0;
  Buffer send;
  Buffer recv;
  Buffer expected;
  Buffer copy;  // the memcpy row's destination
};

// nccl-tests' bus factors (busbw = algbw * factor).
double two_steps(int n) {  // allreduce
  return n > 1 ? 2.0 * (n - 1) / n : 0.0;
}
double one_step(int n) {  // the gathering and scattering ones
  return n > 1 ? (n - 1.0) / n : 0.0;
}
double whole(int) {  // broadcast, reduce, sendrecv
  return 1.0;
}
double nothing(int) {  // barrier
  return 0.0;
}

// One collective, as the table below lists them. nccl-tests' size column counts the larger of
// send and recv: one block, or the whole gathered or scattered buffer (then the count is per
// rank, as nccl-tests has it).
struct Descriptor {
  Collective collective;
  double (*bus_factor)(int nranks);  // nccl-tests' busbw = algbw * factor
  bool reduces = false;              // prints the redop
  bool rooted = false;               // prints the root
  InPlace in_place = InPlace::none;
  // The buffers' sizes; result: the elements of recv a rank checks (and the memcpy row copies).
  struct Extents {
    Extent send = Extent::none;
    Extent recv = Extent::none;
    Extent result = Extent::none;
  } extents = {};
  // The ranks the call reads its input on (the mpi row stages it to the host there) and writes
  // its result on (poisoned before a checked call, staged back after the mpi row's). Where only
  // the root gets a result, only the root's is checked.
  Ranks input_on = Ranks::all;
  Ranks result_on = Ranks::all;
  // Inputs in send, the expected result in expected, and for an in-place form that is always
  // taken, recv's input (host copies).
  void (*fill)(State&) = nullptr;
  void (*call)(State&, Algorithm);
  void (*mpi_call)(State&);
  // The nonblocking forms, for --overlap; nullptr where not offered.
  Request (*start)(State&, Algorithm) = nullptr;
  void (*start_mpi)(State&, MPI_Request*) = nullptr;
};

// The calls that several collectives share (collx's and MPI's take the same arguments).
// Reductions of every rank's input (allreduce, reduce_scatter): send or in place, recv, op.
using ReductionCall = void (Communicator::*)(const void*, void*, std::size_t, DataType, ReduceOp,
                                             const Options&);
using MpiReductionCall = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm);
template <ReductionCall Call>
void reduction(State& s, Algorithm a) {
  (s.comm.*Call)(s.send_arg(), s.recv.arg(), s.count, s.params.type, s.params.op, s.with(a));
}
template <MpiReductionCall Call>
void mpi_reduction(State& s) {
  Call(s.mpi_source(), s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(), s.mpi_reduce_op(),
       s.mpi_comm());
}
// Block exchanges between all ranks (allgather, alltoall): send or in place, recv.
using ExchangeCall = void (Communicator::*)(const void*, void*, std::size_t, DataType,
                                            const Options&);
using MpiExchangeCall = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm);
template <ExchangeCall Call>
void exchange(State& s, Algorithm a) {
  (s.comm.*Call)(s.send_arg(), s.recv.arg(), s.count, s.params.type, s.with(a));
}
template <MpiExchangeCall Call>
void mpi_exchange(State& s) {
  Call(s.mpi_source(), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv), s.mpi_count(),
       s.mpi_datatype(), s.mpi_comm());
}
// Blocks to or from the root (gather, scatter): send, recv, root.
using RootedCall = void (Communicator::*)(const void*, void*, std::size_t, DataType, int,
                                          const Options&);
using MpiRootedCall = int (*)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int,
                              MPI_Comm);
template <RootedCall Call>
void rooted(State& s, Algorithm a) {
  (s.comm.*Call)(s.send.arg(), s.recv.arg(), s.count, s.params.type, s.params.root, s.with(a));
}
template <MpiRootedCall Call>
void mpi_rooted(State& s) {
  Call(s.mpi(s.send), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv), s.mpi_count(),
       s.mpi_datatype(), s.params.root, s.mpi_comm());
}

// The inputs: every rank's reduction input in send and the exact reduction of elements from
// `first` on; or this rank's pattern in send and every rank's block in expected.
void reduction_inputs(State& s, Extent inputs, std::size_t first) {
  s.input(s.send, s.elements(inputs));
  s.reduced(first);
}
void gathered_blocks(State& s) {
  s.pattern(s.send.data(), s.me, s.count);
  s.blocks_of_every_rank();
}

const Descriptor kAllreduce{
    .collective = Collective::allreduce,
    .bus_factor = two_steps,
    .reduces = true,
    .in_place = InPlace::recv_start,
    .extents = {.send = Extent::block, .recv = Extent::block, .result = Extent::block},
    .fill = [](State& s) { reduction_inputs(s, Extent::block, 0); },
    .call = reduction<&Communicator::allreduce>,
    .mpi_call = mpi_reduction<MPI_Allreduce>,
    .start =
        [](State& s, Algorithm a) {
          return s.comm.iallreduce(s.send_arg(), s.recv.arg(), s.count, s.params.type, s.params.op,
                                   s.with(a));
        },
    .start_mpi =
        [](State& s, MPI_Request* request) {
          MPI_Iallreduce(s.in_place() ? MPI_IN_PLACE : s.send.data(), s.recv.data(), s.mpi_count(),
                         s.mpi_datatype(), s.mpi_reduce_op(), s.mpi_comm(), request);
        },
};

// Always in place: the root's recv holds the data.
const Descriptor kBroadcast{
    .collective = Collective::broadcast,
    .bus_factor = whole,
    .rooted = true,
    .in_place = InPlace::always,
    .extents = {.recv = Extent::block, .result = Extent::block},
    .input_on = Ranks::root,
    .result_on = Ranks::all_but_root,
    .fill =
        [](State& s) {
          s.pattern(s.expected.data(), s.params.root, s.count);
          if (s.root()) std::memcpy(s.recv.data(), s.expected.data(), s.block_bytes());
        },
    .call =
        [](State& s, Algorithm a) {
          s.comm.broadcast(s.recv.arg(), s.count, s.params.type, s.params.root, s.with(a));
        },
    .mpi_call =
        [](State& s) {
          MPI_Bcast(s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(), s.params.root, s.mpi_comm());
        },
};

const Descriptor kReduce{
    .collective = Collective::reduce,
    .bus_factor = whole,
    .reduces = true,
    .rooted = true,
    .extents = {.send = Extent::block, .recv = Extent::block, .result = Extent::block},
    .result_on = Ranks::root,
    .fill = [](State& s) { reduction_inputs(s, Extent::block, 0); },
    .call =
        [](State& s, Algorithm a) {
          s.comm.reduce(s.send.arg(), s.recv.arg(), s.count, s.params.type, s.params.op,
                        s.params.root, s.with(a));
        },
    .mpi_call =
        [](State& s) {
          MPI_Reduce(s.mpi(s.send), s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(),
                     s.mpi_reduce_op(), s.params.root, s.mpi_comm());
        },
};

const Descriptor kAllgather{
    .collective = Collective::allgather,
    .bus_factor = one_step,
    .in_place = InPlace::recv_own_block,
    .extents = {.send = Extent::block, .recv = Extent::all, .result = Extent::all},
    .fill = gathered_blocks,
    .call = exchange<&Communicator::allgather>,
    .mpi_call = mpi_exchange<MPI_Allgather>,
};

// recv holds the whole input for the in-place form; the result is this rank's block.
const Descriptor kReduceScatter{
    .collective = Collective::reduce_scatter,
    .bus_factor = one_step,
    .reduces = true,
    .in_place = InPlace::recv_start,
    .extents = {.send = Extent::all, .recv = Extent::all, .result = Extent::block},
    .fill =
        [](State& s) {
          reduction_inputs(s, Extent::all, static_cast<std::size_t>(s.me) * s.count);
        },
    .call = reduction<&Communicator::reduce_scatter>,
    .mpi_call = mpi_reduction<MPI_Reduce_scatter_block>,
};

// Every rank's recv is the root's size (what the memcpy row copies); the root's is checked.
const Descriptor kGather{
    .collective = Collective::gather,
    .bus_factor = one_step,
    .rooted = true,
    .extents = {.send = Extent::block, .recv = Extent::all, .result = Extent::all},
    .result_on = Ranks::root,
    .fill = gathered_blocks,
    .call = rooted<&Communicator::gather>,
    .mpi_call = mpi_rooted<MPI_Gather>,
};

// send holds the root's blocks on every rank.
const Descriptor kScatter{
    .collective = Collective::scatter,
    .bus_factor = one_step,
    .rooted = true,
    .extents = {.send = Extent::all, .recv = Extent::block, .result = Extent::block},
    .input_on = Ranks::root,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.params.root, s.elements(Extent::all));
          s.pattern(s.expected.data(), s.params.root, s.count,
                    static_cast<std::size_t>(s.me) * s.count);
        },
    .call = rooted<&Communicator::scatter>,
    .mpi_call = mpi_rooted<MPI_Scatter>,
};

// Block j of a rank's send holds its pattern's elements j*count...
const Descriptor kAlltoall{
    .collective = Collective::alltoall,
    .bus_factor = one_step,
    .in_place = InPlace::recv_start,
    .extents = {.send = Extent::all, .recv = Extent::all, .result = Extent::all},
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.elements(Extent::all));
          s.blocks_of_every_rank(static_cast<std::size_t>(s.me) * s.count);
        },
    .call = exchange<&Communicator::alltoall>,
    .mpi_call = mpi_exchange<MPI_Alltoall>,
};

// Every rank sends to the next and receives from the previous (nccl-tests' sendrecv).
const Descriptor kSendrecv{
    .collective = Collective::sendrecv,
    .bus_factor = whole,
    .extents = {.send = Extent::block, .recv = Extent::block, .result = Extent::block},
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.count);
          s.pattern(s.expected.data(), s.previous(), s.count);
        },
    .call =
        [](State& s, Algorithm) {
          s.comm.sendrecv(s.send.arg(), s.count, s.next(), s.recv.arg(), s.count, s.previous(),
                          s.params.type, 0);
        },
    .mpi_call =
        [](State& s) {
          MPI_Sendrecv(s.mpi(s.send), s.mpi_count(), s.mpi_datatype(), s.next(), 0, s.mpi(s.recv),
                       s.mpi_count(), s.mpi_datatype(), s.previous(), 0, s.mpi_comm(),
                       MPI_STATUS_IGNORE);
        },
};

const Descriptor kBarrier{
    .collective = Collective::barrier,
    .bus_factor = nothing,
    .call = [](State& s, Algorithm a) { s.comm.barrier(s.with(a)); },
    .mpi_call = [](State& s) { MPI_Barrier(s.mpi_comm()); },
};

const Descriptor* const kDescriptors[] = {&kAllreduce,     &kBroadcast, &kReduce,  &kAllgather,
                                          &kReduceScatter, &kGather,    &kScatter, &kAlltoall,
                                          &kSendrecv,      &kBarrier};

// A collective's benchmark from its descriptor: the buffers, --cold's sets, the memcpy row, the
// exact check and the MPI row's staging are the same for all.
class DescribedBench final : public CollectiveBench {
 public:
  DescribedBench(const Descriptor& d, Communicator& comm) : d_(d), s_(comm, d.in_place) {}

  Collective collective() const override { return d_.collective; }
  double bus_factor(int n) const override { return d_.bus_factor(n); }
  bool reduces() const override { return d_.reduces; }
  bool rooted() const override { return d_.rooted; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    const std::size_t blocks = blocks_in_size(n);
    return blocks == 0 ? 0 : bytes / e / blocks;
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    return count * s_.elem() * blocks_in_size(n);
  }

  void prepare(const Params& params, std::size_t count) override {
    s_.params = params;
    s_.count = count;
    s_.send.resize(s_.elements(d_.extents.send) * s_.elem());
    s_.recv.resize(s_.elements(d_.extents.recv) * s_.elem());
    s_.expected.resize(s_.elements(d_.extents.result) * s_.elem());
    if (d_.fill) d_.fill(s_);
    reset_recv();
    s_.send.to_device();
    s_.recv.to_device();
    s_.copy.resize(params.memcpy_row ? memcpy_bytes() : 0);
    if (params.memcpy_row) {
      std::memset(s_.copy.data(), 0, s_.copy.size());
      s_.copy.to_device();
    }
    sets_ = 1;
    set_ = 0;
    const std::size_t set_bytes = Buffer::stride_for(s_.send.size()) +
                                  Buffer::stride_for(s_.recv.size()) +
                                  (params.memcpy_row ? Buffer::stride_for(s_.copy.size()) : 0);
    // --cold: enough sets that together they exceed the pool (twice the last-level cache), at
    // least two (no call on the set of the call before). Nothing to spread without data.
    if (params.cold_pool_bytes > 0 && s_.send.size() + s_.recv.size() > 0) {
      sets_ = std::max<std::size_t>(2, params.cold_pool_bytes / set_bytes + 1);
      s_.send.make_slots(sets_);
      s_.recv.make_slots(sets_);
      if (params.memcpy_row) s_.copy.make_slots(sets_);
    }
  }
  void next_buffers() override {
    if (sets_ == 1) return;
    set_ = (set_ + 1) % sets_;
    for (Buffer* b : {&s_.send, &s_.recv, &s_.copy})
      b->select(set_);
  }
  std::size_t buffer_sets() const override { return sets_; }
  std::size_t pool_bytes() const override {
    return s_.send.capacity() + s_.recv.capacity() + s_.copy.capacity();
  }

  void run(Algorithm a) override { d_.call(s_, a); }
  // With the copies to and from the host where MPI does not take device memory, on the ranks
  // where the input and the result are; avg's division after the sum.
  void run_mpi() override {
    if (s_.on(d_.input_on)) s_.mpi_in(s_.input_buffer());
    d_.mpi_call(s_);
    if (!s_.on(d_.result_on)) return;
    if (d_.reduces) s_.mpi_average(s_.recv);
    s_.mpi_out(s_.recv);
  }
  std::size_t check(bool mpi, Algorithm a) override {
    reset_recv();
    s_.recv.to_device();
    mpi ? run_mpi() : run(a);
    s_.recv.to_host();
    const std::size_t n = s_.elements(d_.extents.result);
    if (n == 0 || (d_.result_on == Ranks::root && !s_.root())) return 0;
    return count_wrong(s_.recv.data(), s_.expected.data(), n * s_.elem(), s_.elem());
  }

  // The result's bytes (the root's size on every rank for gather).
  std::size_t memcpy_bytes() const override { return s_.elements(d_.extents.result) * s_.elem(); }
  void run_memcpy() override {
    const std::size_t n = memcpy_bytes();
    if (n == 0) return;
    if (Buffer::on_device()) {
      copy_on_device(s_.copy.arg(), s_.recv.arg(), n);
    } else {
      std::memcpy(s_.copy.data(), s_.recv.data(), n);
    }
  }
  std::size_t check_memcpy() override {
    const std::size_t n = memcpy_bytes();
    if (n == 0) return 0;
    std::memset(s_.copy.data(), 0xA5, n);
    s_.copy.to_device();
    run_memcpy();
    s_.copy.to_host();
    s_.recv.to_host();
    return count_wrong(s_.copy.data(), s_.recv.data(), n, 1);
  }

  bool supports_overlap() const override {
    return d_.start != nullptr && s_.params.op != ReduceOp::avg && !Buffer::on_device();
  }
  Request start(Algorithm a) override { return d_.start ? d_.start(s_, a) : Request{}; }
  void start_mpi(MPI_Request* request) override {
    *request = MPI_REQUEST_NULL;
    if (d_.start_mpi) d_.start_mpi(s_, request);
  }

 private:
  // nccl-tests' size column counts the larger of send and recv, in blocks (0: no data).
  std::size_t blocks_in_size(int n) const {
    const Extent larger = std::max(d_.extents.send, d_.extents.recv);
    return larger == Extent::none ? 0 : larger == Extent::block ? 1 : static_cast<std::size_t>(n);
  }
  // recv as a call must find it: the result poisoned where the call must overwrite it, and the
  // in-place form's input (send's contents) where that form reads it.
  void reset_recv() {
    if (s_.on(d_.result_on)) {
      std::memset(s_.recv.data(), 0xA5, s_.elements(d_.extents.result) * s_.elem());
    }
    if (s_.in_place() && d_.in_place != InPlace::always) {
      std::memcpy(s_.recv.data() + s_.in_place_offset(), s_.send.data(),
                  s_.elements(d_.extents.send) * s_.elem());
    }
  }

  const Descriptor& d_;
  State s_;
  std::size_t sets_ = 1;  // --cold: buffer sets in the pool, and the one in use
  std::size_t set_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveBench> make_bench(Collective collective, Communicator& comm) {
  for (const Descriptor* d : kDescriptors) {
    if (d->collective == collective) return std::make_unique<DescribedBench>(*d, comm);
  }
  return nullptr;
}

}  // namespace collx::bench
