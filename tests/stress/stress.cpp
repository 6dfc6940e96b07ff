// collx-stress: thousands of random collectives on real MPI ranks against exact references.
//
// Every rank draws the same sequence of cases from one seeded generator: the collective, the
// algorithm (auto among them), the type and op, the count (0 to a few million elements, mostly
// small), the root, in place or not, the pipeline settings, the communicator (the world, its
// two halves from split, a group without rank 0 from create_group, the world reordered by
// split) and whether the case is one blocking call or a batch of nonblocking calls in flight
// together, on one or several communicators, completed in an order that differs by rank.
// Reductions run on small integers (exact in every type, floats included: random_cases.hpp);
// data movement on rank- and case-specific patterns. Every output buffer has guard bytes on
// both sides, and every input of a call that is not in place is checked unchanged.
//
// Environment: COLLX_STRESS_SEED (default 20261123; "random" picks one from the clock),
// COLLX_STRESS_CASES (default 400), COLLX_STRESS_MAX_BYTES (largest buffer of one call,
// default 16 MiB). A failure prints the seed, the case and the command that repeats it; the
// exit status is non-zero on every rank. A collx::Error in a case ends the job (MPI_Abort): the
// other ranks would wait for the failed call's messages for ever.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "exact_data.hpp"
#include "random_cases.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;
using Bytes = std::vector<std::byte>;

constexpr std::size_t kGuard = 64;  // guard bytes before and after every output
constexpr std::byte kGuardByte{0xA5};
constexpr std::byte kFillByte{0x5A};

const Collective kCollectives[] = {Collective::allreduce,      Collective::broadcast,
                                   Collective::reduce,         Collective::allgather,
                                   Collective::reduce_scatter, Collective::reduce_scatter_v,
                                   Collective::gather,         Collective::scatter,
                                   Collective::alltoall,       Collective::barrier};
// How often each is drawn (allreduce most, as in real programs).
const int kWeights[] = {6, 3, 3, 3, 3, 2, 2, 2, 2, 1};

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  if (std::string(v) == "random") {
    return static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) %
           1000000007u;
  }
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (*end != '\0') {
    std::fprintf(stderr, "collx-stress: %s=%s is not a number\n", name, v);
    std::exit(2);
  }
  return x;
}

// One random case, identical on every rank (drawn before a rank knows whether it takes part).
struct Spec {
  int comm = 0;  // index into the communicators
  Collective collective = Collective::allreduce;
  Algorithm algorithm = Algorithm::automatic;
  DataType type = DataType::int32;
  ReduceOp op = ReduceOp::sum;
  std::size_t count = 0;
  std::uint32_t root_draw = 0;  // root = root_draw % size of the communicator
  bool in_place = false;
  bool null_recv = false;  // reduce/gather: non-roots pass recvbuf = nullptr
  std::size_t segment_bytes = 0;
  int pipeline_depth = 0;
  std::uint64_t data_seed = 0;
  std::vector<std::uint32_t> v_draws;  // reduce_scatter_v: block lengths, one per world rank
};

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : gen_(seed) {}
  std::uint64_t below(std::uint64_t n) { return n ? gen_() % n : 0; }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }
  template <class T>
  T pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  std::size_t count(std::size_t max_elements) {
    const std::uint64_t k = below(100);
    std::size_t n;
    if (k < 45) {
      n = below(17);  // 0..16: small calls, counts below the rank count
    } else if (k < 75) {
      n = 17 + below(4080);
    } else if (k < 93) {
      n = 4097 + below(61440);
    } else if (k < 99) {
      n = 65537 + below(1 << 20);
    } else {
      n = (std::size_t{1} << 20) + below(std::size_t{3} << 20);  // up to 4 Mi elements
    }
    return std::min(n, max_elements);
  }

  Spec spec(int ncomms, int world_size, std::size_t max_bytes) {
    Spec s;
    s.comm =
        static_cast<int>(below(100) < 55 ? 0 : 1 + below(static_cast<std::uint64_t>(ncomms - 1)));
    int total = 0;
    for (int w : kWeights)
      total += w;
    int k = static_cast<int>(below(static_cast<std::uint64_t>(total)));
    int i = 0;
    while (k >= kWeights[i])
      k -= kWeights[i++];
    s.collective = kCollectives[i];
    std::vector<Algorithm> algos = collx::testing::algorithms_with_auto(s.collective);
    algos.push_back(Algorithm::automatic);  // auto twice as often as any one algorithm
    s.algorithm = pick(algos);
    s.type = static_cast<DataType>(below(collx::kDataTypeCount));
    std::vector<ReduceOp> ops;
    for (int o = 0; o < collx::kReduceOpCount; ++o) {
      if (collx::is_supported(s.type, static_cast<ReduceOp>(o)))
        ops.push_back(static_cast<ReduceOp>(o));
    }
    s.op = ops.empty() ? ReduceOp::sum : pick(ops);
    // Collectives whose buffers hold a block per rank draw a per-rank count.
    const bool per_rank =
        s.collective == Collective::allgather || s.collective == Collective::reduce_scatter ||
        s.collective == Collective::gather || s.collective == Collective::scatter ||
        s.collective == Collective::alltoall;
    const std::size_t elem = collx::size_of(s.type);
    std::size_t max_elements = max_bytes / elem;
    if (per_rank) max_elements /= static_cast<std::size_t>(world_size);
    s.count = count(max_elements);
    s.root_draw = static_cast<std::uint32_t>(gen_());
    s.in_place = chance(30);
    s.null_recv = chance(50);
    s.segment_bytes = pick(std::vector<std::size_t>{0, 0, 0, 1000, 4096, 65536, 262144});
    s.pipeline_depth = static_cast<int>(pick(std::vector<std::uint64_t>{0, 0, 1, 2, 3, 8}));
    s.data_seed = gen_();
    if (s.collective == Collective::reduce_scatter_v) {
      for (int r = 0; r < world_size; ++r) {
        // Some blocks empty, the rest up to count / world_size (with a small minimum).
        const std::size_t cap = s.count / static_cast<std::size_t>(world_size) + 3;
        s.v_draws.push_back(chance(25) ? 0u : static_cast<std::uint32_t>(below(cap + 1)));
      }
    }
    return s;
  }

 private:
  std::mt19937_64 gen_;
};

