// Tensor parallel (Megatron-style MLP blocks): the layers are taken in pairs. In a pair, the
// first layer's weight is split by output rows ("column parallel": rank t computes units
// [o_t, o_t+1) of the hidden activation, with its part of the bias, and the ReLU locally); the
// second layer's weight is split by input columns the same way ("row parallel": rank t
// multiplies its part of the activation by its columns, and the partial outputs are summed by
// an allreduce before the whole bias and the ReLU). Backward mirrors it: the row-parallel
// layer's input gradient stays local, the column-parallel layer's input gradient is a partial
// sum, allreduced (not needed for the first layer: its input is the data). A layer left
// without a partner (the output layer of an odd count) is held whole by every rank of the
// group. Every rank of a group trains on the same rows (its replica's share of the batch).
#include <algorithm>

#include "layer_stack.hpp"
#include "partitioned.hpp"

namespace collx::train {

namespace {

template <class T>
class TensorParallel final : public PartitionedTrainer<T>, private LayerHooks<T> {
  using Base = PartitionedTrainer<T>;
  using Base::backend_, Base::comm_, Base::config_, Base::layout_, Base::shape_, Base::type_,
      Base::clock_, Base::params_, Base::grads_, Base::group_, Base::group_rank_,
      Base::group_size_, Base::replica_, Base::replicas_;

 public:
  TensorParallel(const TrainConfig& config, Communicator& comm, const DataSplit& data)
      : Base(config, comm, data, comm.size() / config.replicas) {
    const std::size_t layers = shape_.layers();
    const auto g = static_cast<std::size_t>(group_size_);
    std::vector<RankPieces> pieces(g);
    std::vector<LayerDims> dims;
    for (std::size_t l = 0; l < layers; ++l) {
      const std::size_t in = shape_.sizes[l], out = shape_.sizes[l + 1];
      const bool relu = l + 1 < layers;
      Kind kind = Kind::whole;
      if (l % 2 == 0 && l + 1 < layers) kind = Kind::column;
      if (l % 2 == 1) kind = Kind::row;
      kinds_.push_back(kind);
      for (std::size_t t = 0; t < g; ++t) {
        RankPieces& mine = pieces[t];
        const std::size_t bias_at = mine.local_count;
        if (kind == Kind::column) {
          const Range units = split_evenly(out, g, t);
          mine.append(layout_.bias_offset(l) + units.begin, units.size(), false);
          mine.append(layout_.weight_offset(l) + units.begin * in, units.size() * in, true);
        } else if (kind == Kind::row) {
          const Range cols = split_evenly(in, g, t);
          mine.append(layout_.bias_offset(l), out, false);
          for (std::size_t j = 0; j < out; ++j)
            mine.append(layout_.weight_offset(l) + j * in + cols.begin, cols.size(), true);
        } else {
          mine.append_layer(layout_, shape_, l);
        }
        if (t != static_cast<std::size_t>(group_rank_)) continue;
        bias_.push_back(bias_at);
        weight_.push_back(mine.pieces[mine.pieces.size() - (kind == Kind::row ? out : 1)].local);
        const std::size_t local_out = kind == Kind::column ? split_evenly(out, g, t).size() : out;
        const std::size_t local_in = kind == Kind::row ? split_evenly(in, g, t).size() : in;
        dims.push_back({local_in, local_out, relu});
      }
    }
    this->set_pieces(std::move(pieces));
    const std::size_t per_replica =
        (config.batch + static_cast<std::size_t>(replicas_) - 1) /
        static_cast<std::size_t>(replicas_);
    const std::size_t rows = std::max(per_replica, config.eval_rows);
    stack_ = std::make_unique<LayerStack<T>>(*backend_, dims, rows);
    inputs_ = mlp::DeviceBuffer<T>(*backend_, rows * shape_.sizes[0]);
    this->activation_elements_ = stack_->activation_elements() + inputs_.size();
  }

