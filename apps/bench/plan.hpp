// The plan: what a run measures (the collective, type and op, the sizes, the algorithm columns,
// the memory, the transports, --cold's cache), from the command line's values, parsed and
// checked; and the checks that need the ranks together (the nodes' memory, -m device's devices).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "cache_probe.hpp"
#include "cli.hpp"
#include "collx/collx.hpp"

namespace collx::bench {

// An algorithm column: a collx algorithm (automatic for auto), the MPI library's call, or the
// memcpy reference (one local copy of the result buffer: the memory-bandwidth limit).
struct Column {
  std::string name;
  bool mpi = false;
  Algorithm algorithm = Algorithm::automatic;
  bool memcpy = false;
  bool collx() const { return !mpi && !memcpy; }
};

// What a run measures: the command line's values, parsed and checked.
struct Plan {
  Collective collective = Collective::allreduce;
  collx::DataType type = collx::DataType::float32;
  collx::ReduceOp op = collx::ReduceOp::sum;
  std::size_t min_bytes = 0;
  std::size_t max_bytes = 0;
  std::vector<Column> columns;
  bool device = false;                  // -m device
  std::vector<std::string> transports;  // --transport's, each once; empty: the default one
  std::size_t segment_bytes = 0;        // --segment; 0: the library's choice
  CacheSize llc;                        // --cold: the last-level cache assumed
  bool memcpy_row() const {
    return std::any_of(columns.begin(), columns.end(), [](const Column& c) { return c.memcpy; });
  }
};

// The checks that need no communicator, in `plan`; "" or why not (the same on every rank).
std::string make_plan(const Settings& s, Plan& plan);

// Whether the buffers of the largest size (and --cold's pool) fit in the nodes' memory, with the
// ranks of a node together (collective: every rank gets the same answer); "" or why not, in
// rank 0's figures. Without it a mistyped -e or --llc allocates until the node runs out of
// memory (the kernel kills a rank) or takes hours growing towards it.
std::string memory_error(const Settings& s, const Plan& plan);

// -m device: whether every rank has a device (collective); the lowest rank without one says why.
bool device_on_every_rank(int rank, int nranks);

}  // namespace collx::bench
