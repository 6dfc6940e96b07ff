// The drop-in's delegated calls (interpose.hpp: goes_to_library, LibraryCall): where auto settled
// a size class on the MPI library's own collective, the program's call goes to the MPI library on
// the program's communicator, remembered by its arguments. Every rank must decide alike whatever
// its own arguments look like (a derived datatype on some ranks, MPI_IN_PLACE at the root, other
// communicators in between, a freed communicator whose handle comes back), or the ranks meet in
// different calls and hang. Here every size class of every collective is settled on the MPI
// library on MPI_COMM_WORLD and on a half of it (as auto's trials leave them), and each call's
// result is checked against the values it must have.
//
//   delegated_calls [ROUNDS=3]      (linked with libcollx_mpi before the MPI library)
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "autotune.hpp"
#include "collx/info.hpp"
#include "comm_state.hpp"
#include "interpose.hpp"
#include "memory.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;

int failures = 0;
int world_rank = 0;

void expect(bool ok, const char* what, int round) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "delegated_calls rank %d round %d: %s wrong\n", world_rank, round, what);
  }
}

// Every size class of every collective of `comm`'s collx state settled on the MPI library.
void settle_on_library(MPI_Comm comm) {
  collx::Communicator& c = collx_mpi::communicator_of(comm);
  collx::detail::CommState& s = collx::detail::state_of(c);
  collx::detail::ClassTuner settled;
  const std::vector<Algorithm> only_mpi = {Algorithm::mpi};
  settled.start(only_mpi, 1, collx::detail::ClassTuner::Meetings::never, Algorithm::mpi);
  for (Collective collective : {Collective::allreduce, Collective::broadcast, Collective::reduce,
                                Collective::allgather, Collective::reduce_scatter,
                                Collective::gather, Collective::scatter, Collective::alltoall}) {
    for (int k = 0; k < 40; ++k)
      s.note_settled(collective, collx::detail::size_class_max_bytes(k), settled);
  }
  s.note_settled(Collective::barrier, 0, settled);
}

