// Pipeline parallel: the layers cut into stages on consecutive ranks (--pipeline-split, or
// auto: the cut whose stages' forward and backward GEMM work gives this schedule its shortest
// step, pipeline_partition.hpp); each replica's share of the global batch cut into
// micro-batches. Stage s receives a micro-batch's activations from stage s - 1 and sends its
// output to stage s + 1; the backward pass sends the gradients of those activations back. The
// last stage computes the loss. Each stage sums its layers' gradients over the micro-batches,
// then updates them (after an allreduce across replicas in the hybrid layout).
//
// The schedules (GPipe, 1F1B) are lists of passes (pipeline_schedule.hpp). Every message is
// nonblocking and every receive is posted ahead, as soon as its buffer is free: a micro-batch's
// activations when its slot is free (at the step's start for the first slots), its output
// gradient right after its forward pass. A stage therefore blocks only where the schedule makes
// it wait for a neighbour's pass. A stage's backward pass computes the input gradient first
// (down through its layers), sends it, and only then its weight gradients, which the previous
// stage does not need (--pipeline-backward input-first, the default; the same GEMMs as one
// piece, so the same results). That waiting, and the wait for the other stages at the step's
// end, is its bubble, compared with (S - 1) / (m + S - 1) of equal stages and with the bubble
// the schedule leaves for these stages' GEMM work (pipeline_bubble_formula: an MLP's stages
// cannot be equal in both forward and backward, which GPipe pays for). The compute time of
// each pass (thread CPU time) is measured too and travels with the loss's allreduce, so that
// every rank replays the schedule over them: the bubble these compute times leave, whatever
// else runs on the machine. How long the rank was not running at all (wall time minus CPU
// time: its waits spin) says how far the measured bubble can be trusted.
#include <time.h>

#include <algorithm>
#include <array>

#include "layer_stack.hpp"
#include "partitioned.hpp"
#include "pipeline_partition.hpp"
#include "pipeline_schedule.hpp"

namespace collx::train {

namespace {

// This thread's CPU time: a pass's compute without the time the rank was not running.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
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
        first_layer_(stage_bounds(config, shape_, stages_)) {
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
      slot.stack = std::make_unique<LayerStack<T>>(*backend_, dims, rows, input_first());
      slot.inputs = mlp::DeviceBuffer<T>(*backend_, rows * shape_.sizes[begin()]);
      slot.input_gradient =
          mlp::DeviceBuffer<T>(*backend_, stage_ > 0 ? rows * shape_.sizes[begin()] : 0);
      this->activation_elements_ += slot.stack->activation_elements() + slot.inputs.size() +
                                    slot.input_gradient.size();
      slots_.push_back(std::move(slot));
    }
    ops_ = pipeline_ops(config.pipeline_schedule, stages_, stage_, config.micro_batches);
    pass_seconds_.assign(stages_ * config.micro_batches * kPassTimes, 0.0);
  }

