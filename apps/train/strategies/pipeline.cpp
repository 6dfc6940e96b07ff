// Pipeline parallel: the layers cut into stages of about equal cost (parameters, the GEMMs'
// work per sample) on consecutive ranks; each replica's slice of the global batch cut into
// micro-batches. Stage s receives a micro-batch's activations from stage s - 1 and sends its
// output to stage s + 1; the backward pass sends the gradients of those activations back. The
// last stage computes the loss. Each stage sums its layers' gradients over the micro-batches,
// then updates them (after an allreduce across replicas in the hybrid layout).
//
// Schedules (micro-batches i = 0 .. m-1, stages S):
//   GPipe: every forward, then every backward;
//   1F1B:  stage s runs min(S - s - 1, m) forwards, then alternates one forward and one
//          backward, then the remaining backwards: at most S - s micro-batches' activations
//          live at once instead of m.
// Backwards run in micro-batch order in both, so both give the same bits. Sends are
// nonblocking, receives blocking: the time a stage waits in them is its bubble, compared with
// the ideal (S - 1) / (m + S - 1) of equal stages.
#include <algorithm>
#include <limits>

#include "layer_stack.hpp"
#include "partitioned.hpp"

namespace collx::train {

namespace {

// Cuts layers with these costs into `stages` contiguous runs minimising the largest run's cost;
// returns each stage's first layer, and the end.
std::vector<std::size_t> balance_stages(const std::vector<double>& cost, std::size_t stages) {
  const std::size_t n = cost.size();
  std::vector<double> prefix(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + cost[i];
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[s][i]: the smallest largest cost of the first i layers in s stages; cut[s][i]: where
  // the last of those stages begins.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<std::size_t>> cut(stages + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  for (std::size_t s = 1; s <= stages; ++s) {
    for (std::size_t i = s; i <= n; ++i) {
      for (std::size_t j = s - 1; j < i; ++j) {
        const double value = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (value < best[s][i]) {
          best[s][i] = value;
          cut[s][i] = j;
        }
      }
    }
  }
  std::vector<std::size_t> first(stages + 1);
  first[stages] = n;
  for (std::size_t s = stages, i = n; s > 0; --s) {
    i = cut[s][i];
    first[s - 1] = i;
  }
  return first;
}

template <class T>
class Pipeline final : public PartitionedTrainer<T>, private LayerHooks<T> {
  using Base = PartitionedTrainer<T>;
  using Base::backend_, Base::comm_, Base::config_, Base::layout_, Base::shape_, Base::type_,
      Base::clock_, Base::params_, Base::grads_, Base::group_, Base::group_rank_,
      Base::group_size_, Base::replica_, Base::replicas_;

 public:
  Pipeline(const TrainConfig& config, Communicator& comm, const DataSplit& data)
      : Base(config, comm, data, comm.size() / config.replicas),
        stages_(static_cast<std::size_t>(group_size_)),
        stage_(static_cast<std::size_t>(group_rank_)),
        first_layer_(stage_bounds(shape_, stages_)) {
    std::vector<RankPieces> pieces(stages_);
    for (std::size_t s = 0; s < stages_; ++s) {
      for (std::size_t l = first_layer_[s]; l < first_layer_[s + 1]; ++l)
        pieces[s].append_layer(layout_, shape_, l);
    }
    this->set_pieces(std::move(pieces));
    std::vector<LayerDims> dims;
    std::size_t local = 0;
    for (std::size_t l = begin(); l < end(); ++l) {
      dims.push_back({shape_.sizes[l], shape_.sizes[l + 1], l + 1 < shape_.layers()});
      bias_.push_back(local);
      local += shape_.sizes[l + 1];
      weight_.push_back(local);
      local += shape_.sizes[l + 1] * shape_.sizes[l];
    }
    const std::size_t per_replica =
        (config.batch + static_cast<std::size_t>(replicas_) - 1) /
        static_cast<std::size_t>(replicas_);
    const std::size_t micro = (per_replica + config.micro_batches - 1) / config.micro_batches;
    const std::size_t rows = std::max(micro, config.eval_rows);
    // GPipe keeps every micro-batch's activations; 1F1B at most S - s.
    const std::size_t slots = config.pipeline_schedule == PipelineSchedule::gpipe
                                  ? config.micro_batches
                                  : std::min(config.micro_batches, stages_ - stage_);
    for (std::size_t k = 0; k < slots; ++k) {
      Slot slot;
      slot.stack = std::make_unique<LayerStack<T>>(*backend_, dims, rows);
      slot.inputs = mlp::DeviceBuffer<T>(*backend_, rows * shape_.sizes[begin()]);
      slot.input_gradient =
          mlp::DeviceBuffer<T>(*backend_, stage_ > 0 ? rows * shape_.sizes[begin()] : 0);
      this->activation_elements_ += slot.stack->activation_elements() + slot.inputs.size() +
                                    slot.input_gradient.size();
      slots_.push_back(std::move(slot));
    }
  }

