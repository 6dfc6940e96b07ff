// Host reduction kernels built for the avx512 instruction set (flags in kernels/CMakeLists.txt).
#define COLLX_KERNEL_ISA_NS isa_avx512
#include "host_reduce_impl.hpp"
