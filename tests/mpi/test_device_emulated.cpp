// The device-memory tests on the emulated device (host memory, deferred and reordered streams).
#include <cstring>
#include <memory>
#include <vector>

#include "device_api.hpp"
#include "emulated_device.hpp"
#include "test_device.hpp"

namespace collx::testing {

namespace {

class Emulated final : public TestDevice {
 public:
  Emulated() : device_(std::make_shared<EmulatedDevice>(12345)) { detail::set_device_api(device_); }
  std::string unavailable() override { return ""; }
  void* allocate(std::size_t bytes) override {
    return device_->allocate(detail::DeviceApi::Memory::device, bytes);
  }
  void release(void* p) override { device_->free(detail::DeviceApi::Memory::device, p); }
  // As cudaMemcpy from pageable memory: the upload returns once the source has been read, and
  // reaches device memory later, in the default stream's order (a call must wait for it); the
  // download returns once that stream's work so far and the copy are done.
  void upload(void* dst, const void* src, std::size_t bytes) override {
    if (bytes == 0) return;
    auto staged = std::make_shared<std::vector<std::byte>>(
        static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + bytes);
    device_->enqueue(device_->default_stream(),
                     [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    device_->synchronize_stream(device_->default_stream());
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void* create_stream() override { return device_->create_stream(); }
  void destroy_stream(void* stream) override { device_->destroy_stream(stream); }
  void upload_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    device_->enqueue(stream, [=] { std::memcpy(dst, src, bytes); });
  }
  void download_async(void* dst, const void* src, std::size_t bytes, void* stream) override {
    device_->enqueue(stream, [=] { std::memcpy(dst, src, bytes); });
  }
  void synchronize(void* stream) override { device_->synchronize_stream(stream); }
  std::function<void()> hold(void* stream) override {
    auto held = std::make_shared<StreamHold>();
    device_->hold(stream, held);
    return [held] { held->open(); };
  }

 private:
  std::shared_ptr<EmulatedDevice> device_;
};

}  // namespace

TestDevice& test_device() {
  static Emulated device;
  return device;
}

}  // namespace collx::testing
