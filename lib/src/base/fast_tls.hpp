// The storage class of the thread-locals that every call reads.
#pragma once

#include "collx/build_config.hpp"

// The initial-exec model: one load a read instead of a call to __tls_get_addr in a shared
// library; for small variables only (the static TLS block is shared). Not under SMPI, where
// every simulated rank's copy would fill glibc's static TLS block.
#if COLLX_SMPI
#define COLLX_FAST_TLS thread_local
#else
#define COLLX_FAST_TLS [[gnu::tls_model("initial-exec")]] thread_local
#endif