  StepResult train_step() override {
    const auto start = Clock::now();
    clock_.reset();
    bytes_ = 0;
    const Range global = this->global_batch();
    replica_batch_ = rank_slice(global, replica_, replicas_);
    scale_ = T(1) / static_cast<T>(global.size());
    loss_local_ = 0;
    const std::size_t m = config_.micro_batches;
    if (config_.pipeline_schedule == PipelineSchedule::gpipe) {
      for (std::size_t i = 0; i < m; ++i)
        forward(i);
      for (std::size_t i = 0; i < m; ++i)
        backward(i);
    } else {
      const std::size_t warmup = std::min(stages_ - stage_ - 1, m);
      for (std::size_t i = 0; i < warmup; ++i)
        forward(i);
      for (std::size_t i = 0; i + warmup < m; ++i) {
        forward(i + warmup);
        backward(i);
      }
      for (std::size_t i = m - warmup; i < m; ++i)
        backward(i);
    }
    {
      CommClock::Scope timed(clock_);
      for (Slot& s : slots_) {
        s.forward_send.wait();
        s.backward_send.wait();
      }
    }
    StepResult result;
    result.bubble_seconds = clock_.seconds();
    const double compute = seconds_since(start) - clock_.seconds();
    result.forward_seconds = forward_seconds_;
    result.backward_seconds = compute - forward_seconds_;
    forward_seconds_ = 0;
    this->finish_partitioned_step(result, global, loss_local_, last_stage(), bytes_, start);
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    // The replicas split the test set; the stages pass each chunk along; the last counts.
    const Range mine = split_evenly(data.rows, static_cast<std::size_t>(replicas_),
                                    static_cast<std::size_t>(replica_));
    Slot& slot = slots_[0];
    const mlp::LossSums sums = this->evaluate_passes(mine, [&](const std::uint32_t* rows,
                                                                std::size_t n) {
      if (stage_ == 0) {
        this->load_rows(data, rows, n, slot.inputs.data());
      } else {
        group_.recv(slot.inputs.data(), n * shape_.sizes[begin()], type_, group_rank_ - 1,
                    kEvalTag);
      }
      slot.stack->forward(slot.inputs.data(), n, *this);
      if (!last_stage()) {
        group_.send(slot.stack->output(), n * shape_.sizes[end()], type_, group_rank_ + 1,
                    kEvalTag);
        return mlp::LossSums{};
      }
      if (stage_ != 0) this->load_labels(data, rows, n);
      return backend_->softmax_cross_entropy(slot.stack->output(), this->labels_.data(), n,
                                             shape_.sizes.back(), T(0), nullptr);
    });
    const bool counts = last_stage();
    return this->agree_evaluation(sums, counts ? static_cast<double>(mine.size()) : 0.0);
  }

  std::string layout_description() const override {
    std::string stages;
    for (std::size_t s = 0; s < stages_; ++s) {
      char text[96];
      const std::size_t first = first_layer_[s], last = first_layer_[s + 1] - 1;
      if (first == last) {
        std::snprintf(text, sizeof text, "%sstage %zu = layer %zu", s ? ", " : "", s, first);
      } else {
        std::snprintf(text, sizeof text, "%sstage %zu = layers %zu-%zu", s ? ", " : "", s, first,
                      last);
      }
      stages += text;
    }
    const std::size_t m = config_.micro_batches;
    char bubble[64];
    std::snprintf(bubble, sizeof bubble, "%.3f",
                  static_cast<double>(stages_ - 1) / static_cast<double>(m + stages_ - 1));
    return "layout:    " + this->replica_text("stages") + "pipeline of " +
           std::to_string(stages_) + " stages on consecutive ranks (" + stages + "), " +
           std::string(to_string(config_.pipeline_schedule)) + ", " + std::to_string(m) +
           " micro-batches per step, ideal bubble (S-1)/(m+S-1) = " + bubble +
           "\nper step:  per micro-batch: send/recv of its activations forward and of their "
           "gradients backward between neighbouring stages" +
           (replicas_ > 1 ? "; allreduce of each stage's gradients across replicas" : "") +
           "; one allreduce of the loss";
  }

 private:
  static constexpr int kEvalTag = 32767;

  struct Slot {
    std::unique_ptr<LayerStack<T>> stack;
    mlp::DeviceBuffer<T> inputs;          // received (or loaded: stage 0) activations
    mlp::DeviceBuffer<T> input_gradient;  // sent back
    Request forward_send;
    Request backward_send;
  };

