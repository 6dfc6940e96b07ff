// collx: MPI collectives written by hand from point-to-point messages.
#pragma once

#include "collx/algorithm.hpp"
#include "collx/build_config.hpp"
#include "collx/communicator.hpp"
#include "collx/environment.hpp"
#include "collx/error.hpp"
#include "collx/info.hpp"
#include "collx/options.hpp"
#include "collx/request.hpp"
#include "collx/tuning.hpp"
#include "collx/types.hpp"