// A call in progress on this rank: its buffers, what it must produce, and its request.
struct Run {
  Spec spec;
  collx::Communicator* comm = nullptr;
  int me = 0, p = 0, root = 0;
  Bytes send;       // input (also the in-place buffer when in place)
  Bytes send_copy;  // the input as it was, for calls not in place
  Bytes out;        // kGuard + output + kGuard (empty when this rank has no output)
  std::size_t out_bytes = 0;
  Bytes expected;                     // the output this rank must get
  bool check_send_as_output = false;  // in place: the result is in `send` (with its guards)
  collx::Request request;
};

Bytes pattern(DataType type, int rank, std::size_t count, std::size_t first) {
  Bytes b(count * collx::size_of(type));
  if (count) collx::verify::fill_pattern(b.data(), type, rank, count, first);
  return b;
}

Bytes guarded(std::size_t bytes, std::byte fill = kFillByte) {
  Bytes b(bytes + 2 * kGuard, fill);
  std::fill(b.begin(), b.begin() + kGuard, kGuardByte);
  std::fill(b.end() - kGuard, b.end(), kGuardByte);
  return b;
}

Bytes guarded_copy(const Bytes& content) {
  Bytes b = guarded(content.size());
  std::copy(content.begin(), content.end(), b.begin() + kGuard);
  return b;
}

std::byte* inner(Bytes& b) {
  return b.data() + kGuard;
}

std::string describe(const Run& r) {
  const Spec& s = r.spec;
  std::ostringstream d;  // (string += chains trip GCC 12's -Wrestrict at -O3)
  d << collx::to_string(s.collective) << "/" << collx::to_string(s.algorithm) << " "
    << collx::to_string(s.type);
  const bool reduces =
      s.collective == Collective::allreduce || s.collective == Collective::reduce ||
      s.collective == Collective::reduce_scatter || s.collective == Collective::reduce_scatter_v;
  if (reduces) d << " " << collx::to_string(s.op);
  d << " count=" << s.count;
  if (s.collective == Collective::broadcast || s.collective == Collective::reduce ||
      s.collective == Collective::gather || s.collective == Collective::scatter) {
    d << " root=" << r.root;
  }
  if (s.in_place) d << " in-place";
  if (s.segment_bytes) d << " segment=" << s.segment_bytes;
  if (s.pipeline_depth) d << " depth=" << s.pipeline_depth;
  d << " comm#" << s.comm << " (rank " << r.me << " of " << r.p << ")";
  return d.str();
}

