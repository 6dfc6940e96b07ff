// Host reduction kernels built for the generic instruction set (flags in kernels/CMakeLists.txt).
#define COLLX_KERNEL_ISA_NS isa_generic
#include "host_reduce_impl.hpp"
