// The clock that times blocking calls for auto's trials (api/comm_state.hpp).
#pragma once

#include <mpi.h>

#include <chrono>
#include <ratio>

#include "collx/build_config.hpp"

namespace collx::detail {

#if COLLX_SMPI
// Under SimGrid's SMPI the simulated time (MPI_Wtime): the steady clock would measure the
// simulator.
struct CallClock {
  using rep = double;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<CallClock>;
  static constexpr bool is_steady = true;
  static time_point now() { return time_point(duration(MPI_Wtime())); }
};
#else
using CallClock = std::chrono::steady_clock;
#endif

}  // namespace collx::detail
