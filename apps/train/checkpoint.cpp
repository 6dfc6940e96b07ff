#include "checkpoint.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "checksum.hpp"

namespace collx::train {

namespace {

constexpr char kMagic[8] = {'C', 'O', 'L', 'L', 'X', 'C', 'K', 'P'};
constexpr int kFormatVersion = 1;

std::size_t element_size(const std::string& dtype) {
  if (dtype == "float32") return 4;
  if (dtype == "float64") return 8;
  return 0;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Checksums the stream as it is written or read, in pieces of any size.
class RunningChecksum {
 public:
  void add(const void* data, std::size_t bytes) {
    // Chain piece checksums: cheap, order-sensitive, and the same whatever the pieces are, as
    // long as writer and reader use the same pieces (they do: header, then each array).
    value_ = checksum_bytes(data, bytes) ^ (value_ * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull);
  }
  std::uint64_t value() const { return value_; }

 private:
  std::uint64_t value_ = 0;
};

}  // namespace

std::string header_to_json(const CheckpointHeader& h) {
  nlohmann::json j = {{"format", "collx-train checkpoint"},
                      {"version", kFormatVersion},
                      {"dtype", h.dtype},
                      {"layers", h.shape.sizes},
                      {"optimizer", std::string(to_string(h.optimizer))},
                      {"parameters", h.parameters},
                      {"step", h.step},
                      {"sampler",
                       {{"seed", h.seed},
                        {"epoch", h.epoch},
                        {"step_in_epoch", h.step_in_epoch},
                        {"batch", h.batch},
                        {"generator", "xoshiro256** seeded from (seed, epoch)"}}},
                      {"epoch_loss_sum", h.epoch_loss_sum},
                      {"epoch_samples", h.epoch_samples},
                      {"ranks", h.ranks}};
  return j.dump();
}

CheckpointHeader header_from_json(const std::string& text) {
  CheckpointHeader h;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.at("format") != "collx-train checkpoint")
      throw CheckpointError("not a collx-train checkpoint");
    if (j.at("version") != kFormatVersion) {
      throw CheckpointError("format version " + j.at("version").dump() + ", this build reads " +
                            std::to_string(kFormatVersion));
    }
    h.dtype = j.at("dtype").get<std::string>();
    h.shape.sizes = j.at("layers").get<std::vector<std::size_t>>();
    const std::string optimizer = j.at("optimizer").get<std::string>();
    if (optimizer != "adamw" && optimizer != "sgd")
      throw CheckpointError("unknown optimizer " + optimizer);
    h.optimizer = optimizer == "adamw" ? OptimizerKind::adamw : OptimizerKind::sgd;
    h.parameters = j.at("parameters").get<std::size_t>();
    h.step = j.at("step").get<std::int64_t>();
    const auto& sampler = j.at("sampler");
    h.seed = sampler.at("seed").get<std::uint64_t>();
    h.epoch = sampler.at("epoch").get<std::int64_t>();
    h.step_in_epoch = sampler.at("step_in_epoch").get<std::size_t>();
    h.batch = sampler.at("batch").get<std::size_t>();
    h.epoch_loss_sum = j.at("epoch_loss_sum").get<double>();
    h.epoch_samples = j.at("epoch_samples").get<std::size_t>();
    h.ranks = j.at("ranks").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(std::string("malformed header: ") + e.what());
  }
  if (element_size(h.dtype) == 0) throw CheckpointError("unknown dtype " + h.dtype);
  if (h.shape.sizes.size() < 2) throw CheckpointError("a model needs at least two layer sizes");
  if (ParameterLayout(h.shape).count() != h.parameters) {
    throw CheckpointError("the header's parameter count does not match its layer sizes");
  }
  return h;
}

