// Chooses the host reduction kernel table once, from what this CPU supports.
#include "host_reduce.hpp"

namespace collx::kernels {

namespace isa_generic {
const KernelTable& table();
}
#if defined(COLLX_KERNELS_X86)
namespace isa_avx2 {
const KernelTable& table();
}
namespace isa_avx512 {
const KernelTable& table();
}
#endif

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::generic:
      return "generic";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "unknown";
}

namespace {
bool cpu_has(Isa isa) {
#if defined(COLLX_KERNELS_X86)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::generic:
      return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == Isa::generic;
#endif
}
}  // namespace

const KernelTable* kernel_table(Isa isa) {
  if (!cpu_has(isa)) return nullptr;
  switch (isa) {
    case Isa::generic:
      return &isa_generic::table();
#if defined(COLLX_KERNELS_X86)
    case Isa::avx2:
      return &isa_avx2::table();
    case Isa::avx512:
      return &isa_avx512::table();
#else
    default:
      return nullptr;
#endif
  }
  return nullptr;
}

Isa active_isa() {
  static const Isa chosen = [] {
    for (Isa isa : {Isa::avx512, Isa::avx2}) {
      if (cpu_has(isa)) return isa;
    }
    return Isa::generic;
  }();
  return chosen;
}

const KernelTable& active_kernels() {
  static const KernelTable* table = kernel_table(active_isa());
  return *table;
}

}  // namespace collx::kernels
