// What FSDP, pipeline and tensor parallel share: each rank holds pieces of the model in a buffer
// of its own, says where each piece lies in the single-process flat layout (Piece), and updates
// its buffer with an optimizer of its own. From the pieces of every rank of its group the whole
// model is assembled (checksum, checkpoint) or handed out (initialisation, resume at any rank
// count). The hybrid layout: `replicas` copies of the group, each training on its share of the
// global batch, their gradients summed over a communicator of the ranks that hold the same
// pieces (rank % group size) before the update.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "grad_sync.hpp"
#include "trainer_core.hpp"

namespace collx::train {

// count elements of a rank's buffer from `local` are the model's flat elements from `full`.
struct Piece {
  std::size_t local = 0;
  std::size_t full = 0;
  std::size_t count = 0;
  bool is_weight = false;
};

struct RankPieces {
  std::vector<Piece> pieces;
  std::size_t local_count = 0;  // the buffer's length (may hold padding no piece covers)

  // Appends a piece at the end of the buffer.
  void append(std::size_t full, std::size_t count, bool is_weight) {
    pieces.push_back({local_count, full, count, is_weight});
    local_count += count;
  }
  // Layer l's bias and weight, whole.
  void append_layer(const ParameterLayout& layout, const ModelShape& shape, std::size_t l) {
    append(layout.bias_offset(l), shape.sizes[l + 1], false);
    append(layout.weight_offset(l), shape.sizes[l + 1] * shape.sizes[l], true);
  }
};

template <class T>
class PartitionedTrainer : public TrainerCore<T> {
  using Core = TrainerCore<T>;

 public:
  // group_size: ranks that hold one copy of the model between them (the world's size for FSDP).
  PartitionedTrainer(const TrainConfig& config, Communicator& comm, const DataSplit& data,
                     int group_size);

  MemoryUse memory() const override;

 protected:
  // Called by the strategy's constructor once it knows every group rank's pieces.
  void set_pieces(std::vector<RankPieces> pieces_by_rank);

  void export_state(std::vector<T>& params, std::vector<std::vector<T>>* states) override;
  void import_state(const std::vector<T>& params,
                    const std::vector<std::vector<T>>& states) override;

  // After the backward pass: sums the gradients over the replicas (hybrid), updates this
  // rank's buffer, agrees on the loss (summed over the ranks that `count` it, one per
  // replica) and completes the result. bytes: the step's bus bytes so far. also_summed: summed
  // over every rank in the loss's allreduce (a pipeline's compute times: no call of their own).
  void finish_partitioned_step(StepResult& result, Range global, double loss_local, bool count,
                               double bytes, Clock::time_point start,
                               std::span<double> also_summed = {});
  // "2 replicas x 2 stages": the hybrid's arithmetic, empty without replicas.
  std::string replica_text(const std::string& unit) const;

  int group_size_;
  int replicas_;
  int replica_;     // which replica this rank belongs to
  int group_rank_;  // its rank inside the group
  std::optional<Communicator> group_owned_;  // (before group_: group_ may refer to it)
  Communicator& group_;                      // the ranks that hold one copy of the model
  std::optional<Communicator> across_;  // the ranks holding the same pieces (replicas > 1)
  std::vector<RankPieces> pieces_;      // every group rank's
  mlp::DeviceBuffer<T> params_;         // this rank's pieces (host memory: CPU backend)
  mlp::DeviceBuffer<T> grads_;
  std::optional<Optimizer<T>> optimizer_;
  CommClock clock_;
  std::size_t activation_elements_ = 0;  // set by the strategy, for memory()
  std::size_t working_elements_ = 0;
  // The last finish_partitioned_step's replica allreduce and loss allreduce, in seconds.
  double replica_sum_seconds_ = 0;
  double loss_sum_seconds_ = 0;
};

}  // namespace collx::train
