// collx-fault: one rank misbehaves inside a collective, the others report what they see.
// run_fault.sh runs it under mpiexec with a time limit and checks the output (CMakeLists.txt).
//
//   collx_fault kill RANK COLLECTIVE ALGORITHM   RANK raises SIGKILL inside the collective
//   collx_fault skip RANK COLLECTIVE ALGORITHM   RANK does not call it (set COLLX_TIMEOUT)
//   collx_fault mismatch WHAT                    rank 1 calls with another WHAT: collective,
//                                                root, count, type, op, gather-root, or all
//                                                of them in turn (set COLLX_CHECK=1)
//   collx_fault mismatch-unchecked WHAT          the same without COLLX_CHECK (count, root,
//                                                collective): never a write past the end
//   collx_fault local-error [COUNT]              the root of a reduce of COUNT int32 (1000)
//                                                passes overlapping buffers (an error only it
//                                                can see), then two allreduces: every rank's
//                                                fail (revoked, naming rank 0 and why)
//
// Every rank ends with one line "collx-fault: rank R: ..." saying what it saw; the exit status
// is 0 when the rank saw what collx promises (docs/RELIABILITY.md), 1 otherwise.
#include <mpi.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "collx/collx.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;

int me = 0;
int world = 0;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void usage() {
  if (me == 0) {
    std::fprintf(stderr,
                 "usage: collx_fault kill|skip RANK COLLECTIVE ALGORITHM | mismatch WHAT | "
                 "mismatch-unchecked WHAT | local-error [COUNT]\n");
  }
  MPI_Finalize();
  std::exit(2);
}

int report(bool ok, const std::string& what) {
  std::printf("collx-fault: rank %d: %s: %s\n", me, ok ? "OK" : "WRONG", what.c_str());
  std::fflush(stdout);
  return ok ? 0 : 1;
}

// One call of `collective` with `algorithm` on buffers of `count` int32 (per block), blocking or
// started (returned request).
std::optional<collx::Request> call(collx::Communicator& comm, Collective collective,
                                   Algorithm algorithm, std::vector<std::int32_t>& a,
                                   std::vector<std::int32_t>& b, std::size_t count, int root,
                                   bool nonblocking) {
  collx::Options o;
  o.algorithm = algorithm;
  const DataType t = DataType::int32;
  const auto p = static_cast<std::size_t>(comm.size());
  a.resize(count * p, comm.rank() + 1);
  b.resize(count * p, 0);
  switch (collective) {
    case Collective::allreduce:
      if (nonblocking) return comm.iallreduce(a.data(), b.data(), count, t, ReduceOp::sum, o);
      comm.allreduce(a.data(), b.data(), count, t, ReduceOp::sum, o);
      break;
    case Collective::broadcast:
      if (nonblocking) return comm.ibroadcast(a.data(), count, t, root, o);
      comm.broadcast(a.data(), count, t, root, o);
      break;
    case Collective::reduce:
      if (nonblocking) return comm.ireduce(a.data(), b.data(), count, t, ReduceOp::sum, root, o);
      comm.reduce(a.data(), b.data(), count, t, ReduceOp::sum, root, o);
      break;
    case Collective::allgather:
      if (nonblocking) return comm.iallgather(a.data(), b.data(), count, t, o);
      comm.allgather(a.data(), b.data(), count, t, o);
      break;
    case Collective::reduce_scatter:
      if (nonblocking) return comm.ireduce_scatter(a.data(), b.data(), count, t, ReduceOp::sum, o);
      comm.reduce_scatter(a.data(), b.data(), count, t, ReduceOp::sum, o);
      break;
    case Collective::alltoall:
      if (nonblocking) return comm.ialltoall(a.data(), b.data(), count, t, o);
      comm.alltoall(a.data(), b.data(), count, t, o);
      break;
    case Collective::barrier:
      if (nonblocking) return comm.ibarrier(o);
      comm.barrier(o);
      break;
    default:
      usage();
  }
  return std::nullopt;
}

// RANK raises SIGKILL after starting the collective (its first messages may be out); the others
// wait in it. The job must end (mpiexec, or COLLX_TIMEOUT on the survivors) naming the rank.
int kill_test(int victim, Collective collective, Algorithm algorithm) {
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<std::int32_t> a, b;
  const std::size_t count = 1 << 18;
  for (int i = 0; i < 3; ++i)  // warm: connections up, segments mapped
    call(comm, collective, algorithm, a, b, count, 0, false);
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == victim) {
    auto request = call(comm, collective, algorithm, a, b, count, 0, true);
    std::printf("collx-fault: rank %d raises SIGKILL inside %s (%s)\n", me,
                std::string(collx::to_string(collective)).c_str(),
                std::string(collx::to_string(algorithm)).c_str());
    std::fflush(stdout);
    if (request) (void)request->test();  // some progress: the rank is inside the operation
    std::raise(SIGKILL);
  }
  const double start = now();
  try {
    for (int i = 0; i < 1000; ++i)
      call(comm, collective, algorithm, a, b, count, 0, false);
    return report(false, "1000 collectives completed without rank " + std::to_string(victim));
  } catch (const collx::Error& e) {
    // What a survivor may say (collx's own report, when the launcher lets it live that long).
    return report(true, "error after " + std::to_string(now() - start) + " s: " + e.what());
  }
}

