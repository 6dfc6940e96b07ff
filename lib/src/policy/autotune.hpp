// auto's trials on the machine it runs on (COLLX_AUTOTUNE, on by default): the first blocking calls
// of each size class of a collective on a communicator try the two to four candidates that the
// table ranks closest and the MPI library's collective, each in blocks of consecutive calls; the
// ranks agree on the fastest, and every later call of the class runs it. A sample of the later
// calls is timed, and at checkpoints the ranks agree whether to try again or settle on the MPI
// library. docs/AUTO.md, "How auto decides", gives the rules and the measurements behind them.
//
// Every step is keyed on what every rank sees alike (the collective, the size class, the call's
// place among the blocking calls of its class, the candidates), so every rank runs the same
// algorithm in the same call and agrees at the same call. Nonblocking calls are not timed (their
// time includes the caller's work): they run the settled choice, or the table's before one is
// settled. The logic here is pure (times come in, decisions go out); comm_state.hpp does the
// timing and the agreement.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx::detail {

// The size class of a call: 0 for 0 and 1 byte, else k for 2^(k-1) < bytes <= 2^k.
// Inline: every blocking call of a delegating communicator asks it (CommState::delegates).
[[gnu::always_inline]] inline int size_class_of(std::size_t bytes) {
  return bytes <= 1 ? 0 : 64 - __builtin_clzll(bytes - 1);
}
// The largest size of class k (the edge a learned rule is written with).
inline std::size_t size_class_max_bytes(int size_class) {
  return size_class >= 64 ? ~std::size_t{0} : std::size_t{1} << size_class;
}
inline constexpr int kSizeClasses = 65;

// What the tuner does with one blocking call.
struct TrialPick {
  Algorithm algorithm = Algorithm::automatic;
  bool timed = false;  // time the call and hand the time to record()
  bool meet = false;   // the ranks meet (a barrier) before the call (ClassTuner::Meetings)
  std::size_t segment_bytes = 0;  // the candidate's segment size; 0: the call's default
};

// What record() asks of the caller: nothing, or an agreement among the ranks over the values
// of agree_values() (a maximum over ranks), handed back to agreed().
enum class TunerStep { none, agree };

// One collective's size class on one communicator.
class ClassTuner {
 public:
  // collx's own candidates (candidate_list), and the MPI library's own collective beside them.
  static constexpr int kMaxOwnCandidates = 4;
  static constexpr int kMaxCandidates = kMaxOwnCandidates + 1;
  // waiting: the class's first calls, before its trials (start's `wait_calls`).
  enum class Phase : std::uint8_t { fresh, waiting, trying, settled };
  // When the ranks meet (a barrier, untimed) during trials: never (one node); before each
  // block's first timed call (across nodes: the block's calls start together); before every
  // timed call (across nodes, a small rooted call: back to back, its root starts the next call
  // while the far ranks still receive the last, so a block would time the root's sends per call,
  // not the time a call takes from a common start, which is what a program's call waits).
  enum class Meetings : std::uint8_t { never, before_blocks, before_calls };
  // What the wait before a class's trials runs (start's `wait_calls`), from the caller's evidence
  // of the smaller size classes (CommState::weigh_by_smaller_classes): the table's choice, and
  // where calls are short (kWarmLibraryBlock) the MPI library's collective in the wait's second
  // half, so that its trials do not time its first calls of the size (warming_library); the MPI
  // library's throughout (on_library: a smaller class settled on it, choice_as_evidence); the
  // table's choice throughout (on_choice: a smaller class timed the MPI library's collective so
  // far behind collx's choice that warming it up could not change this class's choice).
  enum class Wait : std::uint8_t { warming_library, on_library, on_choice };
  // The meetings of a class of `bytes` on `nodes` nodes: a rooted call up to kMeetEveryCallBytes
  // meets before every call (there its time is its depth in latencies and back-to-back calls
  // overlap almost whole); above it the candidates' times from a common start come out alike
  // (the root's first messages dominate) and what tells them apart is how far consecutive calls
  // overlap, which blocks time (docs/SCALE.md, "Trials from a common start").
  static constexpr std::size_t kMeetEveryCallBytes = std::size_t{16} << 10;
  static constexpr Meetings meetings_for(bool rooted, std::size_t bytes, int nodes) {
    if (nodes < 2) return Meetings::never;
    return rooted && bytes <= kMeetEveryCallBytes ? Meetings::before_calls
                                                  : Meetings::before_blocks;
  }

