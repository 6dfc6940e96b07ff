// Checks a collx-bench --json file: the documented keys, one row per (size, algorithm), every
// row with #wrong 0, and an mpi row at every size.
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s FILE COLLECTIVE NRANKS\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
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
  if (doc["collective"] != argv[2]) fail("collective is " + doc["collective"].dump());
  if (doc["nranks"] != std::stoi(argv[3])) fail("nranks is " + doc["nranks"].dump());
  std::map<long long, std::set<std::string>> algos_by_size;
  for (const auto& row : doc["rows"]) {
    for (const char* key : {"size_bytes", "count", "type", "op", "root", "algo", "time_us",
                            "algbw_gbps", "busbw_gbps", "wrong"}) {
      if (!row.contains(key)) fail(std::string("row without ") + key + ": " + row.dump());
    }
    if (row["wrong"] != 0) fail("wrong elements: " + row.dump());
    if (!(row["time_us"].get<double>() > 0)) fail("no time: " + row.dump());
    algos_by_size[row["size_bytes"].get<long long>()].insert(row["algo"].get<std::string>());
  }
  if (algos_by_size.empty()) fail("no rows");
  const auto& first = algos_by_size.begin()->second;
  for (const auto& [size, algos] : algos_by_size) {
    if (algos != first) fail("size " + std::to_string(size) + " has other algorithms");
    if (!algos.count("mpi")) fail("size " + std::to_string(size) + " has no mpi row");
  }
  if (failures == 0)
    std::printf("ok: %zu sizes x %zu algorithms\n", algos_by_size.size(), first.size());
  return failures ? 1 : 0;
}
