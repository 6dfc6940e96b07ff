// The rows collx-bench times at every size: each an algorithm column (plan.hpp) on a runner, a
// communicator with its benchmark of the collective.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench_collective.hpp"
#include "collx/collx.hpp"
#include "plan.hpp"

namespace collx::bench {

// A communicator the collx rows run on: the default one, or one per --transport.
struct Runner {
  std::string transport;  // "" without --transport
  std::unique_ptr<collx::Communicator> comm;
  std::unique_ptr<collx::bench::CollectiveBench> bench;
};

// One row per size: a column on a runner (the mpi column on the first runner only).
struct Row {
  std::string key;  // "ring", "ring@ucx", "mpi"
  Column column;
  Runner* runner = nullptr;
};

// The rows: every collx column on every runner; the MPI library's own call and the memcpy
// reference once (on the first runner's buffers).
std::vector<Row> make_table(const std::vector<Column>& columns, std::vector<Runner>& runners);

// A runner per --transport, each on a duplicate of `comm` moving its bytes that way; without
// --transport one runner on `comm` itself.
std::vector<Runner> make_runners(collx::Communicator& comm, const Plan& plan);

// The transports of the collx rows, "mpi" or "mpi,ucx".
std::string describe_transports(const collx::Communicator& comm,
                                const std::vector<Runner>& runners);

}  // namespace collx::bench