  StepResult train_step() override {
    const auto start = Clock::now();
    const double cpu_start = thread_cpu_seconds();
    clock_.reset();
    for (CommClock& clock : wait_clocks_)
      clock.reset();
    copying_posts_.fill(0);
    transfer_seconds_ = 0;
    bytes_ = 0;
    const Range global = this->global_batch();
    replica_batch_ = rank_slice(global, replica_, replicas_);
    scale_ = T(1) / static_cast<T>(global.size());
    loss_local_ = 0;
    const std::size_t m = config_.micro_batches;
    std::fill(pass_seconds_.begin(), pass_seconds_.end(), 0.0);
    for (std::size_t i = 0; i < std::min(m, slots_.size()); ++i)
      post_input_receive(i);
    for (const PipelineOp& op : ops_) {
      if (op.backward) {
        backward(op.micro_batch);
      } else {
        forward(op.micro_batch);
      }
    }
    {
      // Waiting for the neighbours to take the last sends: bubble too (see forward()).
      CommClock::Scope timed(clock_);
      CommClock::Scope waited(wait_clock(Wait::send));
      for (Slot& s : slots_) {
        wait_for_message(s.forward_send);
        wait_for_message(s.backward_send);
      }
    }
    StepResult result;
    const double compute = seconds_since(start) - clock_.seconds();
    result.forward_seconds = forward_seconds_;
    result.backward_seconds = compute - forward_seconds_;
    forward_seconds_ = 0;
    this->finish_partitioned_step(result, global, loss_local_, last_stage(), bytes_, start,
                                  pass_seconds_);
    result.bubble_seconds =
        waited(Wait::input) + waited(Wait::gradient) + waited(Wait::send) + this->loss_sum_seconds_;
    result.pipeline_seconds = result.seconds - result.update_seconds - this->replica_sum_seconds_;
    // pass_seconds_ now holds every stage's times summed over the replicas.
    PassTimes times;
    times.forward.assign(stages_, std::vector<double>(m));
    times.backward.assign(stages_, std::vector<double>(m));
    times.backward_input.assign(stages_, std::vector<double>(m));
    for (std::size_t s = 0; s < stages_; ++s) {
      for (std::size_t i = 0; i < m; ++i) {
        const double* pass = &pass_seconds_[(s * m + i) * kPassTimes];
        times.forward[s][i] = pass[0] / replicas_;
        times.backward[s][i] = pass[1] / replicas_;
        // Sent at the end of the pass where the stage does not split it (and the first stage,
        // which sends nothing back).
        times.backward_input[s][i] = (s > 0 && input_first() ? pass[2] : pass[1]) / replicas_;
      }
    }
    auto& parts = result.pipeline_parts;
    for (std::size_t i = 0; i < m; ++i) {
      parts[kForwardCpu] += times.forward[stage_][i];
      parts[kBackwardCpu] += times.backward[stage_][i];
      parts[kBackwardInputCpu] += times.backward_input[stage_][i];
    }
    parts[kWaitInput] = waited(Wait::input);
    parts[kWaitGradient] = waited(Wait::gradient);
    parts[kWaitSend] = waited(Wait::send);
    parts[kWaitEnd] = this->loss_sum_seconds_;
    parts[kWaitTransfer] = transfer_seconds_;
    result.transfer_seconds = transfer_seconds_;
    parts[kPasses] = static_cast<double>(m);
    const ReplayedStep replayed = replay_pipeline(config_.pipeline_schedule, times);
    result.replayed_seconds = replayed.seconds;
    result.replayed_idle_seconds = replayed.idle[stage_];
    // Waiting spins, so the step's wall time minus its CPU time is the time the rank was not
    // running: other processes had its core, which the waiting of its neighbours then shows.
    result.not_running_seconds =
        std::max(0.0, seconds_since(start) - (thread_cpu_seconds() - cpu_start));
    return result;
  }

