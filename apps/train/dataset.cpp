#include "dataset.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "random.hpp"

namespace collx::train {

namespace {

namespace fs = std::filesystem;

// The path of `name` in `dir`, gzipped preferred; empty when neither exists.
std::string find_idx(const std::string& dir, const std::string& name) {
  std::error_code ec;
  for (const std::string& candidate : {name + ".gz", name}) {
    const fs::path path = fs::path(dir) / candidate;
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  return {};
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly `bytes` bytes (gzread also reads uncompressed files as they are); returns how
// many it got before the end of the file.
std::size_t read_fully(gzFile file, void* buffer, std::size_t bytes, const std::string& path) {
  auto* out = static_cast<unsigned char*>(buffer);
  std::size_t done = 0;
  while (done < bytes) {
    const unsigned read_bytes = static_cast<unsigned>(std::min<std::size_t>(bytes - done, 1u << 30));
    const int got = gzread(file, out + done, read_bytes);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      throw DataError(path + ": " + (code == Z_ERRNO ? std::strerror(errno) : message) +
                      " (corrupt or not a gzip file?)");
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

std::uint32_t big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

Dataset load_pair(const std::string& images_path, const std::string& labels_path) {
  const IdxFile images = read_idx_file(images_path, 3);
  const IdxFile labels = read_idx_file(labels_path, 1);
  if (images.dims[0] != labels.dims[0]) {
    throw DataError(images_path + " has " + std::to_string(images.dims[0]) + " images but " +
                    labels_path + " has " + std::to_string(labels.dims[0]) + " labels");
  }
  Dataset d;
  d.rows = images.dims[0];
  d.features = std::size_t{images.dims[1]} * images.dims[2];
  d.images = std::move(images.data);
  d.labels.assign(labels.data.begin(), labels.data.end());
  return d;
}

void set_pixel_statistics(DataSplit& split) {
  // Exact integer sums: the same mean and deviation on every rank and every run.
  std::uint64_t sum = 0;
  std::uint64_t sum_squares = 0;
  for (std::uint8_t v : split.train.images) {
    sum += v;
    sum_squares += std::uint64_t{v} * v;
  }
  const double n = static_cast<double>(split.train.images.size());
  const double mean = n > 0 ? static_cast<double>(sum) / n : 0.0;
  const double variance = n > 0 ? static_cast<double>(sum_squares) / n - mean * mean : 0.0;
  split.pixel_mean = mean;
  split.pixel_stddev = variance > 1e-12 ? std::sqrt(variance) : 1.0;
}

}  // namespace

std::vector<std::string> missing_idx_files(const std::string& dir) {
  std::vector<std::string> missing;
  for (const char* name : kIdxFiles) {
    if (find_idx(dir, name).empty()) missing.emplace_back(std::string(name) + "[.gz]");
  }
  return missing;
}

IdxFile read_idx_file(const std::string& path, int expected_dims) {
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw DataError(path + ": cannot open: " + std::strerror(errno));
  unsigned char header[4];
  if (read_fully(file.get(), header, 4, path) != 4) {
    throw DataError(path + ": truncated: no IDX header");
  }
  // IDX magic: two zero bytes, the element type (0x08: unsigned byte), the number of dimensions.
  if (header[0] != 0 || header[1] != 0 || header[2] != 0x08 || header[3] != expected_dims) {
    char text[64];
    std::snprintf(text, sizeof text, "%02x %02x %02x %02x", header[0], header[1], header[2],
                  header[3]);
    throw DataError(path + ": not an IDX file of unsigned bytes with " +
                    std::to_string(expected_dims) + " dimension(s) (magic " + text +
                    ", expected 00 00 08 0" + std::to_string(expected_dims) + ")");
  }
  IdxFile idx;
  std::size_t total = 1;
  for (int i = 0; i < expected_dims; ++i) {
    unsigned char dim[4];
    if (read_fully(file.get(), dim, 4, path) != 4) {
      throw DataError(path + ": truncated inside the IDX header");
    }
    idx.dims.push_back(big_endian32(dim));
    if (idx.dims.back() == 0) throw DataError(path + ": dimension " + std::to_string(i) + " is 0");
    total *= idx.dims.back();
    if (total > (std::size_t{1} << 36)) throw DataError(path + ": implausibly large dimensions");
  }
  idx.data.resize(total);
  const std::size_t got = read_fully(file.get(), idx.data.data(), total, path);
  if (got != total) {
    throw DataError(path + ": truncated: the header promises " + std::to_string(total) +
                    " bytes of data, the file has " + std::to_string(got));
  }
  unsigned char extra;
  if (read_fully(file.get(), &extra, 1, path) != 0) {
    throw DataError(path + ": more data than the header's dimensions describe");
  }
  return idx;
}

DataSplit load_idx_dataset(const std::string& dir) {
  std::string paths[4];
  const auto missing = missing_idx_files(dir);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing)
      list += (list.empty() ? "" : ", ") + m;
    throw DataError(dir + ": missing " + list);
  }
  for (int i = 0; i < 4; ++i)
    paths[i] = find_idx(dir, kIdxFiles[i]);
  DataSplit split;
  split.train = load_pair(paths[0], paths[1]);
  split.test = load_pair(paths[2], paths[3]);
  if (split.train.features != split.test.features) {
    throw DataError(dir + ": training images have " + std::to_string(split.train.features) +
                    " pixels, test images " + std::to_string(split.test.features));
  }
  std::int32_t max_label = 0;
  for (const Dataset* d : {&split.train, &split.test}) {
    for (std::int32_t label : d->labels)
      max_label = std::max(max_label, label);
  }
  split.classes = static_cast<std::size_t>(max_label) + 1;
  if (split.classes < 2) throw DataError(dir + ": every label is 0; nothing to classify");
  split.name = fs::path(dir).filename() == "fashion-mnist" ? "Fashion-MNIST" : "MNIST-format";
  split.source = dir;
  set_pixel_statistics(split);
  return split;
}

DataSplit make_synthetic_dataset(std::size_t train_rows, std::size_t test_rows,
                                 std::uint64_t seed) {
  constexpr std::size_t kClasses = 10;
  constexpr std::size_t kFeatures = 28 * 28;
  Random random(seed);
  std::vector<double> patterns(kClasses * kFeatures);
  for (double& p : patterns)
    p = random.uniform();
  auto fill = [&](Dataset& d, std::size_t rows) {
    d.rows = rows;
    d.features = kFeatures;
    d.images.resize(rows * kFeatures);
    d.labels.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t label = random.below(kClasses);
      d.labels[r] = static_cast<std::int32_t>(label);
      const double* pattern = &patterns[label * kFeatures];
      for (std::size_t j = 0; j < kFeatures; ++j) {
        // Mostly noise: a single pixel says little, the whole image says a lot.
        const double v = 0.25 * pattern[j] + 0.75 * random.uniform();
        d.images[r * kFeatures + j] = static_cast<std::uint8_t>(v * 255.0);
      }
    }
  };
  DataSplit split;
  split.name = "synthetic";
  split.source = std::to_string(train_rows) + " training and " + std::to_string(test_rows) +
                 " test samples, 10 classes of 28x28 patterns in noise";
  split.synthetic = true;
  split.classes = kClasses;
  fill(split.train, train_rows);
  fill(split.test, test_rows);
  set_pixel_statistics(split);
  return split;
}

DataSplit load_data(const DataOptions& options, std::string* notice) {
  DataSplit data;
  if (options.synthetic) {
    data = make_synthetic_dataset(options.synthetic_train, options.synthetic_test);
  } else if (!options.dir_given && missing_idx_files(options.dir).size() == 4) {
    if (notice) {
      *notice = "no Fashion-MNIST files under " + options.dir +
                " (install the Debian package dataset-fashion-mnist, or pass --data DIR); "
                "training on the built-in synthetic data set instead";
    }
    data = make_synthetic_dataset(options.synthetic_train, options.synthetic_test);
  } else {
    data = load_idx_dataset(options.dir);
  }
  if (options.train_limit > 0 && options.train_limit < data.train.rows) {
    data.train.rows = options.train_limit;
    data.train.images.resize(options.train_limit * data.train.features);
    data.train.labels.resize(options.train_limit);
    data.source += " (first " + std::to_string(options.train_limit) + " training samples)";
    set_pixel_statistics(data);
  }
  if (data.train.rows == 0 || data.test.rows == 0) {
    throw DataError(data.source + ": no training or no test samples");
  }
  return data;
}

}  // namespace collx::train
