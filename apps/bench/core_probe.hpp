// The round trip of one cache line between two ranks' cores on one node: what the shared-memory
// algorithms' handshakes and copies between cores pay. On a virtual machine the hypervisor may
// place the two virtual CPUs near each other or far apart, and move them (docs/AUTO.md, "Two
// states of the VM"); each run's header and JSON name the figure at its start and its end.
#pragma once

#include <mpi.h>

#include <optional>

namespace collx::bench {

// Collective over `comm`: the median round trip (ns) of one cache line between the first two
// ranks of rank 0's node, handed back and forth through an MPI shared window for about 20 ms;
// nullopt on every rank where rank 0's node holds one rank of `comm`, or under SimGrid's SMPI.
std::optional<double> cache_line_round_trip(MPI_Comm comm);

}  // namespace collx::bench