void write_checkpoint(const std::string& path, const CheckpointHeader& header,
                      const void* parameters, const std::vector<const void*>& states) {
  const std::string temporary = path + ".tmp";
  const std::size_t bytes = header.parameters * element_size(header.dtype);
  const std::string text = header_to_json(header);
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw CheckpointError("cannot " + what + " " + temporary + ": " + reason);
  };
  {
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(temporary.c_str(), "wb"));
    if (!file) fail("create");
    RunningChecksum sum;
    auto put = [&](const void* data, std::size_t n) {
      if (n && std::fwrite(data, 1, n, file.get()) != n) fail("write");
      sum.add(data, n);
    };
    const std::uint64_t length = text.size();  // x86-64 and aarch64: already little-endian
    put(kMagic, sizeof kMagic);
    put(&length, sizeof length);
    put(text.data(), text.size());
    put(parameters, bytes);
    for (const void* state : states)
      put(state, bytes);
    const std::uint64_t value = sum.value();
    if (std::fwrite(&value, sizeof value, 1, file.get()) != 1) fail("write");
    if (std::fflush(file.get()) != 0) fail("flush");
    if (::fsync(fileno(file.get())) != 0) fail("sync");
    if (std::fclose(file.release()) != 0) fail("close");
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw CheckpointError("cannot rename " + temporary + " to " + path + ": " + reason);
  }
}

CheckpointData read_checkpoint(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) throw CheckpointError(path + ": cannot open: " + std::strerror(errno));
  RunningChecksum sum;
  auto get = [&](void* data, std::size_t n, const char* what) {
    if (n && std::fread(data, 1, n, file.get()) != n) {
      throw CheckpointError(path + ": truncated in the " + std::string(what));
    }
    sum.add(data, n);
  };
  char magic[sizeof kMagic];
  get(magic, sizeof magic, "magic");
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    throw CheckpointError(path + ": not a collx-train checkpoint (bad magic)");
  }
  std::uint64_t length = 0;
  get(&length, sizeof length, "header length");
  if (length > (1u << 20)) throw CheckpointError(path + ": implausible header length");
  std::string text(length, '\0');
  get(text.data(), length, "header");
  CheckpointData data;
  try {
    data.header = header_from_json(text);
  } catch (const CheckpointError& e) {
    throw CheckpointError(path + ": " + e.what());
  }
  const std::size_t bytes = data.header.parameters * element_size(data.header.dtype);
  data.parameters.resize(bytes);
  get(data.parameters.data(), bytes, "parameters");
  data.states.resize(state_arrays(data.header.optimizer));
  for (auto& state : data.states) {
    state.resize(bytes);
    get(state.data(), bytes, "optimizer state");
  }
  std::uint64_t stored = 0;
  if (std::fread(&stored, sizeof stored, 1, file.get()) != 1) {
    throw CheckpointError(path + ": truncated before the checksum");
  }
  if (stored != sum.value()) throw CheckpointError(path + ": checksum mismatch (corrupt file)");
  char extra;
  if (std::fread(&extra, 1, 1, file.get()) != 0) {
    throw CheckpointError(path + ": unexpected data after the checksum");
  }
  return data;
}

std::string checkpoint_mismatch(const CheckpointHeader& saved, const CheckpointHeader& expected) {
  if (saved.shape != expected.shape) {
    return "it holds a model of shape " + saved.shape.to_string() + ", this run builds " +
           expected.shape.to_string() + " (--hidden and the data set must match)";
  }
  if (saved.dtype != expected.dtype) {
    return "it holds " + saved.dtype + " parameters, this run uses --dtype " + expected.dtype;
  }
  if (saved.optimizer != expected.optimizer) {
    return "it holds " + std::string(to_string(saved.optimizer)) +
           " state, this run uses --optimizer " + std::string(to_string(expected.optimizer));
  }
  if (saved.batch != expected.batch) {
    return "its sampler position counts global batches of " + std::to_string(saved.batch) +
           ", this run uses --batch " + std::to_string(expected.batch);
  }
  if (saved.seed != expected.seed) {
    return "it was written with --seed " + std::to_string(saved.seed) + ", this run uses --seed " +
           std::to_string(expected.seed) + " (the data order would change)";
  }
  return {};
}

}  // namespace collx::train
