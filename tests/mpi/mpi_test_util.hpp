// Helpers for tests that run on real MPI ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace collx::testing {

// True on every rank when `ok` holds on every rank, so all ranks take the same branch.
inline bool all_ranks(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int mine = ok ? 1 : 0;
  int all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

// True when `bytes` at `data` are identical on every rank (compared with rank 0's copy).
inline bool identical_on_all_ranks(const void* data, std::size_t bytes,
                                   MPI_Comm comm = MPI_COMM_WORLD) {
  std::vector<unsigned char> root(bytes);
  if (bytes > 0) std::memcpy(root.data(), data, bytes);
  // Sizes here stay far below INT_MAX.
  MPI_Bcast(root.data(), static_cast<int>(bytes), MPI_BYTE, 0, comm);
  return all_ranks(bytes == 0 || std::memcmp(root.data(), data, bytes) == 0, comm);
}

}  // namespace collx::testing