// Buffers and the expected output of one case on this rank.
void prepare(Run& r) {
  const Spec& s = r.spec;
  const DataType t = s.type;
  const std::size_t e = collx::size_of(t);
  const std::size_t n = s.count;
  const int p = r.p, me = r.me, root = r.root;
  const std::size_t up = static_cast<std::size_t>(p);
  const std::size_t base = s.data_seed % 1000003;  // pattern offset: differs per case
  switch (s.collective) {
    case Collective::allreduce: {
      auto c = collx::testing::make_case(t, s.op, n, me, p, s.data_seed);
      r.expected = std::move(c.expected);
      if (s.in_place) {
        r.send = guarded_copy(c.input);
        r.check_send_as_output = true;
      } else {
        r.send = std::move(c.input);
        r.out = guarded(n * e);
      }
      break;
    }
    case Collective::broadcast:
      r.expected = pattern(t, root, n, base);
      r.out = me == root ? guarded_copy(r.expected) : guarded(n * e);
      break;
    case Collective::reduce: {
      auto c = collx::testing::make_case(t, s.op, n, me, p, s.data_seed);
      if (s.in_place && me == root) {
        r.send = guarded_copy(c.input);
        r.check_send_as_output = true;
      } else {
        r.send = std::move(c.input);
        if (me == root || !s.null_recv) r.out = guarded(n * e);
      }
      if (me == root) r.expected = std::move(c.expected);
      break;
    }
    case Collective::allgather:
      for (int q = 0; q < p; ++q) {
        const Bytes b = pattern(t, q, n, base);
        r.expected.insert(r.expected.end(), b.begin(), b.end());
      }
      r.send = pattern(t, me, n, base);
      r.out = guarded(n * e * up);
      if (s.in_place && n) std::memcpy(inner(r.out) + me * n * e, r.send.data(), n * e);
      break;
    case Collective::reduce_scatter: {
      auto c = collx::testing::make_case(t, s.op, n * up, me, p, s.data_seed);
      r.expected.assign(c.expected.begin() + static_cast<std::ptrdiff_t>(me * n * e),
                        c.expected.begin() + static_cast<std::ptrdiff_t>((me + 1) * n * e));
      if (s.in_place) {
        r.send = guarded_copy(c.input);
        r.check_send_as_output = true;  // the first n elements; the rest is scratch
      } else {
        r.send = std::move(c.input);
        r.out = guarded(n * e);
      }
      break;
    }
    case Collective::reduce_scatter_v: {
      std::vector<std::size_t> lengths(up), offsets(up + 1, 0);
      for (int q = 0; q < p; ++q)
        lengths[q] = s.v_draws[q];
      std::partial_sum(lengths.begin(), lengths.end(), offsets.begin() + 1);
      auto c = collx::testing::make_case(t, s.op, offsets.back(), me, p, s.data_seed);
      r.expected.assign(c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me] * e),
                        c.expected.begin() + static_cast<std::ptrdiff_t>(offsets[me + 1] * e));
      r.send = std::move(c.input);
      r.out = guarded(lengths[me] * e);
      break;
    }
    case Collective::gather:
      r.send = pattern(t, me, n, base);
      if (me == root) {
        for (int q = 0; q < p; ++q) {
          const Bytes b = pattern(t, q, n, base);
          r.expected.insert(r.expected.end(), b.begin(), b.end());
        }
        r.out = guarded(n * e * up);
        if (s.in_place && n) std::memcpy(inner(r.out) + root * n * e, r.send.data(), n * e);
      } else if (!s.null_recv) {
        r.out = guarded(0);  // significant at the root only: must stay untouched here
      }
      break;
    case Collective::scatter:
      if (me == root) r.send = pattern(t, root, n * up, base);
      r.expected = pattern(t, root, n, base + static_cast<std::size_t>(me) * n);
      if (!(s.in_place && me == root)) r.out = guarded(n * e);
      break;
    case Collective::alltoall:
      for (int q = 0; q < p; ++q) {
        const Bytes b = pattern(t, q, n, base + static_cast<std::size_t>(me) * n);
        r.expected.insert(r.expected.end(), b.begin(), b.end());
      }
      if (s.in_place) {
        r.send = guarded_copy(pattern(t, me, n * up, base));
        r.check_send_as_output = true;
      } else {
        r.send = pattern(t, me, n * up, base);
        r.out = guarded(n * e * up);
      }
      break;
    default:  // barrier
      break;
  }
  r.out_bytes = r.out.empty() ? 0 : r.out.size() - 2 * kGuard;
  if (!r.check_send_as_output) r.send_copy = r.send;
}

