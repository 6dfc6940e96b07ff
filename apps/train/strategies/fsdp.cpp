// Fully sharded data parallel (ZeRO-3): parameters, gradients and optimizer state are held 1/p
// per rank. The unit of sharding is a layer (its bias and weight, contiguous in the flat
// layout), cut into p equal blocks (the last padded). A step, on the rank's share of the batch:
//
//   forward:  for each layer, wait for its allgather, start the next layer's (prefetch),
//             compute;
//   backward: from the last layer down (still gathered from the forward pass), start the
//             allgather of the layer below, compute this layer's gradients, start their
//             reduce_scatter: rank r receives the sum over ranks of block r;
//   update:   the optimizer over this rank's blocks only.
//
// Two gathered-layer buffers and two gradient buffers alternate, so at most two layers are
// whole on a rank at any moment.
#include <algorithm>

#include "layer_stack.hpp"
#include "partitioned.hpp"

namespace collx::train {

namespace {

template <class T>
class Fsdp final : public PartitionedTrainer<T>, private LayerHooks<T> {
  using Base = PartitionedTrainer<T>;
  using Base::backend_, Base::comm_, Base::config_, Base::layout_, Base::nranks_, Base::rank_,
      Base::shape_, Base::type_, Base::clock_, Base::params_, Base::grads_;

 public:
  Fsdp(const TrainConfig& config, Communicator& comm, const DataSplit& data)
      : Base(config, comm, data, comm.size()),
        max_rows_(std::max(config.batch / static_cast<std::size_t>(comm.size()) + 1,
                           config.eval_rows)),
        stack_(*backend_, layer_dims(shape_), max_rows_),
        inputs_(*backend_, max_rows_ * data.train.features) {
    const auto p = static_cast<std::size_t>(nranks_);
    std::vector<RankPieces> pieces(p);
    std::size_t widest = 0;
    for (std::size_t l = 0; l < shape_.layers(); ++l) {
      const std::size_t begin = layout_.bias_offset(l), out = shape_.sizes[l + 1];
      const std::size_t size = out * (shape_.sizes[l] + 1);
      const std::size_t block = (size + p - 1) / p;
      units_.push_back({begin, size, block, pieces[0].local_count});
      widest = std::max(widest, block * p);
      for (std::size_t r = 0; r < p; ++r) {
        RankPieces& mine = pieces[r];
        const std::size_t first = std::min(begin + r * block, begin + size);
        const std::size_t last = std::min(first + block, begin + size);
        const std::size_t bias_end = begin + out;
        // The block may hold the end of the bias and the start of the weight.
        const std::size_t local = mine.local_count;
        if (first < bias_end) {
          mine.pieces.push_back({local, first, std::min(last, bias_end) - first, false});
        }
        if (last > bias_end) {
          const std::size_t from = std::max(first, bias_end);
          mine.pieces.push_back({local + (from - first), from, last - from, true});
        }
        mine.local_count += block;
      }
    }
    this->set_pieces(std::move(pieces));
    for (int b = 0; b < 2; ++b) {
      gathered_[b] = mlp::DeviceBuffer<T>(*backend_, widest);
      gradients_[b] = mlp::DeviceBuffer<T>(*backend_, widest);
    }
    this->activation_elements_ = stack_.activation_elements() + inputs_.size();
    this->working_elements_ = 4 * widest;
  }

  StepResult train_step() override {
    const auto start = Clock::now();
    clock_.reset();
    bytes_ = 0;
    const Range global = this->global_batch();
    const Range mine = rank_slice(global, rank_, nranks_);
    const T scale = T(1) / static_cast<T>(global.size());
    StepResult result;
    this->load_positions(mine, inputs_.data());
    start_gather(0);
    stack_.forward(inputs_.data(), mine.size(), *this);
    const double loss_local =
        backend_->softmax_cross_entropy(stack_.output(), this->labels_.data(), mine.size(),
                                        shape_.sizes.back(), scale, stack_.output_gradient())
            .loss_sum;
    result.forward_seconds = seconds_since(start) - clock_.seconds();
    stack_.backward(*this, false, nullptr, false);
    {
      CommClock::Scope timed(clock_);
      for (Request& r : scatters_)
        if (r.valid()) r.wait();
    }
    result.backward_seconds = seconds_since(start) - clock_.seconds() - result.forward_seconds;
    this->finish_partitioned_step(result, global, loss_local, true, bytes_, start);
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    const Range mine =
        split_evenly(data.rows, static_cast<std::size_t>(nranks_), static_cast<std::size_t>(rank_));
    // Every rank runs the same number of passes: each pass gathers every layer.
    const std::size_t most = (data.rows + static_cast<std::size_t>(nranks_) - 1) /
                             static_cast<std::size_t>(nranks_);
    mlp::LossSums sums;
    std::vector<std::uint32_t> rows(config_.eval_rows);
    for (std::size_t done = 0; done < std::max<std::size_t>(most, 1); done += config_.eval_rows) {
      const std::size_t begin = std::min(mine.begin + done, mine.end);
      const std::size_t n = std::min(config_.eval_rows, mine.end - begin);
      for (std::size_t i = 0; i < n; ++i)
        rows[i] = static_cast<std::uint32_t>(begin + i);
      this->load_rows(data, rows.data(), n, inputs_.data());
      start_gather(0);
      stack_.forward(inputs_.data(), n, *this);
      if (n == 0) continue;
      const mlp::LossSums s = backend_->softmax_cross_entropy(
          stack_.output(), this->labels_.data(), n, shape_.sizes.back(), T(0), nullptr);
      sums.loss_sum += s.loss_sum;
      sums.correct += s.correct;
    }
    return this->agree_evaluation(sums, static_cast<double>(mine.size()));
  }

