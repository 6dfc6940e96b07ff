// Checkpoint files: everything a run needs to go on bitwise as if it had never stopped.
//
// Layout: the 8 bytes "COLLXCKP", a little-endian u64 header length, the header (JSON: format
// version, dtype, layer sizes, optimizer, step, sampler position, seed, the epoch's loss sums so
// far), the parameters, the optimizer's state arrays (each as many elements as parameters), and
// a u64 checksum of everything before it. Written to PATH.tmp, flushed to disk, then renamed
// over PATH, so a crash never leaves a half-written checkpoint under PATH.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"
#include "optimizer.hpp"

namespace collx::train {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CheckpointHeader {
  std::string dtype;  // "float32" | "float64"
  ModelShape shape;
  OptimizerKind optimizer = OptimizerKind::adamw;
  std::size_t parameters = 0;
  std::int64_t step = 0;          // optimizer steps done
  std::int64_t epoch = 0;         // the sampler's position: the next step is step_in_epoch
  std::size_t step_in_epoch = 0;  //   of epoch `epoch` (0-based)
  std::uint64_t seed = 0;         // with the epoch, all the sampler's randomness
  std::size_t batch = 0;          // global batch the position counts in
  double epoch_loss_sum = 0;      // training loss summed over the epoch's steps so far
  std::size_t epoch_samples = 0;
  int ranks = 0;  // ranks of the run that wrote it (informative)
};

struct CheckpointData {
  CheckpointHeader header;
  std::vector<std::byte> parameters;           // header.parameters elements
  std::vector<std::vector<std::byte>> states;  // optimizer arrays, same length each
};

// Writes atomically; throws CheckpointError naming the path and the system's reason.
void write_checkpoint(const std::string& path, const CheckpointHeader& header,
                      const void* parameters, const std::vector<const void*>& states);

// Reads and verifies the magic, the header and the checksum; throws CheckpointError.
CheckpointData read_checkpoint(const std::string& path);

// Why a checkpoint cannot continue this run (empty when it can): another dtype, model shape,
// optimizer or global batch.
std::string checkpoint_mismatch(const CheckpointHeader& saved, const CheckpointHeader& expected);

std::string header_to_json(const CheckpointHeader& header);
CheckpointHeader header_from_json(const std::string& text);

}  // namespace collx::train
