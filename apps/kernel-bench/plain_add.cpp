// The yardstick: the plainest c[i] = a[i] + b[i] loop, built with -O3 -march=native (see
// CMakeLists.txt), against which collx's host reduction kernel is measured.
#include <cstddef>

namespace collx::kernel_bench {

void plain_add(float* __restrict c, const float* __restrict a, const float* __restrict b,
               std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

}  // namespace collx::kernel_bench
