// The collectives as collx-bench runs them: nccl-tests' sizes and bus factors, inputs with a
// known result, collx's call and the MPI library's own on the same buffers.
//
// One descriptor per collective (a table row, below) says what differs: the bus factor, whether it
// reduces and is rooted, how big its buffers are, how its inputs and expected result are made, how
// a checked call must find its result buffer, and its collx and MPI calls. Everything else (the
// buffers, --cold's sets, the memcpy row, the exact check) is one class, DescribedBench.
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

// What every collective's hooks work on: the communicator, the run's parameters, the buffers.
struct State {
  explicit State(Communicator& c) : comm(c), p(c.size()), me(c.rank()) {}

  std::size_t elem() const { return size_of(params.type); }
  std::size_t elements(Extent e) const {
    return e == Extent::none ? 0 : e == Extent::block ? count : count * static_cast<std::size_t>(p);
  }
  std::size_t block_bytes() const { return count * elem(); }
  bool root() const { return me == params.root; }
  int next() const { return (me + 1) % p; }
  int previous() const { return (me + p - 1) % p; }
  Options with(Algorithm a) const {
    Options o;
    o.algorithm = a;
    o.chunk_bytes = params.chunk_bytes;
    o.pipeline_depth = params.pipeline_depth;
    return o;
  }
  // The in-place form's send argument is the result buffer (MPI_IN_PLACE for MPI).
  Buffer& source() { return params.in_place ? recv : send; }

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
  void copy_into(Buffer& to, Buffer& from, std::size_t n) {
    std::memcpy(to.data(), from.data(), n * elem());
  }
  // What a checked call's result buffer holds where it must be overwritten.
  void poison(std::size_t n) { std::memset(recv.data(), 0xA5, n * elem()); }

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
  void* mpi_source() { return params.in_place ? MPI_IN_PLACE : mpi(send); }
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
  Params params;
  std::size_t count = 0;
  Buffer send;
  Buffer recv;
  Buffer expected;
  Buffer copy;  // the memcpy row's destination
};

double two_steps(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }  // allreduce
double one_step(int n) { return n > 1 ? (n - 1.0) / n : 0.0; }       // the gathering ones
double whole(int) { return 1.0; }                                     // broadcast, reduce, sendrecv
double nothing(int) { return 0.0; }                                   // barrier

// One collective, as the table below lists them.
struct Descriptor {
  Collective collective;
  double (*bus_factor)(int nranks);  // nccl-tests' busbw = algbw * factor
  bool reduces;                      // prints the redop
  bool rooted;                       // prints the root
  // What the size column counts: one block (count = bytes / element) or the whole gathered or
  // scattered buffer (count = bytes / element / nranks, per rank as nccl-tests); none: barrier.
  Extent size;
  Extent send, recv;  // the buffers' sizes
  Extent result;      // the elements a rank checks in recv (and the memcpy row copies)
  bool checked_at_root_only;
  // Inputs in send, the result in expected, recv's first contents (both host copies).
  void (*fill)(State&);
  // Before a checked call: recv as the call must find it. nullptr: the result poisoned.
  void (*reset)(State&);
  void (*run)(State&, Algorithm);
  void (*run_mpi)(State&);
  // The nonblocking forms, for --overlap; nullptr where not offered.
  Request (*start)(State&, Algorithm) = nullptr;
  void (*start_mpi)(State&, MPI_Request*) = nullptr;
};

