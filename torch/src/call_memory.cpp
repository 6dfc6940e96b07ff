// Where a call's tensors live (process_group.hpp, CallMemory): all on the CPU, or all on one CUDA
// device, whose current stream collx's device path works on; and the current CUDA device set
// for a call (DeviceScope).
#include "process_group.hpp"

#include <optional>

#include "checks.hpp"

namespace collx_torch {
using namespace detail;

CallMemory ProcessGroupCollx::memory_of(const Staging& s, const char* op) const {
  CallMemory memory;
  memory.options = host_;
  std::optional<at::Device> device;
  auto look = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().is_cpu()) {
      if (device) refuse(op, "CPU and CUDA tensors in one call");
      return;
    }
    if (device && *device != t.device()) {
      refuse(op, "tensors on ", *device, " and ", t.device(), " in one call");
    }
    device = t.device();
  };
  bool cpu = false;
  for (const at::Tensor& t : s.keep_alive) {
    if (t.defined() && t.device().is_cpu()) cpu = true;
    look(t);
  }
  for (const at::Tensor& t : s.outputs) {
    if (t.defined() && t.device().is_cpu()) cpu = true;
    look(t);
  }
  if (device && cpu) refuse(op, "CPU and CUDA tensors in one call");
#ifdef COLLX_TORCH_CUDA
  if (device) {
    // collx reads the inputs after the work enqueued on the device's current stream, and its
    // request completes once the result is complete on the device (collx/options.hpp).
    memory.device = device->index();
    memory.options.memory = collx::MemoryKind::device;
    memory.options.stream = c10::cuda::getCurrentCUDAStream(device->index()).stream();
  }
#endif
  return memory;
}

DeviceScope::DeviceScope(int device) {
#ifdef COLLX_TORCH_CUDA
  if (device >= 0) guard_.emplace(static_cast<c10::DeviceIndex>(device));
#else
  (void)device;
#endif
}

}  // namespace collx_torch
