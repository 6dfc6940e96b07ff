// collx-kernel-bench-gpu: bandwidth of collx's device reduction kernels as a share of what
// cudaMemcpy device-to-device reaches on the same GPU, measured in the same run.
//
// For each element type: c = a + b on three arrays (default 256 MiB each, far larger than L2),
// and a D2D copy of one array, alternated repetition by repetition so that both see the same
// clocks. Bandwidth is bytes moved / time: the copy moves 2 arrays (read + write), the
// reduction 3 (2 reads + 1 write). Each row reports the median of the timed repetitions
// (cudaEvent). The goal row, "a+b->c", should reach --target (default 0.85) of the copy.
// The result is checked against the host kernels before anything is timed.
//
// --round-trips N then times the small CUDA round trips a staged call is made of (8 bytes).
//
// Exit status: 0 done, 1 error or wrong result, 3 below target with --check-target,
// 77 no CUDA device (nothing measured).
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "collx/types.hpp"
#include "device_reduce.hpp"
#include "device_runtime.hpp"
#include "host_reduce.hpp"

namespace {

using collx::DataType;
using collx::ReduceOp;
using collx::kernels::check_cuda;
using collx::kernels::CudaEvent;
using collx::kernels::CudaStream;

constexpr int kExitNoDevice = 77;
constexpr int kExitBelowTarget = 3;

struct Options {
  std::size_t mib = 256;
  int reps = 20;
  int warmup = 3;
  int device = 0;
  std::vector<std::string> types = {"float32", "float16", "bfloat16"};
  double target = 0.85;
  bool check_target = false;
  int latency_reps = 500;
};

// A device allocation that frees itself.
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t bytes) {
    check_cuda(cudaMalloc(&data_, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)");
  }
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  unsigned char* get() const { return static_cast<unsigned char*>(data_); }

 private:
  void* data_ = nullptr;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Moderate values (exact sums stay finite in every type) with a period that is not a power of
// two, so that no two packs look alike.
void fill(DataType type, std::vector<unsigned char>& out, std::size_t n, int seed) {
  for (std::size_t i = 0; i < n; ++i) {
    const float value = static_cast<float>(static_cast<int>((i * 7 + seed) % 251) - 125) * 0.25f;
    switch (type) {
      case DataType::float32:
        std::memcpy(out.data() + 4 * i, &value, 4);
        break;
      case DataType::float16: {
        const std::uint16_t h = collx::float_to_half_bits(value);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      case DataType::bfloat16: {
        const std::uint16_t h = collx::float_to_bfloat16_bits(value);
        std::memcpy(out.data() + 2 * i, &h, 2);
        break;
      }
      default:
        throw collx::Error(collx::ErrorCode::unsupported, "", -1,
                           "collx-kernel-bench-gpu measures float32, float16 and bfloat16");
    }
  }
}

struct Row {
  std::string name;
  std::size_t bytes_moved = 0;
  std::vector<double> ms;
};

// What a small device call pays before any byte moves: the host-visible round trips of the CUDA
// calls a staged collective is made of (8 bytes each, a non-blocking stream as the engine uses),
// each timed on the host clock, median of `reps`.
void print_round_trips(int reps) {
  void* device = nullptr;
  void* pinned = nullptr;
  check_cuda(cudaMalloc(&device, 64), "cudaMalloc(64 bytes)");
  check_cuda(cudaMallocHost(&pinned, 64), "cudaMallocHost(64 bytes)");
  unsigned char pageable[64] = {};
  CudaStream stream;
  CudaEvent done(false);
  const auto cuda_stream = static_cast<cudaStream_t>(stream.handle());
  const auto cuda_event = static_cast<cudaEvent_t>(done.handle());
  const auto poll = [&] {
    cudaError_t state;
    while ((state = cudaEventQuery(cuda_event)) == cudaErrorNotReady) {
    }
    check_cuda(state, "cudaEventQuery");
  };
  const auto d2h = [&] {
    check_cuda(cudaMemcpyAsync(pinned, device, 8, cudaMemcpyDeviceToHost, cuda_stream),
               "cudaMemcpyAsync D2H");
  };
  const auto h2d = [&] {
    check_cuda(cudaMemcpyAsync(device, pinned, 8, cudaMemcpyHostToDevice, cuda_stream),
               "cudaMemcpyAsync H2D");
  };
  const auto record_and_poll = [&] {
    check_cuda(cudaEventRecord(cuda_event, cuda_stream), "cudaEventRecord");
    poll();
  };
  struct Trip {
    const char* name;
    std::function<void()> run;
  };
  const std::vector<Trip> trips = {
      {"event record + cudaEventQuery, idle stream", record_and_poll},
      {"cudaMemcpy D2H, pageable (blocking)",
       [&] { check_cuda(cudaMemcpy(pageable, device, 8, cudaMemcpyDeviceToHost), "cudaMemcpy"); }},
      {"cudaMemcpyAsync D2H pinned + cudaStreamSynchronize",
       [&] {
         d2h();
         check_cuda(cudaStreamSynchronize(cuda_stream), "cudaStreamSynchronize");
       }},
      {"cudaMemcpyAsync D2H pinned + event, polled",
       [&] {
         d2h();
         record_and_poll();
       }},
      {"D2H + H2D pinned, one event, polled",
       [&] {
         d2h();
         h2d();
         record_and_poll();
       }},
      {"D2H pinned polled, then H2D pinned polled",
       [&] {
         d2h();
         record_and_poll();
         h2d();
         record_and_poll();
       }},
  };
  std::printf("\nround trips, 8 bytes, host clock, median of %d (min):\n", reps);
  for (const Trip& trip : trips) {
    std::vector<double> us;
    for (int rep = -10; rep < reps; ++rep) {
      const auto begin = std::chrono::steady_clock::now();
      trip.run();
      const auto end = std::chrono::steady_clock::now();
      if (rep >= 0) us.push_back(std::chrono::duration<double, std::micro>(end - begin).count());
    }
    std::printf("  %-52s %9.2f us (%.2f)\n", trip.name, median(us),
                *std::min_element(us.begin(), us.end()));
  }
  cudaFreeHost(pinned);
  cudaFree(device);
}

int run(const Options& options) {
  std::vector<DataType> types;
  for (const std::string& name : options.types) {
    const auto type = collx::parse_datatype(name);
    if (!type || !(*type == DataType::float32 || *type == DataType::float16 ||
                   *type == DataType::bfloat16)) {
      std::fprintf(stderr,
                   "collx-kernel-bench-gpu: --types: %s is not float32, float16 or "
                   "bfloat16\n",
                   name.c_str());
      return 1;
    }
    types.push_back(*type);
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::fprintf(stderr,
                 "collx-kernel-bench-gpu: no CUDA device (cudaGetDeviceCount: %s, %d devices).\n"
                 "This program times GPU kernels and needs an NVIDIA GPU and its driver; "
                 "nothing was measured.\n",
                 status == cudaSuccess ? "cudaSuccess" : cudaGetErrorString(status), count);
    return kExitNoDevice;
  }
  if (options.device < 0 || options.device >= count) {
    std::fprintf(stderr, "collx-kernel-bench-gpu: --device %d, but there are %d devices\n",
                 options.device, count);
    return 1;
  }
  check_cuda(cudaSetDevice(options.device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, options.device), "cudaGetDeviceProperties");
  int memory_khz = 0;
  int bus_bits = 0;
  cudaDeviceGetAttribute(&memory_khz, cudaDevAttrMemoryClockRate, options.device);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, options.device);
  (void)cudaGetLastError();
  const double peak_gbs = 2.0 * memory_khz * 1e3 * (bus_bits / 8.0) / 1e9;  // double data rate

  const std::size_t bytes = options.mib << 20;
  std::printf("collx-kernel-bench-gpu: device %d: %s, sm_%d%d, %d SMs, %.1f GiB", options.device,
              prop.name, prop.major, prop.minor, prop.multiProcessorCount,
              static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  if (peak_gbs > 0) std::printf(", DRAM peak %.0f GB/s (memory clock x bus width)", peak_gbs);
  std::printf(
      "\narrays: 3 x %zu MiB; each row: median of %d timed repetitions (cudaEvent) after "
      "%d warm-up runs;\ncopy and reductions alternate repetition by repetition.\n"
      "GB/s = bytes moved / time (1 GB = 1e9 B): copy moves 2 arrays (read + write), "
      "a+b->c moves 3 (2 reads + 1 write).\n\n",
      options.mib, options.reps, options.warmup);
  std::printf("%-9s %-34s %10s %10s %9s %8s %8s\n", "type", "row", "median_ms", "min_ms", "GB/s",
              "x_copy", "x_peak");

  DeviceArray a(bytes), b(bytes), c(bytes);
  CudaStream stream;
  CudaEvent start(true), stop(true);
  const auto cuda_stream = static_cast<cudaStream_t>(stream.handle());
  bool all_met = true;
  bool all_correct = true;

  for (std::size_t t = 0; t < types.size(); ++t) {
    const DataType type = types[t];
    const std::string& type_name = options.types[t];
    const std::size_t size = collx::size_of(type);
    const std::size_t n = bytes / size;

    std::vector<unsigned char> host_a(n * size), host_b(n * size), expected(n * size),
        got(n * size);
    fill(type, host_a, n, 1);
    fill(type, host_b, n, 2);
    check_cuda(cudaMemcpy(a.get(), host_a.data(), bytes, cudaMemcpyHostToDevice), "upload a");
    check_cuda(cudaMemcpy(b.get(), host_b.data(), bytes, cudaMemcpyHostToDevice), "upload b");

    // Correctness first: every element against the host kernels.
    collx::kernels::device_reduce(c.get(), a.get(), b.get(), n, type, ReduceOp::sum, 0.0,
                                  cuda_stream);
    stream.synchronize();
    check_cuda(cudaMemcpy(got.data(), c.get(), bytes, cudaMemcpyDeviceToHost), "download c");
    collx::kernels::reduce(expected.data(), host_a.data(), host_b.data(), n, type, ReduceOp::sum);
    if (std::memcmp(expected.data(), got.data(), bytes) != 0) {
      std::fprintf(stderr, "collx-kernel-bench-gpu: %s a+b->c differs from the host kernels\n",
                   type_name.c_str());
      all_correct = false;
    }

    // Rows: the goal (out of place, all 16-byte aligned), in place (a ring step that reduces
    // into its own buffer), and b one element off (relatively misaligned: element-sized path).
    Row copy{"cudaMemcpy D2D (a->c)", 2 * bytes, {}};
    Row goal{"sum a+b->c", 3 * bytes, {}};
    Row in_place{"sum a+=b (in place)", 3 * bytes, {}};
    Row misaligned{"sum a+b->c, b 1 element off", 3 * (n - 1) * size, {}};
    const auto time_ms = [&](auto&& enqueue) {
      start.record(stream);
      enqueue();
      stop.record(stream);
      stop.synchronize();
      return static_cast<double>(CudaEvent::elapsed_ms(start, stop));
    };
    for (int rep = -options.warmup; rep < options.reps; ++rep) {
      const double copy_ms = time_ms([&] {
        check_cuda(cudaMemcpyAsync(c.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, cuda_stream),
                   "cudaMemcpyAsync D2D");
      });
      const double goal_ms = time_ms([&] {
        collx::kernels::device_reduce(c.get(), a.get(), b.get(), n, type, ReduceOp::sum, 0.0,
                                      cuda_stream);
      });
      const double in_place_ms = time_ms([&] {
        collx::kernels::device_reduce(a.get(), a.get(), b.get(), n, type, ReduceOp::sum, 0.0,
                                      cuda_stream);
      });
      const double misaligned_ms = time_ms([&] {
        collx::kernels::device_reduce(c.get(), a.get(), b.get() + size, n - 1, type, ReduceOp::sum,
                                      0.0, cuda_stream);
      });
      if (rep < 0) continue;
      copy.ms.push_back(copy_ms);
      goal.ms.push_back(goal_ms);
      in_place.ms.push_back(in_place_ms);
      misaligned.ms.push_back(misaligned_ms);
    }

    const double copy_gbs = static_cast<double>(copy.bytes_moved) / (median(copy.ms) * 1e6);
    for (const Row* row : {&copy, &goal, &in_place, &misaligned}) {
      const double med = median(row->ms);
      const double gbs = static_cast<double>(row->bytes_moved) / (med * 1e6);
      std::printf("%-9s %-34s %10.4f %10.4f %9.1f %8.3f %8.3f", type_name.c_str(),
                  row->name.c_str(), med, *std::min_element(row->ms.begin(), row->ms.end()), gbs,
                  gbs / copy_gbs, peak_gbs > 0 ? gbs / peak_gbs : 0.0);
      if (row == &goal) {
        const bool met = gbs / copy_gbs >= options.target;
        all_met = all_met && met;
        std::printf("  target %.2f x copy: %s", options.target, met ? "met" : "NOT met");
      }
      std::printf("\n");
    }
  }
  std::printf(
      "\nx_copy: GB/s of the row / GB/s of cudaMemcpy D2D in the same run; x_peak: / DRAM "
      "peak.\n");
  if (options.latency_reps > 0) print_round_trips(options.latency_reps);
  if (!all_correct) return 1;
  if (options.check_target && !all_met) return kExitBelowTarget;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "collx-kernel-bench-gpu: collx device reduction bandwidth (c = a + b) against cudaMemcpy "
      "device-to-device bandwidth, measured in the same run"};
  Options options;
  app.add_option("--mib", options.mib, "size of each of the 3 arrays in MiB")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("-n,--reps", options.reps, "timed repetitions per row (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup", options.warmup, "untimed repetitions first")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--device", options.device, "CUDA device index")->capture_default_str();
  app.add_option("-d,--types", options.types, "element types (float32, float16, bfloat16)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--target", options.target, "goal: reduction GB/s over copy GB/s")
      ->capture_default_str();
  app.add_flag("--check-target", options.check_target,
               "exit with status 3 when a+b->c misses the target for some type");
  app.add_option("--round-trips", options.latency_reps,
                 "repetitions of each small CUDA round trip timed after the bandwidth rows (0: "
                 "none)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const collx::Error& e) {
    std::fprintf(stderr, "collx-kernel-bench-gpu: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collx-kernel-bench-gpu: %s\n", e.what());
  }
  return 1;
}
