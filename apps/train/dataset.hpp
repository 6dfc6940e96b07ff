// Training data: MNIST-format IDX files (gzipped or not) such as Fashion-MNIST, or a built-in
// synthetic set when no files are there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace collx::train {

// Images as bytes, one row of `features` pixels per sample, and one label per sample.
struct Dataset {
  std::size_t rows = 0;
  std::size_t features = 0;
  std::vector<std::uint8_t> images;  // rows x features
  std::vector<std::int32_t> labels;  // rows, each in [0, classes)
};

struct DataSplit {
  std::string name;    // "Fashion-MNIST", "MNIST-format", "synthetic"
  std::string source;  // the directory, or how the synthetic set was made
  bool synthetic = false;
  std::size_t classes = 0;
  Dataset train;
  Dataset test;
  // Normalisation the model sees: (pixel - mean) / stddev, over every training pixel.
  double pixel_mean = 0;
  double pixel_stddev = 1;
};

// A data set that is missing, unreadable or malformed; the message names the file and the fault.
class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The four files of an MNIST-format directory, each looked for as NAME.gz, then NAME.
inline constexpr const char* kIdxFiles[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

// The names of kIdxFiles that `dir` has in neither form (all four when dir does not exist).
std::vector<std::string> missing_idx_files(const std::string& dir);

// Reads the four files; throws DataError for a missing file, a bad magic number, inconsistent
// sizes (images vs labels, train vs test), truncated or trailing data, a gzip error.
DataSplit load_idx_dataset(const std::string& dir);

// One IDX file, for the tests: dims and the raw bytes that follow the header.
struct IdxFile {
  std::vector<std::uint32_t> dims;
  std::vector<std::uint8_t> data;
};
IdxFile read_idx_file(const std::string& path, int expected_dims);

// Ten classes of 28x28 images: each class a fixed random pattern, each sample the pattern
// blended with noise. Learnable, not trivial; the same bytes on every rank for a seed.
DataSplit make_synthetic_dataset(std::size_t train_rows, std::size_t test_rows,
                                 std::uint64_t seed = 20240501);

// Where collx-train's data comes from.
struct DataOptions {
  std::string dir = kDefaultDataDir;
  bool dir_given = false;  // --data was passed: its files must be there
  bool synthetic = false;  // --synthetic
  std::size_t synthetic_train = 12000;
  std::size_t synthetic_test = 2000;
  std::size_t train_limit = 0;  // keep the first N training samples (0: all)
};

// The MNIST-format files of options.dir; when the default directory has none of them (the
// package is not installed), the synthetic set, with `notice` saying so. Throws DataError for
// missing files of a directory given with --data, corrupt files, an empty set.
DataSplit load_data(const DataOptions& options, std::string* notice);

}  // namespace collx::train