  // Starts trials among `candidates` (the first is the table's choice, kept on a tie within
  // the margin), each tried `trials` times; `meetings`: when the ranks meet (Meetings). One
  // candidate: settled at once, never timed. `library`: the candidate that is the MPI library's own
  // collective (the registry's row says which), automatic where none is. `wait_calls`: the class's
  // first calls, before the trials, run untimed as `wait` says. docs/AUTO.md, "The trials wait",
  // says why. `segments`: each candidate's segment size where they differ (one algorithm with
  // two segment sizes: CommState::segment_tuner_for); empty: the calls' default for all.
  void start(std::span<const Algorithm> candidates, int trials, Meetings meetings = Meetings::never,
             Algorithm library = Algorithm::automatic, std::uint32_t wait_calls = 0,
             Wait wait = Wait::warming_library, std::span<const std::size_t> segments = {});
  Phase phase() const { return phase_; }
  bool in_trials() const { return phase_ == Phase::waiting || phase_ == Phase::trying; }

  // The algorithm of the next blocking call of this class (counts the call).
  TrialPick pick();
  // The time of a timed call (seconds, this rank's).
  TunerStep record(double seconds);
  // The values the ranks take the maximum of: while trying, each candidate's trial_ns(); at a
  // checkpoint, two: 1000 x this rank's sampled time (median) over its trial time (0 with too
  // few samples or within kDriftMinNs of it), or kSecondOpinion (the same on every rank: it
  // follows from the agreed times); and 1 where this rank's sampled calls ran, on average, more
  // than the margin slower than the MPI library's collective in the trials, else 0.
  std::vector<std::uint64_t> agree_values() const;
  // The maxima over ranks of agree_values(), and after a round of trials their means over ranks
  // (empty: not known). Returns true where trials settled or restarted.
  bool agreed(std::span<const std::uint64_t> maxima, std::span<const std::uint64_t> means = {});

  // For reports: the candidates, their agreed times (ns, last round), the choice, the rounds.
  std::span<const Algorithm> candidates() const { return {candidates_.data(), count_}; }
  std::span<const std::size_t> segments() const { return {segments_.data(), count_}; }
  std::span<const std::uint64_t> agreed_ns() const { return {agreed_ns_.data(), count_}; }
  // Their means over ranks (0 where not known).
  std::span<const std::uint64_t> agreed_mean_ns() const { return {agreed_mean_ns_.data(), count_}; }
  // The choice: what a nonblocking call runs (the settled choice, else the table's).
  Algorithm chosen() const { return chosen_; }
  std::size_t chosen_segment() const { return chosen_segment_; }
  bool offers_library() const { return library_ != Algorithm::automatic; }
  // How many times its round's fastest candidate's agreed time `algorithm` took, the most over
  // the rounds that timed it (a busy machine shows candidates closer than they are); 0 where no
  // round timed it. What a larger class knows of its candidates from this one
  // (CommState::weigh_by_smaller_classes).
  double slowness(Algorithm algorithm) const;
  // What a larger class takes from this one as its nearest tried class's choice
  // (CommState::weigh_by_smaller_classes): the choice, except where the trials chose the MPI
  // library's collective on the tie rule: then the fastest of collx's candidates within the
  // margin of it, in the slowest rank's time and the ranks' mean (a tie is no evidence).
  Algorithm choice_as_evidence() const;
  // Whether the choice is the MPI library's own collective.
  bool chose_library() const { return library_ != Algorithm::automatic && chosen_ == library_; }
  int rounds() const { return rounds_; }
  // The calls of the current phase so far (waiting: made; trying: recorded), and start()'s wait.
  std::uint32_t phase_calls() const { return calls_; }
  std::uint32_t wait_calls() const { return wait_calls_; }
  Wait wait() const { return wait_; }
  // Whether candidates() are a confirmation's two (a collx winner and the MPI library's
  // collective, confirm()) rather than the first round's.
  bool head_to_head() const { return head_to_head_; }
  // Whether a checkpoint settled the class on the MPI library (agree_values): the second that
  // found collx's choice slower than the library's trial time (the first tries the two again).
  bool switched_to_library() const { return switched_to_library_; }