// Starts (nonblocking) or runs (blocking) the call.
void start(Run& r, bool blocking) {
  const Spec& s = r.spec;
  collx::Communicator& c = *r.comm;
  collx::Options o;
  o.algorithm = s.algorithm;
  o.segment_bytes = s.segment_bytes;
  o.pipeline_depth = s.pipeline_depth;
  const DataType t = s.type;
  const std::size_t n = s.count;
  const std::size_t block = n * collx::size_of(t);
  std::byte* out = r.out.empty() ? nullptr : inner(r.out);
  std::byte* io = r.check_send_as_output ? inner(r.send) : nullptr;
  const std::byte* in = r.check_send_as_output ? nullptr : r.send.data();
  auto run = [&](auto&& blocking_call, auto&& nonblocking_call) {
    if (blocking) {
      blocking_call();
    } else {
      r.request = nonblocking_call();
    }
  };
  switch (s.collective) {
    case Collective::allreduce:
      if (io) {
        run([&] { c.allreduce(collx::in_place, io, n, t, s.op, o); },
            [&] { return c.iallreduce(io, io, n, t, s.op, o); });
      } else {
        run([&] { c.allreduce(in, out, n, t, s.op, o); },
            [&] { return c.iallreduce(in, out, n, t, s.op, o); });
      }
      break;
    case Collective::broadcast:
      run([&] { c.broadcast(out, n, t, r.root, o); },
          [&] { return c.ibroadcast(out, n, t, r.root, o); });
      break;
    case Collective::reduce:
      if (io) {
        run([&] { c.reduce(io, io, n, t, s.op, r.root, o); },
            [&] { return c.ireduce(io, io, n, t, s.op, r.root, o); });
      } else {
        run([&] { c.reduce(in, out, n, t, s.op, r.root, o); },
            [&] { return c.ireduce(in, out, n, t, s.op, r.root, o); });
      }
      break;
    case Collective::allgather:
      if (s.in_place) {
        std::byte* mine = out + static_cast<std::size_t>(r.me) * block;
        run([&] { c.allgather(collx::in_place, out, n, t, o); },
            [&] { return c.iallgather(mine, out, n, t, o); });
      } else {
        run([&] { c.allgather(in, out, n, t, o); }, [&] { return c.iallgather(in, out, n, t, o); });
      }
      break;
    case Collective::reduce_scatter:
      if (io) {
        run([&] { c.reduce_scatter(io, io, n, t, s.op, o); },
            [&] { return c.ireduce_scatter(io, io, n, t, s.op, o); });
      } else {
        run([&] { c.reduce_scatter(in, out, n, t, s.op, o); },
            [&] { return c.ireduce_scatter(in, out, n, t, s.op, o); });
      }
      break;
    case Collective::reduce_scatter_v: {
      std::vector<std::size_t> lengths(static_cast<std::size_t>(r.p));
      for (int q = 0; q < r.p; ++q)
        lengths[q] = s.v_draws[q];
      run([&] { c.reduce_scatter_v(in, out, lengths, t, s.op, o); },
          [&] { return c.ireduce_scatter_v(in, out, lengths, t, s.op, o); });
      break;
    }
    case Collective::gather: {
      const bool root_in_place = s.in_place && r.me == r.root;
      const std::byte* send = root_in_place ? out + static_cast<std::size_t>(r.root) * block : in;
      std::byte* recv = r.me == r.root ? out : (r.out.empty() ? nullptr : out);
      run([&] { c.gather(send, recv, n, t, r.root, o); },
          [&] { return c.igather(send, recv, n, t, r.root, o); });
      break;
    }
    case Collective::scatter: {
      const bool root_in_place = s.in_place && r.me == r.root;
      const std::byte* send = r.me == r.root ? r.send.data() : nullptr;
      std::byte* recv = root_in_place ? nullptr : out;
      run([&] { c.scatter(send, recv, n, t, r.root, o); },
          [&] { return c.iscatter(send, recv, n, t, r.root, o); });
      break;
    }
    case Collective::alltoall:
      if (io) {
        run([&] { c.alltoall(io, io, n, t, o); }, [&] { return c.ialltoall(io, io, n, t, o); });
      } else {
        run([&] { c.alltoall(in, out, n, t, o); }, [&] { return c.ialltoall(in, out, n, t, o); });
      }
      break;
    default:
      run([&] { c.barrier(o); }, [&] { return c.ibarrier(o); });
      break;
  }
}