// RANK does not call the collective (it is the root of a rooted one, so that every other rank
// needs it); the others must get ErrorCode::timeout within COLLX_TIMEOUT (plus a margin) naming
// what they waited on.
int skip_test(int skipper, Collective collective, Algorithm algorithm) {
  const char* t = std::getenv("COLLX_TIMEOUT");
  if (!t) {
    std::fprintf(stderr, "collx_fault skip: set COLLX_TIMEOUT\n");
    return 2;
  }
  const double timeout = std::strtod(t, nullptr);
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<std::int32_t> a, b;
  const std::size_t count = 4096;
  call(comm, collective, algorithm, a, b, count, skipper, false);  // every rank, once
  int status = 0;
  if (me == skipper) {
    status = report(true, "skips " + std::string(collx::to_string(collective)));
  } else {
    const double start = now();
    try {
      call(comm, collective, algorithm, a, b, count, skipper, false);
      status = report(false, "the collective completed without rank " + std::to_string(skipper));
    } catch (const collx::Error& e) {
      const double waited = now() - start;
      const std::string what = e.what();
      // Its own timeout, or the revoke of another rank that timed out first (its notice ends
      // this wait): either way the message says what was waited on.
      const bool timed_out =
          e.code() == collx::ErrorCode::timeout ||
          (e.code() == collx::ErrorCode::revoked && what.find("timeout") != std::string::npos);
      // The error names this rank (the communicator's, also where the wait was inside a
      // node-aware schedule's group of ranks).
      const bool ok = timed_out && waited < timeout + 5.0 &&
                      what.find("waiting on: ") != std::string::npos &&
                      what.find("rank ") != std::string::npos && e.rank() == me;
      status = report(ok, "after " + std::to_string(waited) + " s: " + what);
    }
  }
  // Everybody leaves together (MPI's barrier: collx's communicator may be unusable now).
  MPI_Barrier(MPI_COMM_WORLD);
  return status;
}

// Rank 1 calls with a different collective, root, count, type or op; with COLLX_CHECK=1 every
// rank must get ErrorCode::mismatch, and the communicator stays usable.
int mismatch_test(const std::string& what) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const bool odd = me == 1;
  std::vector<std::int32_t> v(1000, 1);
  std::vector<float> f(1000, 1.0f);
  std::vector<std::int32_t> out(1000 * static_cast<std::size_t>(world), 0);
  int status = 0;
  try {
    if (what == "collective") {
      if (odd) {
        comm.broadcast(v.data(), v.size(), DataType::int32, 0);
      } else {
        comm.allreduce(collx::in_place, v.data(), v.size(), DataType::int32, ReduceOp::sum);
      }
    } else if (what == "root") {
      comm.broadcast(v.data(), v.size(), DataType::int32, odd ? 1 : 0);
    } else if (what == "count") {
      comm.allreduce(collx::in_place, v.data(), odd ? 999 : 1000, DataType::int32, ReduceOp::sum);
    } else if (what == "type") {
      if (odd) {
        comm.allreduce(collx::in_place, f.data(), f.size(), DataType::float32, ReduceOp::sum);
      } else {
        comm.allreduce(collx::in_place, v.data(), v.size(), DataType::int32, ReduceOp::sum);
      }
    } else if (what == "op") {
      comm.allreduce(collx::in_place, v.data(), v.size(), DataType::int32,
                     odd ? ReduceOp::max : ReduceOp::sum);
    } else if (what == "gather-root") {
      comm.gather(v.data(), out.data(), 100, DataType::int32, odd ? 1 : 0);
    } else {
      usage();
    }
    status = report(false, "mismatched " + what + " not detected");
  } catch (const collx::Error& e) {
    status = report(e.code() == collx::ErrorCode::mismatch,
                    "mismatched " + what + ": error: " + e.what());
  }
  // Usable afterwards: a matching call gives the right result.
  std::int32_t one = 1;
  try {
    comm.allreduce(collx::in_place, &one, 1, DataType::int32, ReduceOp::sum);
    if (one != world) status = report(false, "the next allreduce gave " + std::to_string(one));
  } catch (const collx::Error& e) {
    status = report(false, std::string("the next allreduce failed: ") + e.what());
  }
  return status;
}

