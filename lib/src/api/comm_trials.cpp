// auto's trials on a communicator (autotune.hpp has the tuner of one size class): which
// candidates a size class tries, the ranks' agreement on the trials' times, and what settles,
// including the size classes handed to the MPI library's own collective (the delegated path).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "collx/error.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "cost_model.hpp"
#include "registry.hpp"
#include "shm_arena.hpp"
#include "tuning.hpp"

namespace collx::detail {

ClassTuner* CommState::tuner_for(Collective collective, std::size_t bytes, bool order_sensitive) {
  // A barrier moves no bytes but is tried too: the MPI library's own is its second candidate.
  const bool library = transport->library_comm() != MPI_COMM_NULL;
  const AutotuneMode mode = config().autotune;
  if (mode == AutotuneMode::off || size < 2 || (bytes == 0 && collective != Collective::barrier) ||
      collective == Collective::sendrecv ||
      algorithms_of(collective).size() + (library ? 1 : 0) < 2) {
    return nullptr;
  }
  if (order_sensitive && mode != AutotuneMode::all) return segment_tuner_for(collective, bytes);
  const bool arena = arena_for(bytes);
  if (!table_decides(collective, bytes, size, arena)) return nullptr;
  if (!tuners) tuners = std::make_unique<ClassTuners>();
  ClassTuner& tuner = (*tuners)[static_cast<std::size_t>(collective)]
                               [static_cast<std::size_t>(size_class_of(bytes))];
  if (tuner.phase() == ClassTuner::Phase::fresh) {
    // Every call of a class tries the candidates of the first call's size: the class's calls
    // share one tuner, and every rank sees the same first call.
    std::vector<Algorithm> candidates = tuning_candidates(collective, bytes);
    const ClassTuner::Wait wait = weigh_by_smaller_classes(collective, bytes, candidates);
    const Algorithm mpi = library_algorithm(collective);
    const bool offered = mpi != Algorithm::automatic &&
                         std::find(candidates.begin(), candidates.end(), mpi) != candidates.end();
    // With the MPI library a candidate, the first calls (ClassTuner::start) run COLLX_AUTOTUNE_WAIT
    // x the trials' calls (weighted by what they are expected to cost, trial_cost_in_calls),
    // kLibraryWaitFactor x more running the library above kLongCallBytes.
    const int trials = trials_for(bytes);
    const bool on_library = offered && wait == ClassTuner::Wait::on_library;
    const double trial_cost = trial_cost_in_calls(collective, bytes, candidates);
    const auto wait_calls = static_cast<std::uint32_t>(
        offered ? std::ceil(config().autotune_wait * trials * trial_cost) *
                      (on_library && bytes > kLongCallBytes ? kLibraryWaitFactor : 1)
                : 0);
    const ClassTuner::Meetings meetings = ClassTuner::meetings_for(
        rooted(collective), bytes, node_layout == nullptr ? 1 : node_layout->nodes());
    tuner.start(candidates, trials, meetings, offered ? mpi : Algorithm::automatic, wait_calls,
                wait);
    // The arena's calls of one slot that run at once where their waits end in a spin
    // (run_collective, collectives.hpp).
    if (runs_at_once(collective) && arena && bytes <= transport->shared_arena()->slot_bytes()) {
      tuner.set_at_once(Algorithm::shared_memory);
    }
    if (tuner.in_trials()) ++trying_classes_;
  }
  return &tuner;
}

ClassTuner* CommState::segment_tuner_for(Collective collective, std::size_t bytes) {
  // A segment size the user gave (COLLX_SEGMENT_BYTES, a tuning file's) is kept. The default
  // segments overlap each step's reduction with the next transfer; where reductions cost little
  // beside the network, each segment's message costs more than the overlap saves
  // (docs/AUTO.md, "Segment sizes of order-sensitive calls").
  const TuningTable* tuned = active_tuning();
  if (config().segment_bytes != 0 || (tuned != nullptr && tuned->segment_bytes != 0) ||
      bytes <= 2 * kDefaultSegmentBytes) {
    return nullptr;
  }
  const bool arena = arena_for(bytes);
  if (!table_decides(collective, bytes, size, arena)) return nullptr;
  const Algorithm table =
      resolve_algorithm(collective, Algorithm::automatic, bytes, size, rank, arena, node_shape());
  const AlgorithmRow* row = find_row(schedules_of(collective), table);
  if (row == nullptr || !row->segments_keep_bits) return nullptr;
  if (!segment_tuners) segment_tuners = std::make_unique<ClassTuners>();
  const int size_class = size_class_of(bytes);
  ClassTuner& tuner =
      (*segment_tuners)[static_cast<std::size_t>(collective)][static_cast<std::size_t>(size_class)];
  if (tuner.phase() == ClassTuner::Phase::fresh) {
    const Algorithm candidates[] = {table, table};
    const std::size_t segments[] = {0, size_class_max_bytes(size_class)};
    tuner.start(candidates, trials_for(bytes),
                ClassTuner::meetings_for(rooted(collective), bytes,
                                         node_layout == nullptr ? 1 : node_layout->nodes()),
                Algorithm::automatic, 0, ClassTuner::Wait::warming_library, segments);
    if (tuner.in_trials()) ++trying_classes_;
  }
  return &tuner;
}

std::vector<Algorithm> CommState::tuning_candidates(Collective collective,
                                                    std::size_t bytes) const {
  // Keyed on what every rank sees alike: the arena (made collectively), not the call's memory.
  const bool arena = arena_for(bytes);
  const NodeShape shape = node_shape();
  const auto table = [&](std::size_t b) {
    return resolve_algorithm(collective, Algorithm::automatic, b, size, rank, arena, shape);
  };
  std::vector<Algorithm> others;
  if (bytes > 1) others.push_back(table(bytes / 2));
  if (bytes <= std::numeric_limits<std::size_t>::max() / 2) others.push_back(table(bytes * 2));
  const Collective schedules = schedules_of(collective);
  if (arena) {
    for (const AlgorithmRow& r : registry())
      if (r.collective == schedules && r.uses_arena()) others.push_back(r.algorithm);
  }
  model::Machine machine;
  machine.one_node = arena;
  machine.nodes = shape.nodes;
  const double size_in_bytes = static_cast<double>(bytes);
  others.push_back(model::best(schedules, size, size_in_bytes, machine));
  if (arena) {
    // The best point-to-point algorithm too: the arena's handshakes are what a loaded or
    // oversubscribed node makes slow, and the neighbours may all be the arena's as well.
    machine.one_node = false;
    others.push_back(model::best(schedules, size, size_in_bytes, machine));
  }
  std::vector<Algorithm> candidates = candidate_list(table(bytes), others);
  // The MPI library's own collective, always: auto runs it where it is faster than every one of
  // collx's candidates (mpi_library.cpp), so auto never loses to the MPI it wraps.
  if (transport->library_comm() != MPI_COMM_NULL &&
      library_algorithm(collective) != Algorithm::automatic) {
    candidates.push_back(library_algorithm(collective));
  }
  if (!shape.spans_nodes()) {
    // One rank per node or one node: the node-aware rows run as their flat forms.
    std::erase_if(candidates, [&](Algorithm a) {
      const AlgorithmRow* r = find_row(schedules, a);
      return a != candidates.front() && r != nullptr && r->node_aware();
    });
  }
  return candidates;
}

ClassTuner::Wait CommState::weigh_by_smaller_classes(Collective collective, std::size_t bytes,
                                                     std::vector<Algorithm>& candidates) const {
  const int size_class = size_class_of(bytes);
  const auto& classes = (*tuners)[static_cast<std::size_t>(collective)];
  // A class whose trials settled once: its choice and times are agreed, and stay its evidence
  // while it tries again (a second opinion, a checkpoint's drift). A benchmark that moves to the
  // next size while the class below takes its second opinion (IMB's Bcast of 512 KiB, then 1 MiB)
  // would otherwise take older evidence.
  const auto tried = [&](int k) -> const ClassTuner* {
    const ClassTuner& smaller = classes[static_cast<std::size_t>(k)];
    return smaller.rounds() > 0 ? &smaller : nullptr;
  };
  // Whether the nearest smaller tried class that tried `a` timed it `ratio` behind its fastest
  // or more, for its distance.
  const auto behind = [&](Algorithm a, double ratio) {
    const auto [slowness, distance] = known_slowness(collective, size_class, a);
    return slowness > 0 && slowness >= ratio * std::pow(kSlowDecay, distance - 1);
  };
  const Algorithm library = library_algorithm(collective);
  if (bytes > kLongCallBytes) {
    std::vector<Algorithm> kept = candidates;
    std::erase_if(kept, [&](Algorithm a) {
      return behind(a, a == library ? kLibrarySlowRatio : kSlowRatio);
    });
    // Never none: then all stay.
    if (!kept.empty()) candidates = std::move(kept);
  }
  // Rounds are agreed, so every rank finds the same nearest one.
  Algorithm nearest = Algorithm::automatic;
  for (int k = size_class - 1; k >= 0 && nearest == Algorithm::automatic; --k)
    if (const ClassTuner* smaller = tried(k)) nearest = smaller->choice_as_evidence();
  const auto evidence = std::find(candidates.begin(), candidates.end(), nearest);
  if (nearest != library && evidence != candidates.end())
    std::rotate(candidates.begin(), evidence, evidence + 1);
  if (nearest == Algorithm::automatic) return ClassTuner::Wait::warming_library;
  if (nearest == library) return ClassTuner::Wait::on_library;
  // The choice at the front, that is: a table's choice that the smaller class did not choose
  // may be slower than the MPI library's collective.
  return bytes > kLongCallBytes && library != Algorithm::automatic &&
                 evidence != candidates.end() && behind(library, kLibraryBehindRatio)
             ? ClassTuner::Wait::on_choice
             : ClassTuner::Wait::warming_library;
}

std::pair<double, int> CommState::known_slowness(Collective collective, int size_class,
                                                 Algorithm algorithm) const {
  const auto& classes = (*tuners)[static_cast<std::size_t>(collective)];
  for (int k = size_class - 1; k >= 0; --k) {
    // A class whose trials settled once (rounds) stays the evidence while it tries again.
    const ClassTuner& smaller = classes[static_cast<std::size_t>(k)];
    if (smaller.rounds() == 0) continue;
    const double slowness = smaller.slowness(algorithm);
    if (slowness > 0) return {slowness, size_class - k};
  }
  return {0, 0};
}

double CommState::trial_cost_in_calls(Collective collective, std::size_t bytes,
                                      std::span<const Algorithm> candidates) const {
  if (bytes <= kLongCallBytes) return static_cast<double>(candidates.size());
  const int size_class = size_class_of(bytes);
  double cost = 0;
  for (const Algorithm a : candidates)
    cost += std::clamp(known_slowness(collective, size_class, a).first, 1.0, kMaxTrialCost);
  return cost;
}

Algorithm CommState::library_for_untried(Collective collective, std::size_t bytes,
                                         bool shared_memory, Algorithm table_choice) const {
  if (bytes > kUntriedLibraryBytes || config().autotune == AutotuneMode::off ||
      transport->library_comm() == MPI_COMM_NULL || node_shape().nodes > 1 ||
      !table_decides(collective, bytes, size, shared_memory)) {
    return Algorithm::automatic;
  }
  const AlgorithmRow* chosen = find_row(collective, table_choice);
  if (chosen == nullptr || chosen->uses_arena() || chosen->mpi_library) return Algorithm::automatic;
  return library_algorithm(collective);
}

void CommState::note_untimed_library(Collective collective, const ChoiceKey& key,
                                     Algorithm algorithm) {
  const AlgorithmRow* row = find_row(collective, algorithm);
  if (row == nullptr || !row->mpi_library || needs_collx_path(*key.config)) return;
  untimed_library_[static_cast<std::size_t>(collective)] = key;
  delegating_ = true;
}

void CommState::mark_delegated(SizeClassFlags& classes, Collective collective, std::size_t bytes,
                               bool to_mpi) {
  const Config& c = config();
  if (needs_collx_path(c)) return;
  bool& flag =
      classes[static_cast<std::size_t>(collective)][static_cast<std::size_t>(size_class_of(bytes))];
  // A remembered call may be of this class.
  if (flag && !to_mpi) {
    for (RememberedCallSlot& slot : remembered_calls)
      slot.held = false;
  }
  flag = to_mpi;
  if (to_mpi) {
    delegating_ = true;
    delegating_config_ = &c;
  }
}

std::vector<std::uint64_t> CommState::agree(std::span<const std::uint64_t> values,
                                            ReduceOp combine) {
  std::vector<std::uint64_t> agreed(values.size());
  const OpInfo info = next_op(Collective::allreduce, Algorithm::recursive_doubling, Options{});
  Operation op(*transport, info, {}, nullptr);
  const AllreduceArgs args{reinterpret_cast<const std::byte*>(values.data()),
                           reinterpret_cast<std::byte*>(agreed.data()),
                           values.size(),
                           Reduction::make(DataType::uint64, combine, size),
                           {}};
  run_blocking(op, allreduce_task(op, args, Algorithm::recursive_doubling));
  return agreed;
}

void CommState::meet() {
  const std::uint64_t nothing[1] = {0};
  (void)agree(nothing, ReduceOp::max);
}

void CommState::after_timed_call(Collective collective, std::size_t bytes, ClassTuner& tuner,
                                 double seconds) {
  if (tuner.record(seconds) != TunerStep::agree) return;
  const std::vector<std::uint64_t> values = tuner.agree_values();
  const int before = tuner.rounds();
  const bool was_trying = tuner.in_trials();
  // A round of trials agrees on each candidate's slowest rank and on its ranks' mean
  // (ClassTuner::agreed); a checkpoint on the maxima only.
  const std::vector<std::uint64_t> maxima = agree(values, ReduceOp::max);
  std::vector<std::uint64_t> means;
  if (was_trying) {
    means = agree(values, ReduceOp::sum);
    for (std::uint64_t& m : means)
      m /= static_cast<std::uint64_t>(size);
  }
  if (!tuner.agreed(maxima, means)) return;
  trying_classes_ += static_cast<int>(tuner.in_trials()) - static_cast<int>(was_trying);
  note_settled(collective, bytes, tuner);
  if (rank != 0 || config().debug < DebugLevel::trials) return;
  // A checkpoint where some rank's calls of collx's choice ran slower than the MPI library's
  // collective in the trials (ClassTuner::agreed: the two again, then the MPI library).
  const bool slower_than_library = !was_trying && maxima.size() > 1 && maxima[1] > 0;
  if (tuner.rounds() > before && !slower_than_library) {
    std::fprintf(stderr, "collx INFO rank 0: autotune %s\n",
                 describe_trials(collective, size_class_of(bytes), tuner).c_str());
    return;
  }
  char drift[80];
  std::snprintf(drift, sizeof drift,
                "the chosen algorithm drifted past %.1fx its trial time; trying again",
                ClassTuner::kDriftRatio);
  const char* why =
      slower_than_library && tuner.chose_library()
          ? "calls of collx's choice ran slower than the MPI library's collective in the "
            "trials; settled on mpi"
      : slower_than_library
          ? "calls of collx's choice ran slower than the MPI library's collective in the "
            "trials; trying the two again head to head"
      : !values.empty() && values[0] == ClassTuner::kSecondOpinion
          ? "a challenger displaced the table's choice; trying again for a second opinion"
          : drift;
  std::fprintf(stderr, "collx INFO rank 0: autotune %s class of %zu B: %s\n",
               std::string(to_string(collective)).c_str(), bytes, why);
}

void CommState::note_settled(Collective collective, std::size_t bytes, const ClassTuner& tuner) {
  // A tuner without the MPI library (segment_tuner_for's) leaves the class's delegation alone.
  if (!tuner.offers_library()) return;
  mark_delegated(delegated_, collective, bytes,
                 tuner.phase() == ClassTuner::Phase::settled && tuner.chose_library());
}

std::vector<CommState::LearnedClass> CommState::learned(bool segment_classes, bool waiting) const {
  std::vector<LearnedClass> out;
  const std::unique_ptr<ClassTuners>& all = segment_classes ? segment_tuners : tuners;
  if (!all) return out;
  for (int c = 0; c < kCollectiveCount; ++c) {
    for (int k = 0; k < kSizeClasses; ++k) {
      const ClassTuner& tuner = (*all)[static_cast<std::size_t>(c)][static_cast<std::size_t>(k)];
      if (tuner.phase() != ClassTuner::Phase::fresh &&
          (waiting || tuner.phase() != ClassTuner::Phase::waiting)) {
        out.push_back({static_cast<Collective>(c), k, &tuner});
      }
    }
  }
  return out;
}

}  // namespace collx::detail