  StepResult train_step() override {
    const auto start = Clock::now();
    clock_.reset();
    bytes_ = 0;
    const Range global = this->global_batch();
    const Range mine = rank_slice(global, replica_, replicas_);
    const T scale = T(1) / static_cast<T>(global.size());
    StepResult result;
    this->load_positions(mine, inputs_.data());
    stack_->forward(inputs_.data(), mine.size(), *this);
    // Every rank of the group holds the same logits (after the last allreduce, or whole
    // layers computed from the same inputs): each computes the loss; one counts it.
    const double loss_local =
        backend_->softmax_cross_entropy(stack_->output(), this->labels_.data(), mine.size(),
                                        shape_.sizes.back(), scale, stack_->output_gradient())
            .loss_sum;
    result.forward_seconds = seconds_since(start) - clock_.seconds();
    stack_->backward(*this, false, nullptr, false);
    result.backward_seconds = seconds_since(start) - clock_.seconds() - result.forward_seconds;
    this->finish_partitioned_step(result, global, loss_local, group_rank_ == 0, bytes_, start);
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    const Range mine = split_evenly(data.rows, static_cast<std::size_t>(replicas_),
                                    static_cast<std::size_t>(replica_));
    const mlp::LossSums sums = this->evaluate_passes(mine, [&](const std::uint32_t* rows,
                                                                std::size_t n) {
      this->load_rows(data, rows, n, inputs_.data());
      stack_->forward(inputs_.data(), n, *this);
      return backend_->softmax_cross_entropy(stack_->output(), this->labels_.data(), n,
                                             shape_.sizes.back(), T(0), nullptr);
    });
    const bool counts = group_rank_ == 0;
    return this->agree_evaluation(counts ? sums : mlp::LossSums{},
                                  counts ? static_cast<double>(mine.size()) : 0.0);
  }

  std::string layout_description() const override {
    std::string layers;
    for (std::size_t l = 0; l < kinds_.size(); ++l) {
      char text[64];
      std::snprintf(text, sizeof text, "%slayer %zu %s", l ? ", " : "", l,
                    kinds_[l] == Kind::column ? "column-split"
                    : kinds_[l] == Kind::row  ? "row-split"
                                              : "whole");
      layers += text;
    }
    return "layout:    " + this->replica_text("tensor-parallel ranks") + "tensor parallel over " +
           std::to_string(group_size_) + " ranks (" + layers +
           "); every rank of a group on the same rows\n"
           "per step:  forward: allreduce of each row-split layer's output; backward: allreduce "
           "of each column-split layer's input gradient (but the first layer's)" +
           (replicas_ > 1 ? "; allreduce of the gradients across replicas" : "") +
           "; one allreduce of the loss";
  }

 private:
  enum class Kind { whole, column, row };

  void group_allreduce(T* data, std::size_t count) {
    CommClock::Scope timed(clock_);
    group_.allreduce(in_place, data, count, type_, ReduceOp::sum);
    bytes_ += allreduce_bus_bytes(static_cast<double>(count * sizeof(T)), group_size_);
  }

  LayerTensors<T> tensors(std::size_t l, bool) override {
    return {params_.data() + weight_[l], params_.data() + bias_[l], grads_.data() + weight_[l],
            grads_.data() + bias_[l]};
  }
  void after_forward_gemm(std::size_t l, T* y, std::size_t rows) override {
    if (kinds_[l] == Kind::row) group_allreduce(y, rows * shape_.sizes[l + 1]);
  }
  void after_input_gradient(std::size_t l, T* grad_x, std::size_t rows) override {
    if (kinds_[l] == Kind::column) group_allreduce(grad_x, rows * shape_.sizes[l]);
  }

  std::vector<Kind> kinds_;
  std::vector<std::size_t> bias_;  // local offsets of each layer's tensors
  std::vector<std::size_t> weight_;
  std::unique_ptr<LayerStack<T>> stack_;
  mlp::DeviceBuffer<T> inputs_;
  double bytes_ = 0;
};

}  // namespace

template <class T>
std::unique_ptr<TrainerBase> make_tensor_parallel(const TrainConfig& config, Communicator& comm,
                                                  const DataSplit& data) {
  return std::make_unique<TensorParallel<T>>(config, comm, data);
}
template std::unique_ptr<TrainerBase> make_tensor_parallel<float>(const TrainConfig&,
                                                                  Communicator&, const DataSplit&);
template std::unique_ptr<TrainerBase> make_tensor_parallel<double>(const TrainConfig&,
                                                                   Communicator&,
                                                                   const DataSplit&);

}  // namespace collx::train