const Descriptor kAllreduce{
    .collective = Collective::allreduce,
    .bus_factor = two_steps,
    .reduces = true,
    .rooted = false,
    .size = Extent::block,
    .send = Extent::block,
    .recv = Extent::block,
    .result = Extent::block,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.input(s.send, s.count);
          s.copy_into(s.recv, s.send, s.count);
          s.reduced();
        },
    .reset =
        [](State& s) {
          if (s.params.in_place) {
            s.input(s.recv, s.count);
          } else {
            s.poison(s.count);
          }
        },
    .run =
        [](State& s, Algorithm a) {
          s.comm.allreduce(s.source().arg(), s.recv.arg(), s.count, s.params.type, s.params.op,
                           s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.source());
          MPI_Allreduce(s.mpi_source(), s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(),
                        s.mpi_reduce_op(), s.mpi_comm());
          s.mpi_average(s.recv);
          s.mpi_out(s.recv);
        },
    .start =
        [](State& s, Algorithm a) {
          return s.comm.iallreduce(s.source().arg(), s.recv.arg(), s.count, s.params.type,
                                   s.params.op, s.with(a));
        },
    .start_mpi =
        [](State& s, MPI_Request* request) {
          MPI_Iallreduce(s.params.in_place ? MPI_IN_PLACE : s.send.data(), s.recv.data(),
                         s.mpi_count(), s.mpi_datatype(), s.mpi_reduce_op(), s.mpi_comm(),
                         request);
        },
};

// Broadcast is always in place: the root's recv holds the data.
const Descriptor kBroadcast{
    .collective = Collective::broadcast,
    .bus_factor = whole,
    .reduces = false,
    .rooted = true,
    .size = Extent::block,
    .send = Extent::none,
    .recv = Extent::block,
    .result = Extent::block,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.pattern(s.expected.data(), s.params.root, s.count);
          s.copy_into(s.recv, s.expected, s.count);
        },
    .reset =
        [](State& s) {
          if (!s.root()) s.poison(s.count);
        },
    .run =
        [](State& s, Algorithm a) {
          s.comm.broadcast(s.recv.arg(), s.count, s.params.type, s.params.root, s.with(a));
        },
    .run_mpi =
        [](State& s) {
          if (s.root()) s.mpi_in(s.recv);
          MPI_Bcast(s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(), s.params.root, s.mpi_comm());
          if (!s.root()) s.mpi_out(s.recv);
        },
};

const Descriptor kReduce{
    .collective = Collective::reduce,
    .bus_factor = whole,
    .reduces = true,
    .rooted = true,
    .size = Extent::block,
    .send = Extent::block,
    .recv = Extent::block,
    .result = Extent::block,
    .checked_at_root_only = true,
    .fill =
        [](State& s) {
          s.input(s.send, s.count);
          s.reduced();
        },
    .reset = nullptr,
    .run =
        [](State& s, Algorithm a) {
          s.comm.reduce(s.send.arg(), s.recv.arg(), s.count, s.params.type, s.params.op,
                        s.params.root, s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.send);
          MPI_Reduce(s.mpi(s.send), s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(),
                     s.mpi_reduce_op(), s.params.root, s.mpi_comm());
          if (s.root()) {
            s.mpi_average(s.recv);
            s.mpi_out(s.recv);
          }
        },
};

const Descriptor kAllgather{
    .collective = Collective::allgather,
    .bus_factor = one_step,
    .reduces = false,
    .rooted = false,
    .size = Extent::all,
    .send = Extent::block,
    .recv = Extent::all,
    .result = Extent::all,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.count);
          s.blocks_of_every_rank();
          s.copy_into(s.recv, s.expected, s.elements(Extent::all));
        },
    .reset =
        [](State& s) {
          s.poison(s.elements(Extent::all));
          if (s.params.in_place) {
            std::memcpy(s.recv.data() + s.me * s.block_bytes(), s.send.data(), s.block_bytes());
          }
        },
    .run =
        [](State& s, Algorithm a) {
          s.comm.allgather(
              s.params.in_place ? s.recv.arg() + s.me * s.block_bytes() : s.send.arg(),
              s.recv.arg(), s.count, s.params.type, s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.source());
          MPI_Allgather(s.mpi_source(), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv),
                        s.mpi_count(), s.mpi_datatype(), s.mpi_comm());
          s.mpi_out(s.recv);
        },
};

