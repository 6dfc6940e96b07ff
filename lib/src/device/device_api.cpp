#include "device_api.hpp"

#include <mutex>

#include "collx/build_config.hpp"

namespace collx::detail {

std::atomic<bool> process_is_host_only{false};

#if COLLX_HAVE_CUDA
std::shared_ptr<DeviceApi> make_cuda_api();  // device_api_cuda.cpp
#endif

namespace {

struct Registry {
  std::mutex mutex;
  std::shared_ptr<DeviceApi> owner;
  // owner.get(): device_api() takes no lock once an API is there (every call asks it).
  std::atomic<DeviceApi*> api{nullptr};
};

Registry& registry() {
  // Never destroyed: communicators may be destroyed during static destruction.
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

DeviceApi* device_api() {
  DeviceApi* api = registry().api.load(std::memory_order_acquire);
  if (COLLX_HAVE_CUDA && api == nullptr) api = shared_device_api().get();
  return api;
}

std::shared_ptr<DeviceApi> shared_device_api() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
#if COLLX_HAVE_CUDA
  if (r.owner == nullptr) {
    r.owner = make_cuda_api();
    r.api.store(r.owner.get(), std::memory_order_release);
  }
#endif
  return r.owner;
}

void set_device_api(std::shared_ptr<DeviceApi> api) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  // A replaced API stays alive as long as engines created with it hold it.
  r.owner = std::move(api);
  r.api.store(r.owner.get(), std::memory_order_release);
  // A new API may see devices the previous one did not.
  process_is_host_only.store(false, std::memory_order_relaxed);
}

}  // namespace collx::detail
