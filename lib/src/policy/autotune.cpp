#include "autotune.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <tuple>

namespace collx::detail {

namespace {
// Whether time `a` is shorter than `b` by more than the margin's share (ClassTuner::kMargin).
bool beats(std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(a) < static_cast<double>(b) * (1 - ClassTuner::kMargin);
}
}  // namespace

int trials_for(std::size_t bytes) {
  if (bytes <= (std::size_t{4} << 10)) return 32;
  // Up to 2 MiB blocks of 8: a call there fills at most a few of the arena's ring slots, and a
  // shorter block times the ring's free slots (its producers never wait for room) and leaves its
  // laggards to the next candidate's block where ranks share cores (docs/AUTO.md).
  if (bytes <= (std::size_t{2} << 20)) return 16;
  if (bytes <= (std::size_t{16} << 20)) return 5;
  return 3;
}

std::vector<Algorithm> candidate_list(Algorithm table, std::span<const Algorithm> others) {
  std::vector<Algorithm> out{table};
  for (Algorithm a : others) {
    if (out.size() >= static_cast<std::size_t>(ClassTuner::kMaxOwnCandidates)) break;
    if (a == Algorithm::automatic) continue;
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

void ClassTuner::start(std::span<const Algorithm> candidates, int trials, Meetings meetings,
                       Algorithm library, std::uint32_t wait_calls, Wait wait,
                       std::span<const std::size_t> segments) {
  *this = ClassTuner{};
  meetings_ = meetings;
  library_ = library;
  wait_calls_ = wait_calls;
  choice_first_ = wait_calls > 0;
  wait_ = library == Algorithm::automatic ? Wait::warming_library : wait;
  count_ = static_cast<std::uint8_t>(
      std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(kMaxCandidates)));
  std::copy_n(candidates.begin(), count_, candidates_.begin());
  std::copy_n(segments.begin(), std::min<std::size_t>(segments.size(), count_), segments_.begin());
  segment_sizes_ = !segments.empty();
  all_count_ = count_;
  all_candidates_ = candidates_;
  trials = std::clamp(trials, 1, kMaxTrials + 1);
  passes_ = trials >= kTwoPassTrials ? 2 : 1;
  block_ = static_cast<std::uint8_t>((trials + passes_ - 1) / passes_);
  chosen_ = count_ > 0 ? candidates_[0] : Algorithm::automatic;
  chosen_segment_ = segments_[0];
  if (count_ <= 1) {
    phase_ = Phase::settled;  // never timed (pick, record)
    return;
  }
  if (wait_calls_ > 0) {
    phase_ = Phase::waiting;
    return;
  }
  restart();
}

void ClassTuner::restart() {
  phase_ = Phase::trying;
  calls_ = 0;
  pass_ns_ = {};
  pass_calls_ = {};
  checking_ = false;
}

TrialPick ClassTuner::pick() {
  if (phase_ == Phase::waiting) {
    // Where calls are short (blocks of kWarmLibraryBlock calls and more), the wait's second
    // half runs the MPI library's collective, untimed: its first calls of a size can take
    // several times its later ones (MPICH's), for more calls than its trial blocks hold.
    const bool warm_library = wait_ == Wait::on_library ||
                              (wait_ == Wait::warming_library && library_ != Algorithm::automatic &&
                               block_ >= kWarmLibraryBlock && calls_ >= wait_calls_ / 2);
    // The same call on every rank ends the wait: the ranks make the same calls.
    if (++calls_ >= wait_calls_) restart();
    return warm_library ? TrialPick{library_}
                        : TrialPick{candidates_[0], false, false, segments_[0]};
  }
  if (phase_ == Phase::trying) {
    // calls_ counts the calls recorded so far: this call's place in its block.
    const bool first_timed = block_ == 1 || calls_ % block_ == 1;
    return {candidates_[trying_index()], true,
            meetings_ == Meetings::before_calls ||
                (meetings_ == Meetings::before_blocks && first_timed),
            segments_[trying_index()]};
  }
  if (count_ <= 1) return {chosen_, false, false, chosen_segment_};
  ++calls_;
  return {chosen_, calls_ % kSampleEvery == 0 || calls_ == next_check_, false, chosen_segment_};
}

TunerStep ClassTuner::record(double seconds) {
  const auto ns = static_cast<std::uint64_t>(std::max(0.0, seconds) * 1e9);
  if (phase_ == Phase::trying) {
    // A block of consecutive calls per candidate; its first call (setup, the switch from the
    // previous candidate) does not count where the block has more.
    const std::uint32_t index = trying_index();
    if (block_ == 1 || calls_ % block_ != 0) {
      const std::size_t pass = calls_ / (static_cast<std::uint32_t>(count_) * block_);
      pass_ns_[index][pass] += ns;
      ++pass_calls_[index][pass];
    }
    ++calls_;
    if (calls_ < static_cast<std::uint32_t>(count_) * block_ * passes_) {
      return TunerStep::none;
    }
    checking_ = false;
    return TunerStep::agree;
  }
  if (phase_ != Phase::settled || count_ <= 1) return TunerStep::none;
  samples_ns_[sample_next_] = ns;
  sample_next_ = static_cast<std::uint8_t>((sample_next_ + 1) % kSamples);
  sample_count_ = static_cast<std::uint8_t>(std::min<int>(sample_count_ + 1, kSamples));
  if (calls_ != next_check_) return TunerStep::none;
  checking_ = true;
  return TunerStep::agree;
}

std::uint64_t ClassTuner::trial_ns(std::size_t candidate) const {
  std::uint64_t lowest = 0;
  for (std::size_t pass = 0; pass < passes_; ++pass) {
    const std::uint32_t calls = pass_calls_[candidate][pass];
    if (calls == 0) continue;
    const std::uint64_t mean = (pass_ns_[candidate][pass] + calls / 2) / calls;
    if (lowest == 0 || mean < lowest) lowest = mean;
  }
  return lowest;
}

std::vector<std::uint64_t> ClassTuner::agree_values() const {
  if (!checking_) {
    std::vector<std::uint64_t> times(count_);
    for (std::size_t i = 0; i < count_; ++i)
      times[i] = trial_ns(i);
    return times;
  }
  if (second_opinion_) return {kSecondOpinion, 0};
  if (sample_count_ < kSamples / 2 || baseline_ns_ == 0) return {0, 0};
  // The samples' median, and their mean.
  std::vector<std::uint64_t> sorted(samples_ns_.begin(), samples_ns_.begin() + sample_count_);
  std::sort(sorted.begin(), sorted.end());
  const std::uint64_t sampled = sorted[sorted.size() / 2];
  const std::uint64_t mean =
      (std::accumulate(sorted.begin(), sorted.end(), std::uint64_t{0}) + sorted.size() / 2) /
      sorted.size();
  // Slower now than the MPI library's own collective was in the trials (the slowest rank's
  // time): tried again whatever the call's size, since the floor auto promises is the MPI it
  // wraps. Sub-microsecond drift is otherwise noise (kDriftMinNs), but a call that settled in a
  // machine's fast state and runs in its slow one can lose to the MPI on every call.
  const std::uint64_t library = library_trial_ns();
  if (library > 0 && static_cast<double>(mean) > static_cast<double>(library) * (1 + kMargin))
    return {0, 1};
  if (sampled < baseline_ns_ + kDriftMinNs) return {0, 0};
  const double ratio = static_cast<double>(sampled) / static_cast<double>(baseline_ns_);
  return {static_cast<std::uint64_t>(std::lround(ratio * 1000)), 0};
}

std::uint64_t ClassTuner::library_trial_ns() const {
  if (library_ == Algorithm::automatic || chose_library()) return 0;
  const std::size_t i = index_in(candidates_, count_, library_);
  return i < count_ ? agreed_ns_[i] : 0;
}

bool ClassTuner::agreed(std::span<const std::uint64_t> maxima,
                        std::span<const std::uint64_t> means) {
  if (checking_) {
    checking_ = false;
    second_opinion_taken_ = second_opinion_taken_ || second_opinion_;
    second_opinion_ = false;
    if (maxima.size() > 1 && maxima[1] > 0) {
      // A rank's calls of collx's choice ran slower than the MPI library's collective did in the
      // trials. The first time, the two are tried again head to head on the calls of now: the
      // trials had timed them back to back, and a program's calls (each after a barrier, as
      // IMB's) can take longer for both; the second time the class settles on the MPI library,
      // whose calls then skip collx (the delegated path).
      if (!library_retried_) {
        library_retried_ = true;
        confirm(index_in(candidates_, count_, chosen_), false);
        return true;
      }
      baseline_ns_ = library_trial_ns();
      chosen_ = library_;
      chosen_segment_ = 0;
      switched_to_library_ = true;
      return true;
    }
    if (!maxima.empty() && static_cast<double>(maxima[0]) > kDriftRatio * 1000) {
      // Tried again among every candidate of the first round, not a confirmation's two.
      count_ = all_count_;
      candidates_ = all_candidates_;
      head_to_head_ = false;
      restart();
      return true;
    }
    next_check_ += std::min(next_check_, kMaxCheckGap);
    return false;
  }
  // The table's choice unless a challenger is faster by the margin.
  std::size_t fastest = 1;
  for (std::size_t i = 2; i < count_ && i < maxima.size(); ++i) {
    if (maxima[i] < maxima[fastest]) fastest = i;
  }
  // The MPI library's own collective needs no absolute margin (kMargin).
  // Segment sizes of one algorithm (start's `segments`) need no margin: they give the same bits,
  // and between two times that close either costs at most the difference.
  const bool challenger_wins = fastest < maxima.size() &&
                               (segment_sizes_ ? maxima[fastest] < maxima[0]
                                               : beats(maxima[fastest], maxima[0]) &&
                                                     (maxima[fastest] + kMarginMinNs <= maxima[0] ||
                                                      candidates_[fastest] == library_));
  std::size_t winner = challenger_wins ? fastest : 0;
  // One of collx's must beat the MPI library's collective by the margin: between two trial times
  // that close, the MPI library is the safe choice (auto promises its speed, not more). A
  // challenger by the same margins as the table's choice; the table's choice by the share and
  // kLibraryMarginMinNs, or library_margin_ns where it runs at once (a table made on other
  // machines is no evidence on this one).
  if (candidates_[winner] != library_) {
    for (std::size_t i = 1; i < count_ && i < maxima.size(); ++i) {
      if (candidates_[i] != library_) continue;
      if (!beats(maxima[winner], maxima[i]) ||
          maxima[winner] + (candidates_[winner] == at_once_ ? library_margin_ns(maxima[i])
                                                            : kLibraryMarginMinNs) >
              maxima[i] ||
          (challenger_wins && maxima[winner] + kMarginMinNs > maxima[i])) {
        winner = i;
      }
    }
  }
  // The MPI library's collective where its calls cost a rank less on average by the margin,
  // though collx's choice has the shorter slowest rank: a rooted collective's ranks off the
  // critical path (a reduce's senders, a broadcast's root) return from the MPI library's call
  // (an eager send) several times sooner than from collx's (docs/AUTO.md), and a program that
  // computes between its calls, or a benchmark that times each call from a barrier (IMB), gets
  // that time back; the critical path is then about the same.
  agreed_mean_ns_.fill(0);
  if (means.size() >= count_) {
    std::copy_n(means.begin(), count_, agreed_mean_ns_.begin());
    for (std::size_t i = 0; i < count_ && candidates_[winner] != library_; ++i) {
      if (candidates_[i] == library_ && beats(means[i], means[winner])) winner = i;
    }
  }
  std::copy_n(maxima.begin(), std::min<std::size_t>(maxima.size(), count_), agreed_ns_.begin());
  // slowness() of the round's candidates.
  std::uint64_t best = 0;
  for (std::size_t i = 0; i < count_; ++i)
    if (agreed_ns_[i] > 0 && (best == 0 || agreed_ns_[i] < best)) best = agreed_ns_[i];
  for (std::size_t i = 0; i < count_; ++i) {
    const std::size_t j = index_in(all_candidates_, all_count_, candidates_[i]);
    if (j < all_count_ && agreed_ns_[i] > 0) {
      slowness_[j] =
          std::max(slowness_[j], static_cast<double>(agreed_ns_[i]) / static_cast<double>(best));
    }
  }
  chosen_ = candidates_[winner];
  chosen_segment_ = segments_[winner];
  // Where one of collx's candidates won a round among three or more over the MPI library's
  // collective, the two run a second round head to head on fresh calls (`confirm`) before the
  // class settles on either: the winner's curse (docs/AUTO.md).
  if (!head_to_head_ && count_ > 2 && candidates_[winner] != library_ &&
      library_ != Algorithm::automatic && index_in(candidates_, count_, library_) < count_) {
    confirm(winner, challenger_wins);
    return true;
  }
  second_opinion_ = !second_opinion_taken_ && (head_to_head_ ? table_displaced_ && !chose_library()
                                                             : challenger_wins && rounds_ == 0);
  baseline_ns_ = trial_ns(winner);
  phase_ = Phase::settled;
  calls_ = 0;
  next_check_ = kFirstCheck;
  sample_count_ = 0;
  sample_next_ = 0;
  ++rounds_;
  return true;
}

double ClassTuner::slowness(Algorithm algorithm) const {
  const std::size_t j = index_in(all_candidates_, all_count_, algorithm);
  return j < all_count_ ? slowness_[j] : 0;
}

Algorithm ClassTuner::choice_as_evidence() const {
  if (!chose_library() || switched_to_library_) return chosen_;
  const std::size_t index = index_in(candidates_, count_, library_);
  if (index >= count_) return chosen_;
  const auto within_margin = [](std::uint64_t collx, std::uint64_t library) {
    return collx == 0 || library == 0 ||
           static_cast<double>(collx) < static_cast<double>(library) * (1 + kMargin);
  };
  Algorithm tied = chosen_;
  std::uint64_t fastest = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    if (candidates_[i] == library_ || agreed_ns_[i] == 0 ||
        !within_margin(agreed_ns_[i], agreed_ns_[index]) ||
        !within_margin(agreed_mean_ns_[i], agreed_mean_ns_[index]) ||
        (fastest != 0 && agreed_ns_[i] >= fastest)) {
      continue;
    }
    tied = candidates_[i];
    fastest = agreed_ns_[i];
  }
  return tied;
}

void ClassTuner::confirm(std::size_t winner, bool table_displaced) {
  // The winner in its place (the table's choice first, a challenger second, after the MPI
  // library's collective), so that the second round applies the first round's rules.
  const std::size_t library = index_in(candidates_, count_, library_);
  const std::size_t first = winner == 0 ? 0 : library;
  const std::size_t second = winner == 0 ? library : winner;
  // The agreed times follow their candidates (the reports of the first round).
  const auto to_front = [&](auto& v) { std::tie(v[0], v[1]) = std::tuple(v[first], v[second]); };
  to_front(agreed_ns_);
  to_front(agreed_mean_ns_);
  to_front(candidates_);
  to_front(segments_);
  count_ = 2;
  table_displaced_ = table_displaced;
  head_to_head_ = true;
  ++rounds_;
  restart();
}

namespace {

// "allreduce 1025..2048 B:", the start of a class's line.
std::string class_heading(Collective collective, int size_class) {
  const std::size_t high = size_class_max_bytes(size_class);
  const std::size_t low = size_class == 0 ? 0 : size_class_max_bytes(size_class - 1) + 1;
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.
  std::string out(to_string(collective));
  out.append(" ").append(std::to_string(low)).append("..").append(std::to_string(high));
  out.append(" B:");
  return out;
}

}  // namespace

std::string describe_unsettled(Collective collective, int size_class, const ClassTuner& tuner) {
  std::string out = class_heading(collective, size_class);
  const auto candidates = tuner.candidates();
  const std::string first(candidates.empty() ? "-" : to_string(candidates.front()));
  if (tuner.phase() == ClassTuner::Phase::waiting) {
    out.append(" waiting, ").append(std::to_string(tuner.phase_calls())).append(" of ");
    out.append(std::to_string(tuner.wait_calls())).append(" calls made (the wait runs ");
    switch (tuner.wait()) {
      case ClassTuner::Wait::on_library:
        out.append("the MPI library's collective");
        break;
      case ClassTuner::Wait::on_choice:
        out.append(first).append(" throughout");
        break;
      case ClassTuner::Wait::warming_library:
        out.append(first).append(tuner.offers_library()
                                     ? ", the MPI library's collective in its second half where "
                                       "calls are short"
                                     : "");
        break;
    }
    out.append(")");
  } else {
    out.append(" trying, ").append(std::to_string(tuner.phase_calls())).append(" calls timed");
  }
  out.append("; candidates");
  for (const Algorithm a : candidates)
    out.append(" ").append(to_string(a));
  return out;
}

std::string describe_trials(Collective collective, int size_class, const ClassTuner& tuner) {
  std::string out = class_heading(collective, size_class);
  const auto candidates = tuner.candidates();
  const auto segments = tuner.segments();
  const auto times = tuner.agreed_ns();
  const auto means = tuner.agreed_mean_ns();
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    char figure[32];
    std::snprintf(figure, sizeof figure, "%.2f us", static_cast<double>(times[i]) / 1e3);
    out.append(" ").append(to_string(candidates[i])).append(" ");
    if (segments[i] != 0)
      out.append("(segments of ").append(std::to_string(segments[i])).append(" B) ");
    out.append(times[i] == 0 ? "-" : figure);
    if (means[i] > 0) {
      std::snprintf(figure, sizeof figure, " (mean %.2f)", static_cast<double>(means[i]) / 1e3);
      out.append(figure);
    }
    // The first candidate: the table's choice, or the nearest tried class's (kept on a tie).
    if (i == 0 && !tuner.head_to_head()) out.append(" (first)");
    if (i + 1 < candidates.size()) out.append(",");
  }
  out.append(" -> ").append(to_string(tuner.chosen()));
  if (tuner.chosen_segment() != 0) {
    out.append(" (segments of ").append(std::to_string(tuner.chosen_segment())).append(" B)");
  }
  out.append(" (round ").append(std::to_string(tuner.rounds())).append(")");
  return out;
}

}  // namespace collx::detail
