// Checks a collx-bench --json file: the documented keys, one row per (size, algorithm), every
// row with #wrong 0 and its first calls (warm-up, auto's trials) timed, and an mpi row at every
// size. With --memcpy: a memcpy row at every size and
// every row's x_memcpy (its time over the memcpy row's). With --cold: the run says so, the
// last-level cache it assumed, and every row ran on two buffer sets at least. With
// --mpi-again: an mpi_again row at every size whose vs_mpi is the mpi row's time over its own
// (the mpi row's own vs_mpi 1).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

int main(int argc, char** argv) {
  bool want_memcpy = false;
  bool want_cold = false;
  bool want_again = false;
  int positional = 0;
  const char* args[3] = {nullptr, nullptr, nullptr};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--memcpy") == 0) {
      want_memcpy = true;
    } else if (std::strcmp(argv[i], "--cold") == 0) {
      want_cold = true;
    } else if (std::strcmp(argv[i], "--mpi-again") == 0) {
      want_again = true;
    } else if (positional < 3) {
      args[positional++] = argv[i];
    } else {
      positional = 4;
    }
  }
  if (positional != 3) {
    std::fprintf(stderr, "usage: %s FILE COLLECTIVE NRANKS [--memcpy] [--cold] [--mpi-again]\n",
                 argv[0]);
    return 2;
  }
  std::ifstream in(args[0]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", args[0]);
    return 1;
  }
  const nlohmann::json doc = nlohmann::json::parse(in);
  int failures = 0;
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "%s\n", why.c_str());
    ++failures;
  };
  for (const char* key : {"collective", "nranks", "mpi_library", "command", "rows"}) {
    if (!doc.contains(key)) fail(std::string("missing key ") + key);
  }
  if (failures) return 1;
  if (doc["collective"] != args[1]) fail("collective is " + doc["collective"].dump());
  if (doc["nranks"] != std::stoi(args[2])) fail("nranks is " + doc["nranks"].dump());
  if (want_cold) {
    if (doc.value("cold", false) != true) fail("the run was not --cold");
    if (!doc.contains("llc_bytes") || !(doc["llc_bytes"].get<double>() > 0)) {
      fail("--cold run without llc_bytes");
    }
  }
  std::map<long long, std::set<std::string>> algos_by_size;
  std::map<long long, double> memcpy_us;
  std::map<long long, double> mpi_us;
  for (const auto& row : doc["rows"]) {
    for (const char* key : {"size_bytes", "count", "type", "op", "root", "algo", "time_us",
                            "algbw_gbps", "busbw_gbps", "wrong"}) {
      if (!row.contains(key)) fail(std::string("row without ") + key + ": " + row.dump());
    }
    if (row["wrong"] != 0) fail("wrong elements: " + row.dump());
    // The warm-up's calls (auto's: and its trials), at least one, with their time.
    if (!row.contains("first_calls") || !(row["first_calls"].get<long long>() >= 1) ||
        !row.contains("first_calls_us") || !(row["first_calls_us"].get<double>() > 0)) {
      fail("row without its first calls: " + row.dump());
    }
    if (!(row["time_us"].get<double>() > 0)) fail("no time: " + row.dump());
    const long long size = row["size_bytes"].get<long long>();
    algos_by_size[size].insert(row["algo"].get<std::string>());
    if (row["algo"] == "mpi") mpi_us[size] = row["time_us"].get<double>();
    if (row["algo"] == "memcpy") {
      memcpy_us[size] = row["time_us"].get<double>();
      if (!row.contains("memcpy_bytes")) fail("memcpy row without memcpy_bytes: " + row.dump());
    }
    if (want_cold && !(row.contains("buffer_sets") && row["buffer_sets"].get<long long>() >= 2)) {
      fail("--cold row without two buffer sets at least: " + row.dump());
    }
  }
  if (want_memcpy) {
    // Every row's x_memcpy is its time over its size's memcpy row's time.
    for (const auto& row : doc["rows"]) {
      const long long size = row["size_bytes"].get<long long>();
      if (!memcpy_us.count(size)) continue;  // reported below
      if (!row.contains("x_memcpy")) {
        fail("row without x_memcpy: " + row.dump());
        continue;
      }
      const double expected = row["time_us"].get<double>() / memcpy_us[size];
      if (std::fabs(row["x_memcpy"].get<double>() - expected) > 1e-6 * expected) {
        fail("x_memcpy is not time_us over the memcpy row's: " + row.dump());
      }
    }
  }
  if (want_again) {
    // vs_mpi is the mpi row's time over the row's: 1 for the mpi row itself, the noise between
    // two identical calls for mpi_again.
    for (const auto& row : doc["rows"]) {
      const std::string algo = row["algo"].get<std::string>();
      if (algo != "mpi" && algo != "mpi_again") continue;
      const long long size = row["size_bytes"].get<long long>();
      if (!mpi_us.count(size) || !row.contains("vs_mpi")) {
        fail("mpi row without its reference or vs_mpi: " + row.dump());
        continue;
      }
      const double expected = mpi_us[size] / row["time_us"].get<double>();
      if (std::fabs(row["vs_mpi"].get<double>() - expected) > 1e-6 * expected) {
        fail("vs_mpi is not the mpi row's time over the row's: " + row.dump());
      }
    }
  }
  if (algos_by_size.empty()) fail("no rows");
  const auto& first = algos_by_size.begin()->second;
  for (const auto& [size, algos] : algos_by_size) {
    if (algos != first) fail("size " + std::to_string(size) + " has other algorithms");
    if (!algos.count("mpi")) fail("size " + std::to_string(size) + " has no mpi row");
    if (want_again && !algos.count("mpi_again")) {
      fail("size " + std::to_string(size) + " has no mpi_again row");
    }
    if (want_memcpy && !algos.count("memcpy")) {
      fail("size " + std::to_string(size) + " has no memcpy row");
    }
  }
  if (failures == 0)
    std::printf("ok: %zu sizes x %zu algorithms\n", algos_by_size.size(), first.size());
  return failures ? 1 : 0;
}