  // A challenger must beat the table's choice by this share to replace it (noise), and by at
  // least kMarginMinNs a call: below a microsecond calls jitter from block to block more than
  // the candidates differ, and the table's choice comes from medians of many runs.
  // The MPI library's own collective (start's `library`) needs the share only: chosen where it only
  // seemed faster, auto still runs as fast as the MPI it wraps.
  static constexpr double kMargin = 0.03;
  static constexpr std::uint64_t kMarginMinNs = 250;
  // One of collx's must also beat the MPI library's collective by this much a call: the trials
  // time collx's candidate from its schedule's start and the MPI library's as its delegated call,
  // while the calls around them run the trials' longer path, which the other rank waits out
  // inside the MPI library's call; below a microsecond that moves the two by tens of
  // nanoseconds each way (docs/AUTO.md, "The margin over the MPI library").
  static constexpr std::uint64_t kLibraryMarginMinNs = 100;
  // ... or, for a candidate whose calls run at once (at_once; no operation, as short a path as
  // the MPI library's delegated call, so without the trials' swing), where the MPI library's
  // call takes less than kLibraryMarginMinNs / kLibraryMarginShare, this share of its time: the
  // arena's broadcast and reduce of one slot run so a third or more faster than the MPI
  // library's calls of a few hundred nanoseconds, a lead that 100 ns would never let count
  // (docs/AUTO.md, "The margin over the MPI library").
  static constexpr double kLibraryMarginShare = 0.25;
  // Candidate `algorithm`'s calls of this class run at once (collectives.hpp, *_at_once).
  void set_at_once(Algorithm algorithm) { at_once_ = algorithm; }
  // The margin by which a candidate that runs at once must beat the MPI library's collective of
  // `library_ns` (others: kLibraryMarginMinNs).
  static std::uint64_t library_margin_ns(std::uint64_t library_ns) {
    return std::min(
        kLibraryMarginMinNs,
        static_cast<std::uint64_t>(kLibraryMarginShare * static_cast<double>(library_ns)));
  }
  // A settled class is re-tried when a rank's sampled time exceeds its trial time this much,
  // and by at least kDriftMinNs (the same jitter would re-try sub-microsecond calls for ever).
  static constexpr double kDriftRatio = 1.5;
  // What agree_values() reports at the first checkpoint after a challenger won the first round:
  // above any drift, so the class is tried again.
  static constexpr std::uint64_t kSecondOpinion = std::uint64_t{1} << 40;
  static constexpr std::uint64_t kDriftMinNs = 1000;
  // Every kSampleEvery-th settled call is timed (17: a program that moves its root every call
  // through p ranks, as IMB's Bcast, would have every 16th call at one root for p = 2, 4, 8, 16,
  // and a rank's samples would all be its root's or its receiver's time, where the trials
  // averaged both); a checkpoint after kFirstCheck settled calls,
  // then at twice the count, ... at most kMaxCheckGap apart.
  static constexpr std::uint32_t kSampleEvery = 17;
  static constexpr std::uint32_t kFirstCheck = 64;
  static constexpr std::uint32_t kMaxCheckGap = 1u << 16;
  static constexpr int kSamples = 8;
  // The most calls a candidate is tried (over its passes).
  static constexpr int kMaxTrials = 128;
  // Candidates with at least this many trials are tried in two passes of half as many (rounded
  // up) calls each.
  static constexpr int kTwoPassTrials = 4;
  // Classes whose blocks have at least this many calls (trials_for: 2 MiB and below) warm the
  // MPI library's collective up in the second half of their wait (pick()).
  static constexpr int kWarmLibraryBlock = 8;

 private:
  void restart();
  void confirm(std::size_t winner, bool table_displaced);
  // The MPI library's candidate's agreed trial time (ns), where it was a candidate and is not
  // the choice; else 0.
  std::uint64_t library_trial_ns() const;
  // The lower of the candidate's passes' mean call times (a mean: see the top of this file).
  std::uint64_t trial_ns(std::size_t candidate) const;
  // The candidate of the current trial call. Without a wait the challengers' blocks go first,
  // the table's choice last: the first calls of a class also pay for the first touch of the
  // application's new buffers (page faults, lines in other caches), and that handicap falls on
  // the challengers. After a wait (the buffers touched) the table's choice goes first: a program
  // that stops calling the class a few calls into its trials (IMB's 4 MiB) has run the choice
  // the evidence favoured, not a challenger shown slower a few classes down.
  std::uint32_t trying_index() const {
    return (calls_ / block_ + (choice_first_ ? 0u : 1u)) % count_;
  }
  // The place of `a` among the first `n` of `list` (candidates_ or all_candidates_); n if absent.
  static std::size_t index_in(const std::array<Algorithm, kMaxCandidates>& list, std::size_t n,
                              Algorithm a) {
    return static_cast<std::size_t>(std::find(list.begin(), list.begin() + n, a) - list.begin());
  }