// recv holds the whole input for the in-place form; the result is this rank's block.
const Descriptor kReduceScatter{
    .collective = Collective::reduce_scatter,
    .bus_factor = one_step,
    .reduces = true,
    .rooted = false,
    .size = Extent::all,
    .send = Extent::all,
    .recv = Extent::all,
    .result = Extent::block,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.input(s.send, s.elements(Extent::all));
          s.copy_into(s.recv, s.send, s.elements(Extent::all));
          s.reduced(static_cast<std::size_t>(s.me) * s.count);
        },
    .reset =
        [](State& s) {
          if (s.params.in_place) {
            s.input(s.recv, s.elements(Extent::all));
          } else {
            s.poison(s.count);
          }
        },
    .run =
        [](State& s, Algorithm a) {
          s.comm.reduce_scatter(s.source().arg(), s.recv.arg(), s.count, s.params.type,
                                s.params.op, s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.source());
          MPI_Reduce_scatter_block(s.mpi_source(), s.mpi(s.recv), s.mpi_count(), s.mpi_datatype(),
                                   s.mpi_reduce_op(), s.mpi_comm());
          s.mpi_average(s.recv);
          s.mpi_out(s.recv);
        },
};

// Every rank's recv is the root's size (what the memcpy row copies); the root's is checked.
const Descriptor kGather{
    .collective = Collective::gather,
    .bus_factor = one_step,
    .reduces = false,
    .rooted = true,
    .size = Extent::all,
    .send = Extent::block,
    .recv = Extent::all,
    .result = Extent::all,
    .checked_at_root_only = true,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.count);
          s.blocks_of_every_rank();
        },
    .reset = nullptr,
    .run =
        [](State& s, Algorithm a) {
          s.comm.gather(s.send.arg(), s.recv.arg(), s.count, s.params.type, s.params.root,
                        s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.send);
          MPI_Gather(s.mpi(s.send), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv), s.mpi_count(),
                     s.mpi_datatype(), s.params.root, s.mpi_comm());
          if (s.root()) s.mpi_out(s.recv);
        },
};

// send holds the root's blocks on every rank.
const Descriptor kScatter{
    .collective = Collective::scatter,
    .bus_factor = one_step,
    .reduces = false,
    .rooted = true,
    .size = Extent::all,
    .send = Extent::all,
    .recv = Extent::block,
    .result = Extent::block,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.params.root, s.elements(Extent::all));
          s.pattern(s.expected.data(), s.params.root, s.count,
                    static_cast<std::size_t>(s.me) * s.count);
        },
    .reset = nullptr,
    .run =
        [](State& s, Algorithm a) {
          s.comm.scatter(s.send.arg(), s.recv.arg(), s.count, s.params.type, s.params.root,
                         s.with(a));
        },
    .run_mpi =
        [](State& s) {
          if (s.root()) s.mpi_in(s.send);
          MPI_Scatter(s.mpi(s.send), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv),
                      s.mpi_count(), s.mpi_datatype(), s.params.root, s.mpi_comm());
          s.mpi_out(s.recv);
        },
};

// Block j of a rank's send holds its pattern's elements j*count...
const Descriptor kAlltoall{
    .collective = Collective::alltoall,
    .bus_factor = one_step,
    .reduces = false,
    .rooted = false,
    .size = Extent::all,
    .send = Extent::all,
    .recv = Extent::all,
    .result = Extent::all,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.elements(Extent::all));
          s.blocks_of_every_rank(static_cast<std::size_t>(s.me) * s.count);
          s.copy_into(s.recv, s.send, s.elements(Extent::all));
        },
    .reset =
        [](State& s) {
          if (s.params.in_place) {
            s.copy_into(s.recv, s.send, s.elements(Extent::all));
          } else {
            s.poison(s.elements(Extent::all));
          }
        },
    .run =
        [](State& s, Algorithm a) {
          s.comm.alltoall(s.source().arg(), s.recv.arg(), s.count, s.params.type, s.with(a));
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.source());
          MPI_Alltoall(s.mpi_source(), s.mpi_count(), s.mpi_datatype(), s.mpi(s.recv),
                       s.mpi_count(), s.mpi_datatype(), s.mpi_comm());
          s.mpi_out(s.recv);
        },
};

