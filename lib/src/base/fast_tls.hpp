// The storage class of the thread-locals that every call reads.
#pragma once

#include "collx/build_config.hpp"

// The initial-exec model: one load a read, where the default model in a shared library costs a
// call to __tls_get_addr; for small variables only (they take the static TLS block, which a
// library loaded later by dlopen shares with every other). Not under SMPI: there every simulated
// rank is a copy of the program in one process, and their initial-exec variables fill glibc's
// static TLS block ("cannot allocate memory in static TLS block").
#if COLLX_SMPI
#define COLLX_FAST_TLS thread_local
#else
#define COLLX_FAST_TLS [[gnu::tls_model("initial-exec")]] thread_local
#endif
