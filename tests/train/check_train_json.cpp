// Checks a collx-train --log-json file: one object per epoch with the documented keys, epochs
// numbered 1..E, then one final object; optionally a minimum final test accuracy.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE EPOCHS [MIN_ACCURACY]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  const int epochs = std::stoi(argv[2]);
  const double min_accuracy = argc > 3 ? std::stod(argv[3]) : 0.0;
  int failures = 0;
  auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "%s\n", why.c_str());
    ++failures;
  };
  int seen_epochs = 0;
  bool seen_final = false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (seen_final) fail("an object after the final one: " + line);
    if (j.value("final", false)) {
      seen_final = true;
      for (const char* key : {"test_accuracy", "weights_checksum", "wall_s"}) {
        if (!j.contains(key)) fail(std::string("final object without ") + key);
      }
      if (failures) break;
      if (j["weights_checksum"].get<std::string>().size() != 16)
        fail("checksum is not 16 hex digits");
      if (j["test_accuracy"].get<double>() < min_accuracy) {
        fail("final test accuracy " + j["test_accuracy"].dump() + " < " + argv[3]);
      }
      continue;
    }
    for (const char* key : {"epoch", "train_loss", "test_loss", "test_accuracy", "samples_per_s",
                            "comm_exposed_fraction", "wall_s"}) {
      if (!j.contains(key)) fail(std::string("epoch object without ") + key + ": " + line);
    }
    if (failures) break;
    if (j["epoch"] != seen_epochs + 1) fail("epoch " + j["epoch"].dump() + " out of order");
    ++seen_epochs;
    const double fraction = j["comm_exposed_fraction"].get<double>();
    if (!(fraction >= 0 && fraction <= 1)) fail("comm_exposed_fraction outside [0, 1]: " + line);
    if (!(j["samples_per_s"].get<double>() > 0)) fail("no throughput: " + line);
    if (!(j["train_loss"].get<double>() > 0)) fail("no training loss: " + line);
  }
  if (seen_epochs != epochs)
    fail("saw " + std::to_string(seen_epochs) + " epochs, expected " + argv[2]);
  if (!seen_final) fail("no final object");
  if (failures == 0) std::printf("ok: %d epochs and the final object\n", seen_epochs);
  return failures ? 1 : 0;
}
