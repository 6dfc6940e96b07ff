// small_call_probe PATH COLLECTIVE CALLS: CALLS blocking calls of 8 B (barrier: none) of
// COLLECTIVE (broadcast from rank 0, reduce to the last rank, allreduce, barrier) after 50
// untimed ones, for counting what one call executes (scripts/small-call-count.sh runs it under
// valgrind --tool=callgrind, counting inside probe_calls only). PATH:
//   native     the MPI library's own call (PMPI_Bcast ...), what a program without collx runs;
//   delegated  collx's call with its size class settled on the MPI library's collective
//              (CommState::note_settled, as auto's trials leave it): the delegated path;
//   collx      collx's call with Algorithm::automatic as auto's trials left it: the class
//              settled on collx's own choice (the trials run in the untimed calls), or the
//              shared arena;
//   dropin     (small_call_probe_dropin, linked with libcollx_mpi) the program's MPI_Bcast ...
//              through the drop-in, its size class settled on the MPI library's collective: what
//              an unmodified program runs where auto chose the MPI library;
//   dropin_collx  (the same program) the program's MPI_Bcast ... through the drop-in on collx's
//              own path, as auto left it or COLLX_ALGO chose: what the drop-in adds to collx's
//              call (the collx row with the same COLLX_ALGO is the call without it).
// Prints nothing but errors; exit status 0 when every call's result was right.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autotune.hpp"
#ifndef COLLX_PROBE_DROPIN
#define COLLX_PROBE_DROPIN 0
#endif
#if COLLX_PROBE_DROPIN
#include "interpose.hpp"
#endif
#include "collx/collx.hpp"
#include "comm_state.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using collx::DataType;
using collx::ReduceOp;

int usage() {
  std::fprintf(stderr,
               "usage: small_call_probe native|delegated|collx|dropin|dropin_collx "
               "broadcast|reduce|allreduce|barrier "
               "CALLS\n");
  return 2;
}

// The counted calls, a function of their own so that callgrind counts only them
// (--toggle-collect=*probe_calls*).
template <class Call>
[[gnu::noinline]] void probe_calls(int calls, Call& one_call) {
  for (int i = 0; i < calls; ++i)
    one_call();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 4) return usage();
  const std::string path = argv[1], name = argv[2];
  const int calls = std::atoi(argv[3]);
  Collective collective{};
  if (name == "broadcast") {
    collective = Collective::broadcast;
  } else if (name == "reduce") {
    collective = Collective::reduce;
  } else if (name == "allreduce") {
    collective = Collective::allreduce;
  } else if (name == "barrier") {
    collective = Collective::barrier;
  } else {
    return usage();
  }
  const bool through_dropin = COLLX_PROBE_DROPIN && (path == "dropin" || path == "dropin_collx");
  if ((path != "native" && path != "delegated" && path != "collx" && !through_dropin) || calls < 0)
    return usage();
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int root = collective == Collective::reduce ? size - 1 : 0;
  int wrong = 0;
  try {
    collx::Communicator comm(MPI_COMM_WORLD);
    if (path == "delegated" || path == "dropin") {
      collx::detail::ClassTuner settled;
      const std::vector<Algorithm> only_mpi = {Algorithm::mpi};
      settled.start(only_mpi, 1, collx::detail::ClassTuner::Meetings::never, Algorithm::mpi);
#if COLLX_PROBE_DROPIN
      collx::Communicator& settled_comm =
          path == "dropin" ? collx_mpi::communicator_of(MPI_COMM_WORLD) : comm;
#else
      collx::Communicator& settled_comm = comm;
#endif
      collx::detail::state_of(settled_comm)
          .note_settled(collective, collective == Collective::barrier ? 0 : 8, settled);
    }
    std::int64_t value = rank + 1, out = 0;
    auto one_call = [&] {
      out = 0;
      if (through_dropin) {
        switch (collective) {
          case Collective::broadcast:
            value = rank == 0 ? 42 : 0;
            MPI_Bcast(&value, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
            wrong += value != 42;
            break;
          case Collective::reduce:
            MPI_Reduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD);
            wrong += rank == root && out != std::int64_t{size} * (size + 1) / 2;
            break;
          case Collective::allreduce:
            MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            wrong += out != std::int64_t{size} * (size + 1) / 2;
            break;
          default:
            MPI_Barrier(MPI_COMM_WORLD);
        }
        return;
      }
      if (path == "native") {
        switch (collective) {
          case Collective::broadcast:
            value = rank == 0 ? 42 : 0;
            PMPI_Bcast(&value, 8, MPI_BYTE, 0, MPI_COMM_WORLD);
            wrong += value != 42;
            break;
          case Collective::reduce:
            PMPI_Reduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, root, MPI_COMM_WORLD);
            wrong += rank == root && out != std::int64_t{size} * (size + 1) / 2;
            break;
          case Collective::allreduce:
            PMPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
            wrong += out != std::int64_t{size} * (size + 1) / 2;
            break;
          default:
            PMPI_Barrier(MPI_COMM_WORLD);
        }
        return;
      }
      switch (collective) {
        case Collective::broadcast:
          value = rank == 0 ? 42 : 0;
          comm.broadcast(&value, 1, DataType::int64, 0);
          wrong += value != 42;
          break;
        case Collective::reduce:
          value = rank + 1;
          comm.reduce(&value, &out, 1, DataType::int64, ReduceOp::sum, root);
          wrong += rank == root && out != std::int64_t{size} * (size + 1) / 2;
          break;
        case Collective::allreduce:
          value = rank + 1;
          comm.allreduce(&value, &out, 1, DataType::int64, ReduceOp::sum);
          wrong += out != std::int64_t{size} * (size + 1) / 2;
          break;
        default:
          comm.barrier();
      }
    };
    for (int i = 0; i < 50; ++i)
      one_call();
    probe_calls(calls, one_call);
  } catch (const collx::Error& e) {
    std::fprintf(stderr, "small_call_probe: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (wrong) std::fprintf(stderr, "small_call_probe rank %d: %d wrong results\n", rank, wrong);
  MPI_Finalize();
  return wrong ? 1 : 0;
}