bool guards_intact(const Bytes& b) {
  return std::all_of(b.begin(), b.begin() + kGuard, [](std::byte x) { return x == kGuardByte; }) &&
         std::all_of(b.end() - kGuard, b.end(), [](std::byte x) { return x == kGuardByte; });
}

// Empty when the call did what it must on this rank; otherwise what went wrong.
std::string check(const Run& r) {
  if (r.check_send_as_output) {
    if (!guards_intact(r.send)) return "wrote outside its in-place buffer";
    if (!std::equal(r.expected.begin(), r.expected.end(), r.send.begin() + kGuard))
      return "wrong in-place result";
    return {};
  }
  if (!r.send_copy.empty() && r.send != r.send_copy) return "changed its input buffer";
  if (!r.out.empty()) {
    if (!guards_intact(r.out)) return "wrote outside its output buffer";
    const bool has_output = !r.expected.empty() || r.out_bytes == 0;
    if (has_output && r.out_bytes == r.expected.size() &&
        !std::equal(r.expected.begin(), r.expected.end(), r.out.begin() + kGuard))
      return "wrong result";
    if (r.expected.empty() && r.out_bytes > 0 &&
        !std::all_of(r.out.begin() + kGuard, r.out.end() - kGuard,
                     [](std::byte x) { return x == kFillByte; }))
      return "wrote into a receive buffer that is not significant on this rank";
    if (!r.expected.empty() && r.out_bytes != r.expected.size()) return "internal: sizes differ";
  }
  return {};
}

struct Comms {
  std::vector<collx::Communicator*> of_case;  // per index: this rank's member, or null
  std::vector<std::string> names;
  std::vector<std::unique_ptr<collx::Communicator>> owned;
};

