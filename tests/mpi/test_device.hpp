// The device the device-memory tests run on: a real CUDA device (test_device_cuda.cpp, skipped
// where there is none) or the emulated one (test_device_emulated.cpp, everywhere).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace collx::testing {

class TestDevice {
 public:
  virtual ~TestDevice() = default;
  // "" when the tests can run; otherwise why not (they skip).
  virtual std::string unavailable() = 0;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) = 0;
  // Blocking copies between the host and device memory.
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  // A stream of the test's own, and copies ordered on it.
  virtual void* create_stream() = 0;
  virtual void destroy_stream(void* stream) = 0;
  virtual void upload_async(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual void download_async(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual void synchronize(void* stream) = 0;
  // Holds `stream` (its work from now on waits, as behind a long kernel) until the returned
  // function is called; only the emulated device can (on a GPU only a host function could, and
  // a host function must never wait for a collective): the tests that use it are built for the
  // emulated device only (COLLX_TEST_DEVICE_CAN_HOLD).
  virtual std::function<void()> hold(void* stream) = 0;
};

// The process's test device (installs the emulation on first use where that is the backend).
TestDevice& test_device();

}  // namespace collx::testing