  std::string layout_description() const override {
    const std::string p = std::to_string(nranks_);
    return "layout:    fully sharded (ZeRO-3): each of the " + p +
           " ranks holds block r of every layer (parameters, gradients, optimizer state: 1/" +
           p + "), and 1/" + p +
           " of each global batch\n"
           "per step:  per layer: allgather before its forward (the next layer's prefetched), "
           "allgather again before its backward (the last layer kept from the forward), "
           "reduce_scatter of its gradients; one allreduce of the loss";
  }

 private:
  struct Unit {
    std::size_t begin = 0;  // layer's first element in the flat layout (its bias)
    std::size_t size = 0;   // bias + weight
    std::size_t block = 0;  // per rank (size rounded up to a multiple of the ranks, / ranks)
    std::size_t local = 0;  // the block's offset in this rank's buffer
  };

  static std::vector<LayerDims> layer_dims(const ModelShape& shape) {
    std::vector<LayerDims> dims;
    for (std::size_t l = 0; l < shape.layers(); ++l)
      dims.push_back({shape.sizes[l], shape.sizes[l + 1], l + 1 < shape.layers()});
    return dims;
  }

  void start_gather(std::size_t l) {
    const Unit& u = units_[l];
    CommClock::Scope timed(clock_);
    gathers_[l % 2] = comm_.iallgather(params_.data() + u.local, gathered_[l % 2].data(), u.block,
                                       type_);
    bytes_ += gather_bus_bytes(static_cast<double>(u.block * nranks_ * sizeof(T)), nranks_);
  }

  void wait_gather(std::size_t l) {
    CommClock::Scope timed(clock_);
    gathers_[l % 2].wait();
  }

  // LayerHooks: where layer l's tensors are, gathering as the passes go.
  LayerTensors<T> tensors(std::size_t l, bool backward) override {
    const std::size_t layers = units_.size();
    if (!backward) {
      wait_gather(l);
      if (l + 1 < layers) start_gather(l + 1);
    } else {
      // The last layer is still whole from the forward pass; the others were gathered (below).
      if (l + 1 < layers) wait_gather(l);
      if (l > 0) start_gather(l - 1);
      // Gradient buffer l % 2 was last given to layer l + 2's reduce_scatter.
      CommClock::Scope timed(clock_);
      if (scatters_[l % 2].valid()) scatters_[l % 2].wait();
    }
    const T* whole = gathered_[l % 2].data();
    T* grads = gradients_[l % 2].data();
    const std::size_t out = shape_.sizes[l + 1];
    return {whole + out, whole, grads + out, grads};
  }

  void gradients_done(std::size_t l) override {
    const Unit& u = units_[l];
    CommClock::Scope timed(clock_);
    scatters_[l % 2] = comm_.ireduce_scatter(gradients_[l % 2].data(), grads_.data() + u.local,
                                             u.block, type_, ReduceOp::sum);
    bytes_ += gather_bus_bytes(static_cast<double>(u.block * nranks_ * sizeof(T)), nranks_);
  }

  std::size_t max_rows_;
  LayerStack<T> stack_;
  mlp::DeviceBuffer<T> inputs_;
  std::vector<Unit> units_;
  mlp::DeviceBuffer<T> gathered_[2];
  mlp::DeviceBuffer<T> gradients_[2];
  Request gathers_[2];
  Request scatters_[2];
  double bytes_ = 0;
};

}  // namespace

template <class T>
std::unique_ptr<TrainerBase> make_fsdp(const TrainConfig& config, Communicator& comm,
                                       const DataSplit& data) {
  return std::make_unique<Fsdp<T>>(config, comm, data);
}
template std::unique_ptr<TrainerBase> make_fsdp<float>(const TrainConfig&, Communicator&,
                                                       const DataSplit&);
template std::unique_ptr<TrainerBase> make_fsdp<double>(const TrainConfig&, Communicator&,
                                                        const DataSplit&);

}  // namespace collx::train