  EvalResult evaluate(const Dataset& data) override {
    // The replicas split the test set; the stages pass each micro-batch along; the last counts.
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

  double bubble_formula() const override { return stages_bubble_formula(); }

  std::string stage_split() const override {
    std::string counts;
    for (std::size_t s = 0; s < stages_; ++s) {
      if (s) counts += ',';
      counts += std::to_string(first_layer_[s + 1] - first_layer_[s]);
    }
    return counts;
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
    char bubble[160];
    std::snprintf(bubble, sizeof bubble,
                  "%.3f, for these stages' GEMM work (forward and backward unequal) %.3f",
                  static_cast<double>(stages_ - 1) / static_cast<double>(m + stages_ - 1),
                  stages_bubble_formula());
    return "layout:    " + this->replica_text("stages") + "pipeline of " + std::to_string(stages_) +
           " stages on consecutive ranks (" + stages + "), " +
           std::string(to_string(config_.pipeline_schedule)) + ", " + std::to_string(m) +
           " micro-batches per step" +
           (config_.pipeline_input_gradient_first && stages_ > 1
                ? ", input gradients sent before the weight gradients"
                : "") +
           ", bubble of equal stages (S-1)/(m+S-1) = " + bubble + "\n" + split_description() +
           "\nper step:  per micro-batch: send/recv of its activations forward and of their "
           "gradients backward between neighbouring stages" +
           (replicas_ > 1 ? "; allreduce of each stage's gradients across replicas" : "") +
           "; one allreduce of the loss";
  }

 private:
  static constexpr int kEvalTag = 32767;
  // The header's split line: how the cut was chosen, as --pipeline-split would give it, and each
  // stage's GEMM work per sample.
  std::string split_description() const {
    const std::string counts = stage_split();
    std::string text = "split:     ";
    if (config_.pipeline_split.empty()) {
      const double cuts = partition_count(shape_.layers(), stages_);
      char how[192];
      if (!replays_every_cut(shape_.layers(), stages_, config_.micro_batches)) {
        std::snprintf(how, sizeof how,
                      "auto = --pipeline-split %s (%.3g cuts x %zu micro-batches, too many to "
                      "replay: the smallest largest forward + backward GEMM work)",
                      counts.c_str(), cuts, config_.micro_batches);
      } else {
        std::snprintf(how, sizeof how,
                      "auto = --pipeline-split %s (of the %.0f cuts, the shortest %s step for "
                      "the stages' GEMM work)",
                      counts.c_str(), cuts,
                      std::string(to_string(config_.pipeline_schedule)).c_str());
      }
      text += how;
    } else {
      text += "--pipeline-split " + counts;
    }
    text += "; forward / backward multiply-adds per sample:";
    const StageCosts costs = stages_costs();
    for (std::size_t s = 0; s < stages_; ++s) {
      char stage[96];
      std::snprintf(stage, sizeof stage, "%s stage %zu %.3gM / %.3gM", s ? "," : "", s,
                    costs.forward[s] / 1e6, costs.backward[s] / 1e6);
      text += stage;
    }
    return text;
  }

  struct Slot {
    std::unique_ptr<LayerStack<T>> stack;
    mlp::DeviceBuffer<T> inputs;          // received (or loaded: stage 0) activations
    mlp::DeviceBuffer<T> input_gradient;  // sent back
    Request input_receive;                // into inputs (stages after the first)
    Request gradient_receive;             // into stack->output_gradient() (stages before the last)
    Request forward_send;
    Request backward_send;
  };

  // What a stage waits for (its bubble): input activations, output gradients, earlier sends
  // to be taken.
  enum class Wait { input, gradient, send };
  static constexpr std::size_t kWaits = 3;
  CommClock& wait_clock(Wait wait) { return wait_clocks_[static_cast<std::size_t>(wait)]; }
  // A wait's time in this step: its waits', and its posts' that copied a message.
  double waited(Wait wait) const {
    const auto w = static_cast<std::size_t>(wait);
    return wait_clocks_[w].seconds() + copying_posts_[w];
  }

  // A stage after the first sends its input gradient before computing its weight gradients
  // (--pipeline-backward input-first); the first has no input gradient.
  bool input_first() const { return config_.pipeline_input_gradient_first && stage_ > 0; }

  // --pipeline-split's counts, or auto: the cut with the shortest replayed step for the layers'
  // GEMM work (pipeline_partition.hpp).
  static std::vector<std::size_t> stage_bounds(const TrainConfig& config, const ModelShape& shape,
                                               std::size_t stages) {
    if (!config.pipeline_split.empty()) {
      return stages_from_counts(config.pipeline_split, shape.layers(), stages);
    }
    return balanced_stages(mlp_layer_costs(shape.sizes), stages, config.pipeline_schedule,
                           config.micro_batches, config.pipeline_input_gradient_first);
  }

  StageCosts stages_costs() const {
    return stage_costs(mlp_layer_costs(shape_.sizes), first_layer_,
                       config_.pipeline_input_gradient_first);
  }

  // What the schedule leaves idle for these stages' GEMM work (pipeline_bubble_formula).
  double stages_bubble_formula() const {
    const StageCosts costs = stages_costs();
    return pipeline_bubble_formula(config_.pipeline_schedule, costs.forward, costs.backward,
                                   config_.micro_batches, costs.backward_input);
  }

  std::size_t begin() const { return first_layer_[stage_]; }
  std::size_t end() const { return first_layer_[stage_ + 1]; }  // its last layer's output size
  bool last_stage() const { return stage_ + 1 == stages_; }
  Range micro_batch(std::size_t i) const {
    const Range part = split_evenly(replica_batch_.size(), config_.micro_batches, i);
    return {replica_batch_.begin + part.begin, replica_batch_.begin + part.end};
  }
  static int tag(std::size_t i, bool backward) { return static_cast<int>(2 * i + backward); }

  // Posts the receive of micro-batch i's activations into its slot (stages after the first).
  void post_input_receive(std::size_t i) {
    if (stage_ == 0) return;
    Slot& slot = slots_[i % slots_.size()];
    slot.input_receive = post_message(Wait::input, [&] {
      return group_.irecv(slot.inputs.data(), micro_batch(i).size() * shape_.sizes[begin()], type_,
                          group_rank_ - 1, tag(i, false));
    });
  }

  // The compute of one pass, in thread CPU time, for the replay: forward, backward, and the
  // part of the backward before its input gradient was sent.
  static constexpr std::size_t kPassTimes = 3;
  enum class Pass { forward, backward, backward_input };
  double& pass_seconds(std::size_t i, Pass pass) {
    return pass_seconds_[(stage_ * config_.micro_batches + i) * kPassTimes +
                         static_cast<std::size_t>(pass)];
  }

  void forward(std::size_t i) {
    const auto start = Clock::now();
    const double comm_before = clock_.seconds();
    Slot& slot = slots_[i % slots_.size()];
    const Range part = micro_batch(i);
    const std::size_t rows = part.size();
    {
      // The slot's previous output has left. A large send completes only once the neighbour
      // has taken it (rendezvous: the receiver copies when it next enters MPI, after its
      // current pass), so this is waiting for the neighbour's pass as much as a receive is:
      // bubble. With one slot (1F1B's last stage) it is where that stage waits most.
      CommClock::Scope timed(clock_);
      CommClock::Scope waited(wait_clock(Wait::send));
      wait_for_message(slot.forward_send);
      wait_for_message(slot.backward_send);
    }
    if (stage_ > 0) {
      // The bubble: waiting for the previous stage's pass.
      CommClock::Scope timed(clock_);
      CommClock::Scope waited(wait_clock(Wait::input));
      wait_for_message(slot.input_receive);
    }
    const double cpu_start = thread_cpu_seconds();
    if (stage_ == 0) this->load_positions(part, slot.inputs.data());
    slot.stack->forward(slot.inputs.data(), rows, *this);
    if (last_stage()) {
      if (stage_ != 0) this->load_position_labels(part);
      loss_local_ +=
          backend_
              ->softmax_cross_entropy(slot.stack->output(), this->labels_.data(), rows,
                                      shape_.sizes.back(), scale_, slot.stack->output_gradient())
              .loss_sum;
    }
    pass_seconds(i, Pass::forward) = thread_cpu_seconds() - cpu_start;
    if (!last_stage()) {
      const std::size_t count = rows * shape_.sizes[end()];
      slot.forward_send = post_message(Wait::send, [&] {
        return group_.isend(slot.stack->output(), count, type_, group_rank_ + 1, tag(i, false));
      });
      bytes_ += static_cast<double>(count * sizeof(T));
      // Its gradient comes back into the slot's output gradient, which nothing uses until then.
      slot.gradient_receive = post_message(Wait::gradient, [&] {
        return group_.irecv(slot.stack->output_gradient(), count, type_, group_rank_ + 1,
                            tag(i, true));
      });
    }
    forward_seconds_ += seconds_since(start) - (clock_.seconds() - comm_before);
  }

  void backward(std::size_t i) {
    Slot& slot = slots_[i % slots_.size()];
    const std::size_t rows = micro_batch(i).size();
    if (!last_stage()) {
      // The bubble: waiting for the next stage's pass.
      CommClock::Scope timed(clock_);
      CommClock::Scope waited(wait_clock(Wait::gradient));
      wait_for_message(slot.gradient_receive);
    }
    // The first micro-batch writes the gradients, the others add to them.
    double cpu_start = thread_cpu_seconds();
    if (input_first()) {
      // The previous stage waits for the input gradient only: send it, then the weight
      // gradients (the same GEMMs as backward(), in another order).
      slot.stack->backward_inputs(*this, slot.input_gradient.data(), true);
      const double input_seconds = thread_cpu_seconds() - cpu_start;
      send_input_gradient(i, slot, rows);
      cpu_start = thread_cpu_seconds();
      slot.stack->backward_weights(*this, i > 0);
      pass_seconds(i, Pass::backward_input) = input_seconds;
      pass_seconds(i, Pass::backward) = input_seconds + thread_cpu_seconds() - cpu_start;
    } else {
      slot.stack->backward(*this, i > 0, stage_ > 0 ? slot.input_gradient.data() : nullptr, true);
      pass_seconds(i, Pass::backward) = thread_cpu_seconds() - cpu_start;
      pass_seconds(i, Pass::backward_input) = pass_seconds(i, Pass::backward);
      if (stage_ > 0) send_input_gradient(i, slot, rows);
    }
    // The slot's inputs are free: the receive of the micro-batch that takes it next.
    if (i + slots_.size() < config_.micro_batches) post_input_receive(i + slots_.size());
  }

  // Waits for a message of this stage's (a receive posted ahead, or a send to be taken), and counts
  // the polls that copied messages as their transfer. The MPI library copies a message in whichever
  // of its calls runs its progress when the message is there to copy, a wait's poll or a post
  // (post_message): a rendezvous whose receiver reads the sender's buffer, as Open MPI's shared
  // memory does with CMA; a rendezvous whose sender writes into the receiver's; an eager message
  // out of the queue. So a wait is polls that find nothing, the waiting for a neighbour's pass, and
  // polls that copy. A poll that ran on this thread's CPU for more than kCopyPoll is taken to be a
  // copy (an empty poll takes a few microseconds at most; a 1 MiB message's copy a hundred or more:
  // docs/TRAINING.md, "How the bubble is measured"), and its CPU time counts as transfer. After a
  // second of polls it waits as any request does (Request::wait, where COLLX_TIMEOUT applies), the
  // rest counted as waiting.
  static constexpr double kCopyPoll = 16e-6;
  void wait_for_message(Request& request) {
    // No message (a stage without that neighbour): nothing to wait for, and no poll to time (a
    // poll's CPU time on a busy machine can pass kCopyPoll without any copy in it).
    if (!request.valid()) return;
    const auto start = Clock::now();
    while (seconds_since(start) < 1.0) {
      const double cpu_before = thread_cpu_seconds();
      const bool done = request.test();
      const double cpu = thread_cpu_seconds() - cpu_before;
      if (cpu > kCopyPoll) transfer_seconds_ += cpu;
      if (done) return;
    }
    request.wait();
  }

  // Posts a send or a receive (`post` returns its Request), timed as communication. A post runs the
  // MPI library's progress too, so it may copy a message as a poll does: its own (an eager send; a
  // receive whose message arrived before it was posted, read at once) or another one in flight.
  // With Open MPI 4.1's shared memory up to half of a stage's copies of 2 MiB messages were in
  // posts (TrainStrategy.PipelineCountsTheMessagesCopiesAsTransfer), where no wait's poll saw them.
  // A post that ran on this thread's CPU for more than kCopyPoll counts as a poll that copied: its
  // CPU time as transfer, its wall time as a wait for `wait` (the bubble, where the copy would be
  // had a poll made it), so a copy is transfer wherever the library makes it and the transfer stays
  // part of the waits. A post that copied nothing is not waiting.
  template <class Post>
  Request post_message(Wait wait, Post&& post) {
    CommClock::Scope timed(clock_);
    const auto start = Clock::now();
    const double cpu_before = thread_cpu_seconds();
    Request request = post();
    const double cpu = thread_cpu_seconds() - cpu_before;
    if (cpu > kCopyPoll) {
      transfer_seconds_ += cpu;
      // Never less than its CPU time (two clocks), so the transfer stays within the waits.
      copying_posts_[static_cast<std::size_t>(wait)] += std::max(seconds_since(start), cpu);
    }
    return request;
  }

  void send_input_gradient(std::size_t i, Slot& slot, std::size_t rows) {
    const std::size_t count = rows * shape_.sizes[begin()];
    slot.backward_send = post_message(Wait::send, [&] {
      return group_.isend(slot.input_gradient.data(), count, type_, group_rank_ - 1, tag(i, true));
    });
    bytes_ += static_cast<double>(count * sizeof(T));
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
  double transfer_seconds_ = 0;  // of the waits and posts: wait_for_message, post_message
  double bytes_ = 0;
  std::vector<PipelineOp> ops_;  // this stage's passes, in order
  // The step's waiting for neighbours (the bubble), by Wait: the waits' wall time, and that of
  // the posts that copied a message (post_message).
  std::array<CommClock, kWaits> wait_clocks_;
  std::array<double, kWaits> copying_posts_{};
  std::vector<double> pass_seconds_;  // [stage][micro-batch][forward, backward], own stage only
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