  static std::vector<std::size_t> stage_bounds(const ModelShape& shape, std::size_t stages) {
    std::vector<double> cost;
    for (std::size_t l = 0; l < shape.layers(); ++l)
      cost.push_back(static_cast<double>(shape.sizes[l] * shape.sizes[l + 1]));
    return balance_stages(cost, stages);
  }

  std::size_t begin() const { return first_layer_[stage_]; }
  std::size_t end() const { return first_layer_[stage_ + 1]; }  // its last layer's output size
  bool last_stage() const { return stage_ + 1 == stages_; }
  Range micro_batch(std::size_t i) const {
    const Range part = split_evenly(replica_batch_.size(), config_.micro_batches, i);
    return {replica_batch_.begin + part.begin, replica_batch_.begin + part.end};
  }
  static int tag(std::size_t i, bool backward) { return static_cast<int>(2 * i + backward); }

  void forward(std::size_t i) {
    const auto start = Clock::now();
    const double comm_before = clock_.seconds();
    Slot& slot = slots_[i % slots_.size()];
    const Range part = micro_batch(i);
    const std::size_t rows = part.size();
    {
      CommClock::Scope timed(clock_);
      slot.forward_send.wait();  // the slot's previous output has left
      slot.backward_send.wait();
    }
    if (stage_ == 0) {
      this->load_positions(part, slot.inputs.data());
    } else {
      CommClock::Scope timed(clock_);
      group_.recv(slot.inputs.data(), rows * shape_.sizes[begin()], type_, group_rank_ - 1,
                  tag(i, false));
    }
    slot.stack->forward(slot.inputs.data(), rows, *this);
    if (last_stage()) {
      if (stage_ != 0) this->load_position_labels(part);
      loss_local_ += backend_
                         ->softmax_cross_entropy(slot.stack->output(), this->labels_.data(), rows,
                                                 shape_.sizes.back(), scale_,
                                                 slot.stack->output_gradient())
                         .loss_sum;
    } else {
      CommClock::Scope timed(clock_);
      const std::size_t count = rows * shape_.sizes[end()];
      slot.forward_send =
          group_.isend(slot.stack->output(), count, type_, group_rank_ + 1, tag(i, false));
      bytes_ += static_cast<double>(count * sizeof(T));
    }
    forward_seconds_ += seconds_since(start) - (clock_.seconds() - comm_before);
  }

  void backward(std::size_t i) {
    Slot& slot = slots_[i % slots_.size()];
    const std::size_t rows = micro_batch(i).size();
    if (!last_stage()) {
      CommClock::Scope timed(clock_);
      group_.recv(slot.stack->output_gradient(), rows * shape_.sizes[end()], type_,
                  group_rank_ + 1, tag(i, true));
    }
    // The first micro-batch writes the gradients, the others add to them.
    slot.stack->backward(*this, i > 0, stage_ > 0 ? slot.input_gradient.data() : nullptr, true);
    if (stage_ > 0) {
      CommClock::Scope timed(clock_);
      const std::size_t count = rows * shape_.sizes[begin()];
      slot.backward_send =
          group_.isend(slot.input_gradient.data(), count, type_, group_rank_ - 1, tag(i, true));
      bytes_ += static_cast<double>(count * sizeof(T));
    }
  }

  LayerTensors<T> tensors(std::size_t l, bool) override {
    return {params_.data() + weight_[l], params_.data() + bias_[l], grads_.data() + weight_[l],
            grads_.data() + bias_[l]};
  }

  std::size_t stages_;
  std::size_t stage_;
  std::vector<std::size_t> first_layer_;  // stage s holds layers [first_layer_[s], [s + 1])
  std::vector<std::size_t> bias_;         // local offsets of this stage's layers' tensors
  std::vector<std::size_t> weight_;
  std::vector<Slot> slots_;
  Range replica_batch_;
  T scale_ = 1;
  double loss_local_ = 0;
  double forward_seconds_ = 0;
  double bytes_ = 0;
};

}  // namespace

template <class T>
std::unique_ptr<TrainerBase> make_pipeline(const TrainConfig& config, Communicator& comm,
                                           const DataSplit& data) {
  return std::make_unique<Pipeline<T>>(config, comm, data);
}
template std::unique_ptr<TrainerBase> make_pipeline<float>(const TrainConfig&, Communicator&,
                                                           const DataSplit&);
template std::unique_ptr<TrainerBase> make_pipeline<double>(const TrainConfig&, Communicator&,
                                                            const DataSplit&);

}  // namespace collx::train