Comms make_communicators(int world_rank, int world_size) {
  Comms c;
  auto world = std::make_unique<collx::Communicator>(MPI_COMM_WORLD);
  collx::Communicator* w = world.get();
  c.owned.push_back(std::move(world));
  c.of_case.push_back(w);
  c.names.push_back("world");
  // Odd and even ranks apart, in reverse order: every rank is in one half.
  auto half = w->split(world_rank % 2, -world_rank);
  c.owned.push_back(std::make_unique<collx::Communicator>(std::move(*half)));
  c.of_case.push_back(c.owned.back().get());
  c.names.push_back("split: odd and even ranks, reversed");
  // Every rank but 0, listed backwards.
  std::vector<int> group;
  for (int r = world_size - 1; r >= 1; --r)
    group.push_back(r);
  if (world_rank != 0) {
    c.owned.push_back(std::make_unique<collx::Communicator>(w->create_group(group)));
    c.of_case.push_back(c.owned.back().get());
  } else {
    c.of_case.push_back(nullptr);
  }
  c.names.push_back("create_group: ranks size-1..1");
  // The world in another order (rank r becomes (2r + 1) mod size... keyed).
  auto reordered = w->split(0, (2 * world_rank + 1) % world_size);
  c.owned.push_back(std::make_unique<collx::Communicator>(std::move(*reordered)));
  c.of_case.push_back(c.owned.back().get());
  c.names.push_back("split: the world reordered");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  collx::Environment environment(argc, argv);
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  std::uint64_t seed = env_u64("COLLX_STRESS_SEED", 20261123);
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);  // "random": rank 0's clock for all
  const std::uint64_t cases = env_u64("COLLX_STRESS_CASES", 400);
  const std::size_t max_bytes = env_u64("COLLX_STRESS_MAX_BYTES", std::size_t{16} << 20);
  const auto started = std::chrono::steady_clock::now();
  if (world_rank == 0) {
    std::printf("collx-stress: seed %llu, %llu cases, %d ranks, buffers up to %zu B\n",
                static_cast<unsigned long long>(seed), static_cast<unsigned long long>(cases),
                world_size, max_bytes);
    std::fflush(stdout);
  }
  const std::string repeat = "COLLX_STRESS_SEED=" + std::to_string(seed) +
                             " COLLX_STRESS_CASES=%llu mpirun -np " + std::to_string(world_size) +
                             " " + argv[0];
  Comms comms = make_communicators(world_rank, world_size);
  const int ncomms = static_cast<int>(comms.of_case.size());
  Draw draw(seed);
  std::mt19937_64 order(seed ^
                        (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(world_rank + 1)));
  std::uint64_t failures = 0, calls = 0, nonblocking_calls = 0, batches = 0;
  std::map<std::string, std::uint64_t> per_collective;
  std::uint64_t case_index = 0;
  try {
    for (; case_index < cases; ++case_index) {
      // 70 %: one blocking call; 30 %: 2-4 nonblocking calls in flight together.
      const bool batch = draw.chance(30);
      const int k = batch ? 2 + static_cast<int>(draw.below(3)) : 1;
      std::vector<std::unique_ptr<Run>> runs;
      for (int j = 0; j < k; ++j) {
        Spec s = draw.spec(ncomms, world_size, max_bytes);
        collx::Communicator* c = comms.of_case[s.comm];
        if (!c) continue;  // this rank is not in the communicator
        auto r = std::make_unique<Run>();
        r->spec = std::move(s);
        r->comm = c;
        r->me = c->rank();
        r->p = c->size();
        r->root = static_cast<int>(r->spec.root_draw % static_cast<std::uint32_t>(r->p));
        prepare(*r);
        runs.push_back(std::move(r));
      }
      for (auto& r : runs)
        start(*r, !batch);
      if (batch) {
        ++batches;
        std::vector<std::size_t> idx(runs.size());
        std::iota(idx.begin(), idx.end(), 0);
        std::shuffle(idx.begin(), idx.end(), order);  // a different order on every rank
        for (std::size_t i : idx)
          runs[i]->request.wait();
      }
      for (auto& r : runs) {
        ++calls;
        if (batch) ++nonblocking_calls;
        ++per_collective[std::string(collx::to_string(r->spec.collective))];
        const std::string wrong = check(*r);
        if (!wrong.empty()) {
          ++failures;
          std::fprintf(stderr,
                       "collx-stress: FAILED (seed %llu, case %llu, world rank %d): %s: %s%s\n"
                       "  repeat with: ",
                       static_cast<unsigned long long>(seed),
                       static_cast<unsigned long long>(case_index), world_rank,
                       describe(*r).c_str(), wrong.c_str(), batch ? " (nonblocking batch)" : "");
          std::fprintf(stderr, repeat.c_str(), static_cast<unsigned long long>(case_index + 1));
          std::fprintf(stderr, "\n");
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "collx-stress: FAILED (seed %llu, case %llu, world rank %d): %s\n"
                 "  repeat with: ",
                 static_cast<unsigned long long>(seed), static_cast<unsigned long long>(case_index),
                 world_rank, e.what());
    std::fprintf(stderr, repeat.c_str(), static_cast<unsigned long long>(case_index + 1));
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::uint64_t totals[2] = {failures, calls}, sums[2] = {0, 0};
  MPI_Reduce(totals, sums, 2, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  std::uint64_t any_failed = 0;
  MPI_Allreduce(&failures, &any_failed, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf(
        "collx-stress: %llu cases, %llu calls on rank 0 (%llu nonblocking in %llu "
        "batches), %llu calls over all ranks, %.1f s:",
        static_cast<unsigned long long>(cases), static_cast<unsigned long long>(calls),
        static_cast<unsigned long long>(nonblocking_calls),
        static_cast<unsigned long long>(batches), static_cast<unsigned long long>(sums[1]),
        seconds);
    for (const auto& [name, n] : per_collective)
      std::printf(" %s %llu", name.c_str(), static_cast<unsigned long long>(n));
    std::printf("\n");
    if (any_failed) {
      std::printf("collx-stress: %llu wrong results (seed %llu)\n",
                  static_cast<unsigned long long>(sums[0]), static_cast<unsigned long long>(seed));
    } else {
      std::printf("collx-stress: OK, every result exact (seed %llu)\n",
                  static_cast<unsigned long long>(seed));
    }
  }
  return any_failed ? 1 : 0;
}