// Without COLLX_CHECK (an erroneous program, but collx may not write outside the buffers it
// was given, crash or wait for ever when COLLX_TIMEOUT is set):
//   count       rank r allreduces 1000 + 100000 r elements (issue 13, case 4): every rank must
//               end with an error (a message longer than its buffer, or a shorter one)
//   root        rank 1 broadcasts from root 1, the others from root 0
//   collective  rank 1 broadcasts, the others allreduce
// For root and collective a rank may also complete; for all three the guard words around the
// buffer stay intact and the job ends.
int mismatch_unchecked_test(const std::string& what) {
  collx::Communicator comm(MPI_COMM_WORLD);
  const bool odd = me == 1;
  const std::size_t count =
      what == "count" ? 1000 + 100000 * static_cast<std::size_t>(me) : std::size_t{1000};
  const std::size_t guard = 1024;
  std::vector<float> buf(count + 2 * guard, -7.0f);
  for (std::size_t i = guard; i < guard + count; ++i)
    buf[i] = 1.0f;
  float* data = buf.data() + guard;
  int status = 0;
  try {
    if (what == "count") {
      comm.allreduce(collx::in_place, data, count, DataType::float32, ReduceOp::sum);
    } else if (what == "root") {
      comm.broadcast(data, count, DataType::float32, odd ? 1 : 0);
    } else if (what == "collective") {
      if (odd) {
        comm.broadcast(data, count, DataType::float32, 0);
      } else {
        comm.allreduce(collx::in_place, data, count, DataType::float32, ReduceOp::sum);
      }
    } else {
      usage();
    }
    status = report(what != "count", "mismatched " + what + " gave no error");
  } catch (const collx::Error& e) {
    status = report(true, std::string("error: ") + e.what());
  }
  bool intact = true;
  for (std::size_t i = 0; i < guard; ++i)
    intact = intact && buf[i] == -7.0f && buf[guard + count + i] == -7.0f;
  if (!intact) status = report(false, "wrote outside the buffer");
  MPI_Barrier(MPI_COMM_WORLD);
  return status;
}

// The root of a reduce passes overlapping send and receive buffers: only it can see the error.
// collx promises that the other ranks are not left waiting: after the failed reduce an allreduce
// on the same communicator either works on every rank or fails with a clear error on every
// rank, within the test's time limit.
int local_error_test(std::size_t count) {
  collx::Communicator comm(MPI_COMM_WORLD);
  std::vector<std::int32_t> v(2 * count, 1);
  bool ok = true;
  std::string seen;
  auto revoked_by_root = [](const collx::Error& e) {
    const std::string what = e.what();
    return e.code() == collx::ErrorCode::revoked &&
           what.find(me == 0 ? "this rank failed in reduce" : "rank 0 failed in reduce") !=
               std::string::npos &&
           what.find("overlap") != std::string::npos;
  };
  try {
    // At the root recvbuf = sendbuf + 1: they overlap (not the in-place form).
    comm.reduce(v.data(), me == 0 ? v.data() + 1 : nullptr, count, DataType::int32, ReduceOp::sum,
                0);
    // The others may finish their part (a small message leaves at once) or learn of the root's
    // failure while they wait (a large one waits for the root).
    ok = ok && me != 0;
    seen = "reduce returned";
  } catch (const collx::Error& e) {
    ok = ok && (me == 0 ? e.code() == collx::ErrorCode::invalid_argument : revoked_by_root(e));
    seen = std::string("reduce: ") + e.what();
  }
  // Every rank's next calls fail: the communicator is revoked, and says by whom and why.
  for (int call = 0; call < 2; ++call) {
    std::int32_t one = 1;
    try {
      comm.allreduce(collx::in_place, &one, 1, DataType::int32, ReduceOp::sum);
      ok = false;
      seen += "; allreduce gave " + std::to_string(one);
    } catch (const collx::Error& e) {
      ok = ok && revoked_by_root(e);
      seen += std::string("; allreduce: ") + e.what();
    }
  }
  // A new communicator works.
  collx::Communicator fresh(MPI_COMM_WORLD);
  std::int32_t one = 1;
  fresh.allreduce(collx::in_place, &one, 1, DataType::int32, ReduceOp::sum);
  ok = ok && one == world;
  const int status =
      report(ok, seen + "; a new communicator's allreduce gave " + std::to_string(one));
  MPI_Barrier(MPI_COMM_WORLD);
  return status;
}

Collective collective_arg(const char* s) {
  auto c = collx::parse_collective(s);
  if (!c) usage();
  return *c;
}

Algorithm algorithm_arg(const char* s) {
  auto a = collx::parse_algorithm(s);
  if (!a) usage();
  return *a;
}

}  // namespace

int main(int argc, char** argv) {
  collx::Environment environment(argc, argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (argc < 2) usage();
  const std::string mode = argv[1];
  int status = 0;
  if ((mode == "kill" || mode == "skip") && argc == 5) {
    const int rank = std::atoi(argv[2]);
    if (rank < 0 || rank >= world) usage();
    status = mode == "kill" ? kill_test(rank, collective_arg(argv[3]), algorithm_arg(argv[4]))
                            : skip_test(rank, collective_arg(argv[3]), algorithm_arg(argv[4]));
  } else if (mode == "mismatch" && argc == 3) {
    if (std::string(argv[2]) == "all") {
      for (const char* what : {"collective", "root", "count", "type", "op", "gather-root"})
        status |= mismatch_test(what);
    } else {
      status = mismatch_test(argv[2]);
    }
  } else if (mode == "mismatch-unchecked" && argc == 3) {
    status = mismatch_unchecked_test(argv[2]);
  } else if (mode == "local-error" && argc <= 3) {
    status = local_error_test(argc > 2 ? std::stoul(argv[2]) : 1000);
  } else {
    usage();
  }
  return status;
}