  Phase phase_ = Phase::fresh;
  std::uint8_t count_ = 0;
  std::uint8_t block_ = 1;     // calls per block
  bool choice_first_ = false;  // the table's choice's block first (trying_index: after a wait)
  std::uint8_t passes_ = 1;    // blocks per candidate
  std::uint8_t rounds_ = 0;
  bool checking_ = false;                // the pending agreement is a drift checkpoint
  Meetings meetings_ = Meetings::never;  // start()
  bool second_opinion_ = false;  // a first-round challenger won: try again at the first check
  // The second opinion was taken: a class asks for one once (a confirmation that the challenger
  // displaced the table's choice again would otherwise ask again at every first checkpoint).
  bool second_opinion_taken_ = false;
  bool switched_to_library_ = false;
  // A checkpoint found collx's choice slower than the MPI library's collective once, and the two
  // were tried again head to head (agreed): the next such checkpoint settles on the library.
  bool library_retried_ = false;
  // The candidates are a confirmation's two (confirm()), the first round's in all_candidates_.
  bool head_to_head_ = false;
  bool table_displaced_ = false;  // the round before the confirmation displaced the table's choice
  Algorithm library_ = Algorithm::automatic;
  Algorithm at_once_ = Algorithm::automatic;  // set_at_once
  std::uint32_t wait_calls_ = 0;              // start()'s
  Wait wait_ = Wait::warming_library;         // start()'s
  // The calls of the phase so far: made while waiting, recorded while trying, made once settled.
  std::uint32_t calls_ = 0;
  std::array<Algorithm, kMaxCandidates> candidates_{};
  std::array<std::size_t, kMaxCandidates> segments_{};  // start()'s, by candidate
  bool segment_sizes_ = false;  // the candidates are one algorithm's segment sizes (no margin)
  std::array<Algorithm, kMaxCandidates> all_candidates_{};
  std::uint8_t all_count_ = 0;
  std::array<double, kMaxCandidates> slowness_{};  // slowness() of all_candidates_[i]
  // This rank's timed trial calls of each candidate, by pass: their sum (ns) and count.
  std::array<std::array<std::uint64_t, 2>, kMaxCandidates> pass_ns_{};
  std::array<std::array<std::uint32_t, 2>, kMaxCandidates> pass_calls_{};
  std::array<std::uint64_t, kMaxCandidates> agreed_ns_{};
  std::array<std::uint64_t, kMaxCandidates> agreed_mean_ns_{};
  Algorithm chosen_ = Algorithm::automatic;
  std::size_t chosen_segment_ = 0;
  std::uint64_t baseline_ns_ = 0;  // this rank's median trial time of the chosen candidate
  std::uint32_t next_check_ = kFirstCheck;
  std::array<std::uint64_t, kSamples> samples_ns_{};
  std::uint8_t sample_count_ = 0;
  std::uint8_t sample_next_ = 0;
};

// How many times each candidate is tried at `bytes`: more where a call is short and noisy or a
// few calls do not cycle the arena's ring, fewer where it is long (the trials' cost stays
// within a few calls' time).
int trials_for(std::size_t bytes);

// The candidates of a call, deduplicated, table's first, at most ClassTuner::kMaxOwnCandidates:
// `table` then `others` in order.
std::vector<Algorithm> candidate_list(Algorithm table, std::span<const Algorithm> others);

// One line of COLLX_DEBUG=INFO / collx-info: the class, every candidate's agreed time, the choice.
std::string describe_trials(Collective collective, int size_class, const ClassTuner& tuner);
// One line for a class whose first trials have not ended (COLLX_PMPI_STATS=2): how far into its
// wait or its trials its calls went, and what the wait ran.
std::string describe_unsettled(Collective collective, int size_class, const ClassTuner& tuner);

}  // namespace collx::detail