// Every rank sends to the next and receives from the previous (nccl-tests' sendrecv).
const Descriptor kSendrecv{
    .collective = Collective::sendrecv,
    .bus_factor = whole,
    .reduces = false,
    .rooted = false,
    .size = Extent::block,
    .send = Extent::block,
    .recv = Extent::block,
    .result = Extent::block,
    .checked_at_root_only = false,
    .fill =
        [](State& s) {
          s.pattern(s.send.data(), s.me, s.count);
          s.pattern(s.expected.data(), s.previous(), s.count);
        },
    .reset = nullptr,
    .run =
        [](State& s, Algorithm) {
          s.comm.sendrecv(s.send.arg(), s.count, s.next(), s.recv.arg(), s.count, s.previous(),
                          s.params.type, 0);
        },
    .run_mpi =
        [](State& s) {
          s.mpi_in(s.send);
          MPI_Sendrecv(s.mpi(s.send), s.mpi_count(), s.mpi_datatype(), s.next(), 0, s.mpi(s.recv),
                       s.mpi_count(), s.mpi_datatype(), s.previous(), 0, s.mpi_comm(),
                       MPI_STATUS_IGNORE);
          s.mpi_out(s.recv);
        },
};

const Descriptor kBarrier{
    .collective = Collective::barrier,
    .bus_factor = nothing,
    .reduces = false,
    .rooted = false,
    .size = Extent::none,
    .send = Extent::none,
    .recv = Extent::none,
    .result = Extent::none,
    .checked_at_root_only = false,
    .fill = [](State&) {},
    .reset = nullptr,
    .run = [](State& s, Algorithm a) { s.comm.barrier(s.with(a)); },
    .run_mpi = [](State& s) { MPI_Barrier(s.mpi_comm()); },
};

const Descriptor* const kDescriptors[] = {&kAllreduce, &kBroadcast,     &kReduce,
                                          &kAllgather, &kReduceScatter, &kGather,
                                          &kScatter,   &kAlltoall,      &kSendrecv,
                                          &kBarrier};

// A collective's benchmark from its descriptor: the buffers, --cold's sets, the memcpy row and
// the exact check are the same for all.
class DescribedBench final : public CollectiveBench {
 public:
  DescribedBench(const Descriptor& d, Communicator& comm) : d_(d), s_(comm) {}

  Collective collective() const override { return d_.collective; }
  double bus_factor(int n) const override { return d_.bus_factor(n); }
  bool reduces() const override { return d_.reduces; }
  bool rooted() const override { return d_.rooted; }
  std::size_t count_for(std::size_t bytes, std::size_t e, int n) const override {
    if (d_.size == Extent::none) return 0;
    return d_.size == Extent::block ? bytes / e : bytes / e / static_cast<std::size_t>(n);
  }
  std::size_t bytes_for(std::size_t count, int n) const override {
    if (d_.size == Extent::none) return 0;
    return count * s_.elem() * (d_.size == Extent::block ? 1 : static_cast<std::size_t>(n));
  }

  void prepare(const Params& params, std::size_t count) override {
    s_.params = params;
    s_.count = count;
    s_.send.resize(s_.elements(d_.send) * s_.elem());
    s_.recv.resize(s_.elements(d_.recv) * s_.elem());
    s_.expected.resize(s_.elements(d_.result) * s_.elem());
    d_.fill(s_);
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

  void run(Algorithm a) override { d_.run(s_, a); }
  void run_mpi() override { d_.run_mpi(s_); }
  std::size_t check(bool mpi, Algorithm a) override {
    const std::size_t n = s_.elements(d_.result);
    if (d_.reset) {
      d_.reset(s_);
    } else {
      s_.poison(n);
    }
    s_.recv.to_device();
    mpi ? run_mpi() : run(a);
    s_.recv.to_host();
    if (n == 0 || (d_.checked_at_root_only && !s_.root())) return 0;
    return count_wrong(s_.recv.data(), s_.expected.data(), n * s_.elem(), s_.elem());
  }

  // The result's bytes (the root's size on every rank for gather).
  std::size_t memcpy_bytes() const override { return s_.elements(d_.result) * s_.elem(); }
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