// The calls of one round on `comm` (of `size` ranks, this rank `rank`): each with its result
// checked. `derived`: this rank describes its int blocks of 4 as one element of a contiguous
// datatype (the others as 4 MPI_INTs): the type signatures match, as MPI requires.
void round_on(MPI_Comm comm, int round, bool derived) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Datatype four_ints = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(4, MPI_INT, &four_ints);
  MPI_Type_commit(&four_ints);
  const MPI_Datatype type = derived ? four_ints : MPI_INT;
  const int count = derived ? 1 : 4;
  const int n = 4;

  // allreduce, twice (the second call is the remembered one), then in place
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<int> in(n), out(n, -1);
    for (int i = 0; i < n; ++i)
      in[static_cast<std::size_t>(i)] = rank + i + round;
    MPI_Allreduce(in.data(), out.data(), count, type, MPI_SUM, comm);
    bool ok = true;
    for (int i = 0; i < n; ++i)
      ok &= out[static_cast<std::size_t>(i)] == size * (size - 1) / 2 + size * (i + round);
    expect(ok, "MPI_Allreduce", round);
  }
  {
    std::vector<int> buffer(n, rank + 1);
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, type, MPI_MAX, comm);
    expect(buffer[0] == size && buffer[3] == size, "MPI_Allreduce in place", round);
  }
  // A floating-point sum at three ranks or more (its class untried): up to 8 KiB the MPI
  // library's own collective where the table's choice is a message algorithm
  // (CommState::library_for_untried), else the table's choice; exact values either way.
  {
    std::vector<double> in(3, rank + 0.5), out(3, 0);
    MPI_Allreduce(in.data(), out.data(), 3, MPI_DOUBLE, MPI_SUM, comm);
    expect(out[2] == size * (size - 1) / 2.0 + 0.5 * size, "MPI_Allreduce double", round);
  }
  // broadcast and reduce from every root, in place at the root for reduce
  for (int root = 0; root < size; ++root) {
    std::vector<int> buffer(n, rank == root ? 100 + root + round : -1);
    MPI_Bcast(buffer.data(), count, type, root, comm);
    expect(buffer[0] == 100 + root + round && buffer[3] == 100 + root + round, "MPI_Bcast", round);
    std::vector<int> mine(n, rank + 1), result(n, -1);
    if (rank == root) {
      MPI_Reduce(MPI_IN_PLACE, mine.data(), count, type, MPI_SUM, root, comm);
      expect(mine[0] == size * (size + 1) / 2 && mine[3] == size * (size + 1) / 2,
             "MPI_Reduce in place", round);
    } else {
      MPI_Reduce(mine.data(), nullptr, count, type, MPI_SUM, root, comm);
    }
  }
  // allgather (in place on odd ranks) and alltoall
  {
    std::vector<int> all(static_cast<std::size_t>(n * size), -1);
    std::vector<int> own(n, rank * 10);
    for (int i = 0; i < n; ++i)
      all[static_cast<std::size_t>(rank * n + i)] = rank * 10;
    if (rank % 2 == 1)
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), count, type, comm);
    else
      MPI_Allgather(own.data(), count, type, all.data(), count, type, comm);
    bool ok = true;
    for (int r = 0; r < size; ++r)
      ok &= all[static_cast<std::size_t>(r * n)] == r * 10 &&
            all[static_cast<std::size_t>(r * n + 3)] == r * 10;
    expect(ok, "MPI_Allgather", round);
    std::vector<int> send(static_cast<std::size_t>(n * size)),
        recv(static_cast<std::size_t>(n * size), -1);
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i)
        send[static_cast<std::size_t>(r * n + i)] = rank * 1000 + r;
    MPI_Alltoall(send.data(), count, type, recv.data(), count, type, comm);
    ok = true;
    for (int r = 0; r < size; ++r)
      ok &= recv[static_cast<std::size_t>(r * n + 2)] == r * 1000 + rank;
    expect(ok, "MPI_Alltoall", round);
  }
  // gather and scatter from the last rank, in place there
  {
    const int root = size - 1;
    std::vector<int> all(static_cast<std::size_t>(n * size), -1), own(n, rank + 7);
    if (rank == root) {
      for (int i = 0; i < n; ++i)
        all[static_cast<std::size_t>(root * n + i)] = rank + 7;
      MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), count, type, root, comm);
      bool ok = true;
      for (int r = 0; r < size; ++r)
        ok &= all[static_cast<std::size_t>(r * n + 1)] == r + 7;
      expect(ok, "MPI_Gather", round);
    } else {
      MPI_Gather(own.data(), count, type, nullptr, 0, MPI_DATATYPE_NULL, root, comm);
    }
    std::vector<int> block(n, -1);
    if (rank == root) {
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < n; ++i)
          all[static_cast<std::size_t>(r * n + i)] = r * 3 + round;
      MPI_Scatter(all.data(), count, type, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm);
    } else {
      MPI_Scatter(nullptr, 0, MPI_DATATYPE_NULL, block.data(), count, type, root, comm);
      expect(block[0] == rank * 3 + round && block[3] == rank * 3 + round, "MPI_Scatter", round);
    }
  }
  // reduce_scatter_block
  {
    std::vector<int> in(static_cast<std::size_t>(n * size)), out(n, -1);
    for (int i = 0; i < n * size; ++i)
      in[static_cast<std::size_t>(i)] = i;
    MPI_Reduce_scatter_block(in.data(), out.data(), count, type, MPI_SUM, comm);
    expect(out[0] == size * rank * n && out[3] == size * (rank * n + 3), "MPI_Reduce_scatter_block",
           round);
  }
  MPI_Barrier(comm);
  MPI_Type_free(&four_ints);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  settle_on_library(MPI_COMM_WORLD);
  // A half of the ranks, settled too; the other half's communicator keeps collx's choices.
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &half);
  MPI_Barrier(half);  // makes collx's state of it
  if (world_rank % 2 == 0) settle_on_library(half);
  for (int round = 0; round < rounds; ++round) {
    if (round == 1) {
      // goes_to_library says so for a settled class where the process has host memory only
      // (known from the first call on); an order-sensitive sum where its class ran the MPI
      // library untried (the double sum above).
      const bool host_only = collx::detail::process_is_host_only.load();
      const collx::Communicator& world = collx_mpi::communicator_of(MPI_COMM_WORLD);
      expect(world.goes_to_library(Collective::allreduce, 4, collx::DataType::int32,
                                   collx::ReduceOp::sum) == host_only,
             "goes_to_library (int sum)", round);
      expect(world.goes_to_library(Collective::barrier, 0, collx::DataType::uint8) == host_only,
             "goes_to_library (barrier)", round);
      if (size >= 3) {
        const bool message_choice = !collx::runs_through_arena(
            Collective::allreduce, collx::auto_algorithm(Collective::allreduce, 3 * sizeof(double),
                                                         size, world.shared_memory()));
        expect(world.goes_to_library(Collective::allreduce, 3, collx::DataType::float64,
                                     collx::ReduceOp::sum) == (host_only && message_choice),
               "goes_to_library (double sum at 3 ranks)", round);
      }
    }
    // Ranks alternate their datatypes' forms, and the halves run other calls in between.
    round_on(MPI_COMM_WORLD, round, (world_rank + round) % 2 == 1);
    round_on(half, round, world_rank % 3 == 0);
    round_on(MPI_COMM_WORLD, round, world_rank % 2 == 0);
    // A communicator freed and another made: its handle may come back, with no settled class.
    MPI_Comm other = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    round_on(other, round, false);
    MPI_Comm_free(&other);
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    round_on(other, round, world_rank == 0);
    MPI_Comm_free(&other);
  }
  MPI_Comm_free(&half);
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (world_rank == 0)
    std::printf("delegated_calls: %d ranks, %d rounds, %d failures\n", size, rounds, total);
  MPI_Finalize();
  return total == 0 ? 0 : 1;
}
