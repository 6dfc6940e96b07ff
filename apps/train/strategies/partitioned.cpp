#include "partitioned.hpp"

#include <algorithm>

namespace collx::train {

template <class T>
PartitionedTrainer<T>::PartitionedTrainer(const TrainConfig& config, Communicator& comm,
                                          const DataSplit& data, int group_size)
    : Core(config, comm, data),
      group_size_(group_size),
      replicas_(comm.size() / group_size),
      replica_(comm.rank() / group_size),
      group_rank_(comm.rank() % group_size),
      group_(replicas_ == 1 ? comm
                            : group_owned_.emplace(*comm.split(replica_, group_rank_))) {
  if (replicas_ > 1) across_.emplace(*comm.split(group_rank_, replica_));
}

template <class T>
void PartitionedTrainer<T>::set_pieces(std::vector<RankPieces> pieces_by_rank) {
  pieces_ = std::move(pieces_by_rank);
  const RankPieces& mine = pieces_[static_cast<std::size_t>(group_rank_)];
  params_ = mlp::DeviceBuffer<T>(*this->backend_, mine.local_count);
  grads_ = mlp::DeviceBuffer<T>(*this->backend_, mine.local_count);
  std::vector<Segment> segments;
  for (const Piece& p : mine.pieces)
    segments.push_back({p.local, p.count, 0, p.is_weight});
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.offset < b.offset; });
  optimizer_.emplace(this->make_optimizer(std::move(segments), mine.local_count));
}

template <class T>
void PartitionedTrainer<T>::export_state(std::vector<T>& params,
                                         std::vector<std::vector<T>>* states) {
  std::size_t widest = 0;
  for (const RankPieces& r : pieces_)
    widest = std::max(widest, r.local_count);
  const std::size_t mine = pieces_[static_cast<std::size_t>(group_rank_)].local_count;
  std::vector<T> local(widest), gathered(widest * static_cast<std::size_t>(group_size_));
  // Every group rank's buffer to every group rank, then each piece to its place.
  auto assemble = [&](const T* source, std::vector<T>& full) {
    std::copy_n(source, mine, local.begin());
    group_.allgather(local.data(), gathered.data(), widest, this->type_);
    full.assign(this->layout_.count(), T(0));
    for (std::size_t q = 0; q < pieces_.size(); ++q) {
      for (const Piece& p : pieces_[q].pieces) {
        std::copy_n(gathered.data() + q * widest + p.local, p.count, full.data() + p.full);
      }
    }
  };
  assemble(params_.data(), params);
  if (!states) return;
  states->resize(optimizer_->arrays());
  for (std::size_t a = 0; a < optimizer_->arrays(); ++a)
    assemble(optimizer_->state(a), (*states)[a]);
}

template <class T>
void PartitionedTrainer<T>::import_state(const std::vector<T>& params,
                                         const std::vector<std::vector<T>>& states) {
  auto take = [&](const std::vector<T>& full, T* local) {
    for (const Piece& p : pieces_[static_cast<std::size_t>(group_rank_)].pieces)
      std::copy_n(full.data() + p.full, p.count, local + p.local);
  };
  take(params, params_.data());
  for (std::size_t a = 0; a < states.size(); ++a)
    take(states[a], optimizer_->state(a));
}

template <class T>
void PartitionedTrainer<T>::finish_partitioned_step(StepResult& result, Range global,
                                                    double loss_local, bool count, double bytes,
                                                    Clock::time_point start,
                                                    std::span<double> also_summed) {
  const double lr = this->schedule_.at(this->step_);
  replica_sum_seconds_ = 0;
  if (across_) {
    const auto sum_start = Clock::now();
    CommClock::Scope timed(clock_);
    across_->allreduce(in_place, grads_.data(), grads_.size(), this->type_, ReduceOp::sum);
    bytes += allreduce_bus_bytes(static_cast<double>(grads_.size() * sizeof(T)), replicas_);
    replica_sum_seconds_ = seconds_since(sum_start);
  }
  const auto update_start = Clock::now();
  optimizer_->update(params_.data(), 0, params_.size(), grads_.data(), 0, lr, this->step_ + 1);
  result.update_seconds = seconds_since(update_start);
  // The loss first, then whatever the strategy adds: one call.
  std::vector<double> sums(1 + also_summed.size());
  sums[0] = count ? loss_local : 0.0;
  std::copy(also_summed.begin(), also_summed.end(), sums.begin() + 1);
  const auto loss_start = Clock::now();
  {
    CommClock::Scope timed(clock_);
    this->comm_.allreduce(in_place, sums.data(), sums.size(), DataType::float64, ReduceOp::sum);
  }
  loss_sum_seconds_ = seconds_since(loss_start);
  std::copy(sums.begin() + 1, sums.end(), also_summed.begin());
  bytes += allreduce_bus_bytes(static_cast<double>(sums.size() * sizeof(double)), this->nranks_);
  this->finish_step(result, global, sums[0], lr, start);
  result.comm_seconds = clock_.seconds();
  result.comm_bytes = bytes;
}

template <class T>
std::string PartitionedTrainer<T>::replica_text(const std::string& unit) const {
  if (replicas_ == 1) return "";
  return "hybrid: " + std::to_string(replicas_) + " data-parallel replicas x " +
         std::to_string(group_size_) + " " + unit + " (replica k = ranks " +
         std::to_string(group_size_) + "k .. " + std::to_string(group_size_) +
         "k+" + std::to_string(group_size_ - 1) +
         "), gradients allreduced across replicas before the update; ";
}

template <class T>
MemoryUse PartitionedTrainer<T>::memory() const {
  MemoryUse m;
  m.parameters = params_.size() * sizeof(T);
  m.gradients = grads_.size() * sizeof(T);
  m.optimizer = optimizer_->arrays() * optimizer_->state_count() * sizeof(T);
  m.activations = activation_elements_ * sizeof(T);
  m.working = working_elements_ * sizeof(T);
  return m;
}

template class PartitionedTrainer<float>;
template class PartitionedTrainer<double>;

}  // namespace collx::train
