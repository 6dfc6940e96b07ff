// The autotuner's decisions (policy/autotune.hpp): which candidate each blocking call tries, when
// the ranks must agree, what the agreed times choose, when a settled class is tried again. The
// times are handed in, so every decision is checked exactly; tests/mpi/mpi_autotune_test.cpp runs
// it on real ranks.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "autotune.hpp"
#include "shm_arena.hpp"

namespace {

using collx::Algorithm;
using collx::Collective;
using namespace collx::detail;

const std::vector<Algorithm> kThree = {Algorithm::recursive_doubling, Algorithm::ring,
                                       Algorithm::shared_memory};

// Runs one round of trials with `seconds[i]` for candidate i's every trial; returns the step of
// the last record().
TunerStep run_trials(ClassTuner& t, const std::vector<double>& seconds, int trials) {
  TunerStep step = TunerStep::none;
  // At most two passes of half the trials, rounded up.
  const int most_calls = static_cast<int>(seconds.size()) * (trials + 1);
  for (int call = 0; call < most_calls && step != TunerStep::agree; ++call) {
    const TrialPick p = t.pick();
    EXPECT_TRUE(p.timed);
    std::size_t index = 0;
    while (t.candidates()[index] != p.algorithm)
      ++index;
    EXPECT_EQ(step, TunerStep::none) << "agreement asked before the last trial";
    step = t.record(seconds[index]);
  }
  return step;
}

// A first round over kThree in which this rank times candidate i at `seconds[i]` and the ranks
// agree on `maxima` (each candidate's slowest rank, in ns); returns whether they agreed on a
// choice (t.chosen()).
bool first_round(ClassTuner& t, const std::vector<double>& seconds,
                 const std::vector<std::uint64_t>& maxima) {
  t.start(kThree, 1);
  run_trials(t, seconds, 1);
  return t.agreed(maxima);
}

TEST(Autotune, SizeClassesArePowersOfTwo) {
  EXPECT_EQ(size_class_of(0), 0);
  EXPECT_EQ(size_class_of(1), 0);
  EXPECT_EQ(size_class_of(2), 1);
  EXPECT_EQ(size_class_of(3), 2);
  EXPECT_EQ(size_class_of(4), 2);
  EXPECT_EQ(size_class_of(5), 3);
  EXPECT_EQ(size_class_of(std::size_t{1} << 20), 20);
  EXPECT_EQ(size_class_of((std::size_t{1} << 20) + 1), 21);
  EXPECT_EQ(size_class_max_bytes(20), std::size_t{1} << 20);
  for (std::size_t b = 2; b < 5000; ++b) {
    const int k = size_class_of(b);
    EXPECT_LE(b, size_class_max_bytes(k));
    EXPECT_GT(b, size_class_max_bytes(k - 1));
  }
}

TEST(Autotune, CandidatesAreDeduplicatedTableFirstAndBounded) {
  const std::vector<Algorithm> others = {Algorithm::ring,
                                         Algorithm::recursive_doubling,
                                         Algorithm::automatic,
                                         Algorithm::ring,
                                         Algorithm::shared_memory,
                                         Algorithm::rabenseifner,
                                         Algorithm::double_binary_tree};
  const auto c = candidate_list(Algorithm::recursive_doubling, others);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0], Algorithm::recursive_doubling);
  EXPECT_EQ(c[1], Algorithm::ring);
  EXPECT_EQ(c[2], Algorithm::shared_memory);
  EXPECT_EQ(c[3], Algorithm::rabenseifner);
}

TEST(Autotune, OneCandidateSettlesAtOnceAndIsNeverTimed) {
  ClassTuner t;
  const std::vector<Algorithm> one = {Algorithm::dissemination};
  t.start(one, 8);
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
  for (int i = 0; i < 1000; ++i) {
    const TrialPick p = t.pick();
    EXPECT_EQ(p.algorithm, Algorithm::dissemination);
    EXPECT_FALSE(p.timed);
  }
}

TEST(Autotune, CandidatesAreTriedInBlocksThenTheFastestIsKept) {
  ClassTuner t;
  t.start(kThree, 3);
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  // In blocks, the table's choice last: calls 0-2 try candidate 1, 3-5 candidate 2, 6-8
  // candidate 0 (a call counts once its time is recorded).
  const std::vector<double> seconds = {2e-6, 1e-6, 3e-6};
  for (int i = 0; i < 9; ++i) {
    const std::size_t index = static_cast<std::size_t>((i / 3 + 1) % 3);
    EXPECT_EQ(t.pick().algorithm, kThree[index]) << i;
    // Before any agreement, nonblocking calls run the table's choice.
    EXPECT_EQ(t.chosen(), Algorithm::recursive_doubling);
    EXPECT_EQ(t.record(seconds[index]), i == 8 ? TunerStep::agree : TunerStep::none) << i;
  }
  // This rank's mean times, in ns, in candidate order.
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{2000, 1000, 3000}));
  // The other ranks saw the ring slower: the maxima decide, shared_memory wins.
  const std::vector<std::uint64_t> maxima = {2000, 2500, 1500};
  EXPECT_TRUE(t.agreed(maxima));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
  EXPECT_EQ(t.chosen(), Algorithm::shared_memory);
  EXPECT_EQ(t.chosen(), Algorithm::shared_memory);
  EXPECT_EQ(t.pick().algorithm, Algorithm::shared_memory);
  EXPECT_EQ(t.rounds(), 1);
  const std::string line = describe_trials(Collective::allreduce, 12, t);
  EXPECT_NE(line.find("allreduce 2049..4096 B"), std::string::npos) << line;
  EXPECT_NE(line.find("-> shared_memory"), std::string::npos) << line;
}

// A block's first call is left out (setup, the switch from the previous candidate); the mean of
// the rest counts, as it does in a run of calls: a call that waited (for a descheduled rank, for
// room in the arena's ring) counts whole.
TEST(Autotune, EachCandidateIsTimedByItsMeanAfterItsFirstCall) {
  ClassTuner t;
  t.start(kThree, 3);                  // fewer than kTwoPassTrials: one pass
  for (double s : {1e-6, 9e-6, 9e-6})  // candidate 1: a fast first call does not count
    t.record(s);
  for (double s : {5e-6, 1e-6, 6e-6})  // candidate 2: the mean of the two
    t.record(s);
  for (double s : {90e-6, 3e-6, 1e-6})  // candidate 0, last: a slow first call does not count
    EXPECT_EQ(t.record(s), s == 1e-6 ? TunerStep::agree : TunerStep::none);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{2000, 9000, 3500}));
}

// From kTwoPassTrials on, the candidates are tried in two passes of blocks (1, 2, 0, 1, 2, 0),
// each block's first call left out, and a candidate's time is the lower of its passes' means: a
// pass disturbed all through (here candidate 1's first) does not decide.
TEST(Autotune, TwoPassesAndTheLowerOfTheirMeansCounts) {
  ClassTuner t;
  t.start(kThree, 8);  // two passes of blocks of 4 calls, 3 of them timed
  const std::vector<std::vector<double>> blocks = {
      {1e-6, 50e-6, 60e-6, 70e-6},  // pass 1: candidate 1, disturbed
      {1e-6, 5e-6, 5e-6, 5e-6},     // candidate 2
      {1e-6, 4e-6, 4e-6, 4e-6},     // candidate 0
      {90e-6, 2e-6, 3e-6, 4e-6},    // pass 2: candidate 1
      {1e-6, 9e-6, 9e-6, 9e-6},     // candidate 2: slower now, its first pass counts
      {1e-6, 4e-6, 5e-6, 6e-6}};    // candidate 0: 5 us now, its first pass counts
  const std::size_t order[] = {1, 2, 0, 1, 2, 0};
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    for (std::size_t i = 0; i < blocks[b].size(); ++i) {
      EXPECT_EQ(t.pick().algorithm, kThree[order[b]]) << "block " << b << " call " << i;
      const bool last = b + 1 == blocks.size() && i + 1 == blocks[b].size();
      EXPECT_EQ(t.record(blocks[b][i]), last ? TunerStep::agree : TunerStep::none) << b << " " << i;
    }
  }
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{4000, 3000, 5000}));
  EXPECT_TRUE(t.agreed(std::vector<std::uint64_t>{4000, 3000, 5000}));
  EXPECT_EQ(t.chosen(), Algorithm::ring);
}

// The policy a class's trials start with: one node never meets; across nodes a rooted call up to
// kMeetEveryCallBytes meets before every call, larger ones and unrooted ones before blocks.
TEST(Autotune, MeetingsFollowNodesRootAndSize) {
  using Meetings = ClassTuner::Meetings;
  constexpr std::size_t kEdge = ClassTuner::kMeetEveryCallBytes;
  for (const bool rooted : {false, true}) {
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{8}, kEdge, kEdge + 1}) {
      EXPECT_EQ(ClassTuner::meetings_for(rooted, bytes, 1), Meetings::never);
      EXPECT_EQ(ClassTuner::meetings_for(rooted, bytes, 0), Meetings::never);
      const Meetings across = ClassTuner::meetings_for(rooted, bytes, 2);
      EXPECT_EQ(across, rooted && bytes <= kEdge ? Meetings::before_calls : Meetings::before_blocks)
          << "rooted " << rooted << " bytes " << bytes;
      EXPECT_EQ(ClassTuner::meetings_for(rooted, bytes, 64), across);
    }
  }
}

// Across nodes (Meetings::before_blocks) the ranks meet before each block's first timed call
// (its second call; the only call of a block of one), never before the others nor once settled;
// a rooted collective across nodes (before_calls) meets before every call of its trials; on one
// node (never) no call asks for one. Either way a block's calls count by their mean: a
// candidate fast in two calls of three but slow in the third (its root ran ahead and the third
// waited for it) loses to a steady one faster than its mean.
TEST(Autotune, BlocksCountByTheirMeanAndAcrossNodesStartFromAMeeting) {
  const std::vector<std::vector<double>> blocks = {
      {1e-6, 10e-6, 10e-6, 30e-6},  // pass 1: candidate 1 (mean 16.67)
      {1e-6, 14e-6, 14e-6, 14e-6},  // candidate 2
      {1e-6, 20e-6, 20e-6, 20e-6},  // candidate 0
      {1e-6, 10e-6, 30e-6, 10e-6},  // pass 2: candidate 1, the same
      {1e-6, 14e-6, 14e-6, 14e-6},  // candidate 2
      {1e-6, 20e-6, 20e-6, 20e-6}};
  using Meetings = ClassTuner::Meetings;
  for (const Meetings meetings :
       {Meetings::never, Meetings::before_blocks, Meetings::before_calls}) {
    ClassTuner t;
    t.start(kThree, 8, meetings);  // two passes of blocks of 4 calls, 3 of them timed
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      for (std::size_t i = 0; i < blocks[b].size(); ++i) {
        const TrialPick pick = t.pick();
        EXPECT_TRUE(pick.timed);
        EXPECT_EQ(pick.meet, meetings == Meetings::before_calls ||
                                 (meetings == Meetings::before_blocks && i == 1))
            << "block " << b << " call " << i;
        t.record(blocks[b][i]);
      }
    }
    const std::vector<std::uint64_t> times = t.agree_values();
    EXPECT_EQ(times, (std::vector<std::uint64_t>{20000, 16667, 14000}));
    EXPECT_TRUE(t.agreed(times));
    EXPECT_EQ(t.chosen(), kThree[2]);
    EXPECT_FALSE(t.pick().meet);  // settled: no meeting
  }
  // Blocks of one call (one trial each): every call is its block's first timed call.
  ClassTuner single;
  single.start(kThree, 1, Meetings::before_blocks);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(single.pick().meet) << i;
    single.record(1e-6);
  }
}

TEST(Autotune, TheTableKeepsItsChoiceWithinTheMargin) {
  // 2% faster is noise: the table's choice stays.
  ClassTuner t;
  EXPECT_TRUE(first_round(t, {1e-6, 1e-6, 1e-6}, {10000, 9800, 9900}));
  EXPECT_EQ(t.chosen(), Algorithm::recursive_doubling);
  // 5% faster replaces it.
  ClassTuner u;
  EXPECT_TRUE(first_round(u, {1e-6, 1e-6, 1e-6}, {10000, 9500, 9900}));
  EXPECT_EQ(u.chosen(), Algorithm::ring);
}

// Below a microsecond the table's choice stays unless a challenger saves kMarginMinNs a call,
// and a sampled time counts as drift only kDriftMinNs above the trial time.
TEST(Autotune, SubMicrosecondDifferencesAreNoise) {
  // ring 33% faster, but by 100 ns: the table's choice stays.
  ClassTuner t;
  EXPECT_TRUE(first_round(t, {0.3e-6, 0.2e-6, 0.25e-6}, {300, 200, 250}));
  EXPECT_EQ(t.chosen(), Algorithm::recursive_doubling);
  // 400 ns saved replaces it.
  ClassTuner u;
  EXPECT_TRUE(first_round(u, {0.7e-6, 0.3e-6, 0.6e-6}, {700, 300, 600}));
  EXPECT_EQ(u.chosen(), Algorithm::ring);
  // Settled on recursive doubling at 0.3 us: samples at 3x (0.9 us) are not drift.
  TunerStep step = TunerStep::none;
  while (step != TunerStep::agree) {
    const TrialPick p = t.pick();
    if (p.timed) step = t.record(0.9e-6);
  }
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  EXPECT_FALSE(t.agreed(std::vector<std::uint64_t>{0, 0}));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
}

// A class started with wait_calls runs the table's choice (its first candidate), untimed, for
// that many calls on every rank alike, then tries its candidates as one started without.
TEST(Autotune, WaitingCallsRunTheTablesChoiceThenTheTrialsStart) {
  ClassTuner t;
  const std::vector<Algorithm> candidates = {Algorithm::ring, Algorithm::recursive_doubling,
                                             Algorithm::mpi};
  t.start(candidates, 8, ClassTuner::Meetings::never, Algorithm::mpi, 5);
  EXPECT_EQ(t.phase(), ClassTuner::Phase::waiting);
  EXPECT_TRUE(t.in_trials());
  for (int call = 0; call < 5; ++call) {
    const TrialPick p = t.pick();
    EXPECT_EQ(p.algorithm, Algorithm::ring) << call;
    EXPECT_FALSE(p.timed) << call;
  }
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  EXPECT_EQ(t.chosen(), Algorithm::ring);
  int trial_calls = 0;
  while (t.phase() == ClassTuner::Phase::trying) {
    const TrialPick p = t.pick();
    EXPECT_TRUE(p.timed);
    ++trial_calls;
    const double seconds = p.algorithm == Algorithm::mpi ? 0.2e-6 : 0.5e-6;
    if (t.record(seconds) == TunerStep::agree) t.agreed(t.agree_values());
  }
  EXPECT_EQ(trial_calls, 3 * 8);
  EXPECT_EQ(t.chosen(), Algorithm::mpi);
  // One candidate: settled at once, whatever the wait.
  ClassTuner one;
  one.start(std::vector<Algorithm>{Algorithm::ring}, 8, ClassTuner::Meetings::never,
            Algorithm::automatic, 5);
  EXPECT_EQ(one.phase(), ClassTuner::Phase::settled);
}

// Where calls are short (blocks of 8 calls and more), the wait's second half runs the MPI
// library's collective, untimed, so that its trials do not time its first calls of the size; with
// no library among the candidates, or longer calls, the whole wait runs the table's choice.
TEST(Autotune, ShortCallsWarmTheMpiLibraryUpInTheWaitsSecondHalf) {
  const std::vector<Algorithm> with_library = {Algorithm::shared_memory, Algorithm::binomial_tree,
                                               Algorithm::mpi};
  ClassTuner t;
  t.start(with_library, 16, ClassTuner::Meetings::never, Algorithm::mpi, 10);
  for (int call = 0; call < 10; ++call) {
    const TrialPick p = t.pick();
    EXPECT_EQ(p.algorithm, call < 5 ? Algorithm::shared_memory : Algorithm::mpi) << call;
    EXPECT_FALSE(p.timed) << call;
  }
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  EXPECT_TRUE(t.pick().timed);
  ClassTuner long_calls;  // 5 trials: blocks of 3
  long_calls.start(with_library, 5, ClassTuner::Meetings::never, Algorithm::mpi, 10);
  ClassTuner no_library;
  no_library.start(std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::binomial_tree}, 16,
                   ClassTuner::Meetings::never, Algorithm::automatic, 10);
  for (int call = 0; call < 10; ++call) {
    EXPECT_EQ(long_calls.pick().algorithm, Algorithm::shared_memory) << call;
    EXPECT_EQ(no_library.pick().algorithm, Algorithm::shared_memory) << call;
  }
}

// Where a smaller class's trials settled on the MPI library (Wait::on_library), the whole wait of a
// class of long calls runs the MPI library's collective, untimed, then the trials start; without
// a library among the candidates the flag changes nothing.
TEST(Autotune, AWaitOnTheMpiLibraryRunsItThroughout) {
  const std::vector<Algorithm> with_library = {Algorithm::shared_memory, Algorithm::pairwise,
                                               Algorithm::mpi};
  ClassTuner t;
  t.start(with_library, 5, ClassTuner::Meetings::never, Algorithm::mpi, 10,
          ClassTuner::Wait::on_library);
  for (int call = 0; call < 10; ++call) {
    const TrialPick p = t.pick();
    EXPECT_EQ(p.algorithm, Algorithm::mpi) << call;
    EXPECT_FALSE(p.timed) << call;
  }
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  EXPECT_TRUE(t.pick().timed);
  ClassTuner no_library;
  no_library.start(std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::pairwise}, 5,
                   ClassTuner::Meetings::never, Algorithm::automatic, 10,
                   ClassTuner::Wait::on_library);
  EXPECT_EQ(no_library.pick().algorithm, Algorithm::shared_memory);
}

// Where a smaller class timed the MPI library's collective far behind collx's choice
// (Wait::on_choice), the whole wait of a class of short calls runs the first candidate: no calls
// warm the MPI library up. The trials that follow still time it.
TEST(Autotune, AWaitOnTheChoiceNeverWarmsTheMpiLibraryUp) {
  const std::vector<Algorithm> with_library = {Algorithm::shared_memory, Algorithm::binomial_tree,
                                               Algorithm::mpi};
  ClassTuner t;
  t.start(with_library, 16, ClassTuner::Meetings::never, Algorithm::mpi, 10,
          ClassTuner::Wait::on_choice);
  for (int call = 0; call < 10; ++call) {
    const TrialPick p = t.pick();
    EXPECT_EQ(p.algorithm, Algorithm::shared_memory) << call;
    EXPECT_FALSE(p.timed) << call;
  }
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  bool library_tried = false;
  while (t.phase() == ClassTuner::Phase::trying) {
    const TrialPick p = t.pick();
    EXPECT_TRUE(p.timed);
    library_tried = library_tried || p.algorithm == Algorithm::mpi;
    if (t.record(p.algorithm == Algorithm::mpi ? 2e-6 : 1e-6) == TunerStep::agree)
      t.agreed(t.agree_values());
  }
  EXPECT_TRUE(library_tried);
}

// The order of the trial blocks: without a wait the challengers first (the first touch of the
// program's buffers falls on them), after a wait the table's choice first (a program that stops a
// few calls into the trials, as IMB's 4 MiB, has run the favoured choice); both passes alike.
TEST(Autotune, AfterAWaitTheTrialsRunTheChoicesBlockFirst) {
  const std::vector<Algorithm> candidates = {Algorithm::shared_memory, Algorithm::pairwise,
                                             Algorithm::mpi};
  // The algorithm of each trial call, in order (blocks of 3, two passes).
  const auto trial_order = [&](std::uint32_t wait_calls) {
    ClassTuner t;
    t.start(candidates, 6, ClassTuner::Meetings::never, Algorithm::mpi, wait_calls,
            ClassTuner::Wait::on_choice);
    std::vector<Algorithm> order;
    while (t.phase() != ClassTuner::Phase::settled) {
      const TrialPick p = t.pick();
      if (!p.timed) continue;  // the wait
      order.push_back(p.algorithm);
      if (t.record(1e-6) == TunerStep::agree) t.agreed(t.agree_values());
    }
    return order;
  };
  const Algorithm s = Algorithm::shared_memory, w = Algorithm::pairwise, m = Algorithm::mpi;
  EXPECT_EQ(trial_order(0), (std::vector<Algorithm>{w, w, w, m, m, m, s, s, s,  //
                                                    w, w, w, m, m, m, s, s, s}));
  EXPECT_EQ(trial_order(36), (std::vector<Algorithm>{s, s, s, w, w, w, m, m, m,  //
                                                     s, s, s, w, w, w, m, m, m}));
}

// The MPI library's own collective needs the share of the margin only, whatever the time: a
// sub-microsecond call of the MPI library 33% faster than the table's choice replaces it (a
// collx challenger as fast stays out, above); the table's choice keeps its place against it by
// the share and kLibraryMarginMinNs.
TEST(Autotune, TheMpiLibraryNeedsNoAbsoluteMargin) {
  const std::vector<Algorithm> candidates = {Algorithm::recursive_doubling, Algorithm::ring,
                                             Algorithm::mpi};
  // The choice after a round in which the MPI library's calls take `library` seconds and every
  // other candidate's `collx`.
  const auto choice = [&](double library, double collx) {
    ClassTuner t;
    t.start(candidates, 8, ClassTuner::Meetings::never, Algorithm::mpi);
    while (t.phase() == ClassTuner::Phase::trying) {
      const TrialPick p = t.pick();
      if (t.record(p.algorithm == Algorithm::mpi ? library : collx) == TunerStep::agree)
        t.agreed(t.agree_values());
    }
    return t.chosen();
  };
  EXPECT_EQ(choice(0.2e-6, 0.3e-6), Algorithm::mpi);
  // 2% slower than the table's choice: a tie, which goes to the MPI library.
  EXPECT_EQ(choice(1.02e-6, 1e-6), Algorithm::mpi);
  // 5% slower: the table's choice where that is kLibraryMarginMinNs or more a call.
  EXPECT_EQ(choice(4.2e-6, 4e-6), Algorithm::recursive_doubling);
  // 5% of 1 us is within kLibraryMarginMinNs: the MPI library.
  EXPECT_EQ(choice(1.05e-6, 1e-6), Algorithm::mpi);
}

// Settled calls up to the next checkpoint, each timed one taking `seconds`; returns how many.
std::uint32_t calls_to_checkpoint(ClassTuner& t, double seconds);

// A class settled on collx's candidate whose sampled calls take longer on average than the MPI
// library's did in the trials tries the two again head to head at that checkpoint (the trials
// timed them back to back; a program's calls can take longer for both), and settles on the MPI
// library the next time, even below a microsecond (auto's floor is the MPI it wraps; a few dozen
// trial calls can miss what a long run of them costs); sampled times under the MPI's stay
// settled, as does a class settled on the MPI's own.
TEST(Autotune, SlowerThanTheMpiLibraryWasSettlesOnIt) {
  const std::vector<Algorithm> candidates = {Algorithm::shared_memory, Algorithm::ring,
                                             Algorithm::mpi};
  const auto run_trials = [](ClassTuner& t) {
    while (t.phase() == ClassTuner::Phase::trying) {
      const TrialPick p = t.pick();
      const double seconds = p.algorithm == Algorithm::shared_memory ? 0.1e-6
                             : p.algorithm == Algorithm::mpi         ? 0.2e-6
                                                                     : 0.5e-6;
      if (t.record(seconds) == TunerStep::agree) t.agreed(t.agree_values());
    }
  };
  const auto settle = [&](ClassTuner& t) {
    t.start(candidates, 8, ClassTuner::Meetings::never, Algorithm::mpi);
    run_trials(t);
  };
  ClassTuner t;
  settle(t);
  ASSERT_EQ(t.chosen(), Algorithm::shared_memory);
  const int rounds = t.rounds();
  // 0.19 us: slower than its own trial (1.9x, but 90 ns: noise) and faster than the MPI.
  calls_to_checkpoint(t, 0.19e-6);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  EXPECT_FALSE(t.agreed(t.agree_values()));
  EXPECT_FALSE(t.switched_to_library());
  // 0.33 us: slower than the MPI's 0.2 us: the two again, head to head.
  calls_to_checkpoint(t, 0.33e-6);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(t.agreed(t.agree_values()));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  EXPECT_EQ(t.rounds(), rounds + 1);
  EXPECT_TRUE(t.head_to_head());
  EXPECT_EQ(std::vector<Algorithm>(t.candidates().begin(), t.candidates().end()),
            (std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::mpi}));
  EXPECT_FALSE(t.switched_to_library());
  // The arena faster again in that round: settled on it, no second opinion after.
  run_trials(t);
  EXPECT_EQ(t.chosen(), Algorithm::shared_memory);
  // Slower than the MPI again: settled on the MPI library, no trials again.
  calls_to_checkpoint(t, 0.33e-6);
  const std::vector<std::uint64_t> values = t.agree_values();
  EXPECT_EQ(values, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_TRUE(t.agreed(values));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
  EXPECT_EQ(t.chosen(), Algorithm::mpi);
  EXPECT_TRUE(t.switched_to_library());
  EXPECT_EQ(t.pick().algorithm, Algorithm::mpi);
  // A switch is evidence for the larger classes as it stands (the arena had tied nothing).
  EXPECT_EQ(t.choice_as_evidence(), Algorithm::mpi);
  // Another rank's flag is enough: here this rank's calls were fast.
  ClassTuner v;
  settle(v);
  calls_to_checkpoint(v, 0.11e-6);
  EXPECT_TRUE(v.agreed(std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(v.phase(), ClassTuner::Phase::trying);
  run_trials(v);
  calls_to_checkpoint(v, 0.11e-6);
  EXPECT_TRUE(v.agreed(std::vector<std::uint64_t>{0, 1}));
  EXPECT_EQ(v.chosen(), Algorithm::mpi);
  // Where the MPI library wins the head-to-head round, the class settles on it there.
  ClassTuner w;
  settle(w);
  calls_to_checkpoint(w, 0.33e-6);
  EXPECT_TRUE(w.agreed(w.agree_values()));
  while (w.phase() == ClassTuner::Phase::trying) {
    const TrialPick p = w.pick();
    if (w.record(p.algorithm == Algorithm::mpi ? 0.2e-6 : 0.33e-6) == TunerStep::agree)
      w.agreed(w.agree_values());
  }
  EXPECT_EQ(w.chosen(), Algorithm::mpi);
  EXPECT_FALSE(w.switched_to_library());
  // Settled on the MPI's collective (here the first candidate, so no second opinion follows):
  // its own samples are checked against its trial only.
  ClassTuner u;
  u.start(std::vector<Algorithm>{Algorithm::mpi, Algorithm::ring}, 8, ClassTuner::Meetings::never,
          Algorithm::mpi);
  while (u.phase() == ClassTuner::Phase::trying) {
    const TrialPick p = u.pick();
    const double seconds = p.algorithm == Algorithm::mpi ? 0.2e-6 : 0.4e-6;
    if (u.record(seconds) == TunerStep::agree) u.agreed(u.agree_values());
  }
  ASSERT_EQ(u.chosen(), Algorithm::mpi);
  calls_to_checkpoint(u, 0.35e-6);
  EXPECT_EQ(u.agree_values(), (std::vector<std::uint64_t>{0, 0}));
}

// A challenger of collx's beats the table's choice but must beat the MPI library's collective
// by the same margin (share and kMarginMinNs) to be chosen over it.
TEST(Autotune, ACollxChallengerMustBeatTheMpiLibraryByTheMargin) {
  const std::vector<Algorithm> candidates = {Algorithm::shared_memory, Algorithm::binomial_tree,
                                             Algorithm::mpi};
  const auto choice = [&](std::uint64_t table, std::uint64_t challenger, std::uint64_t library,
                          bool at_once = false) {
    ClassTuner t;
    t.start(candidates, 1, ClassTuner::Meetings::never, Algorithm::mpi);
    if (at_once) t.set_at_once(Algorithm::shared_memory);
    run_trials(t, {1e-6, 1e-6, 1e-6}, 1);
    EXPECT_TRUE(t.agreed(std::vector<std::uint64_t>{table, challenger, library}));
    return t.chosen();
  };
  // 150 ns against the MPI's 170: faster, but within kMarginMinNs: the MPI library.
  EXPECT_EQ(choice(2000, 150, 170), Algorithm::mpi);
  // 10 us against 10.2: within the share.
  EXPECT_EQ(choice(20000, 10000, 10200), Algorithm::mpi);
  // 150 ns against 1 us: the challenger.
  EXPECT_EQ(choice(2000, 150, 1000), Algorithm::binomial_tree);
  // The table's choice within the share of the MPI's: the MPI library too.
  EXPECT_EQ(choice(1000, 1500, 990), Algorithm::mpi);
  EXPECT_EQ(choice(1000, 1500, 1020), Algorithm::mpi);
  // The table's choice faster by the share and kLibraryMarginMinNs (if not by kMarginMinNs)
  // keeps its place.
  EXPECT_EQ(choice(3000, 4500, 3120), Algorithm::shared_memory);
  // Faster by the share but not by kLibraryMarginMinNs: the MPI library (a reduce_scatter of 32
  // B at 2 ranks timed the arena at 0.30 us and the MPI's at 0.34 in the trials; 0.34 and 0.30
  // in the run after them).
  EXPECT_EQ(choice(1000, 1500, 1040), Algorithm::mpi);
  EXPECT_EQ(choice(300, 1500, 340), Algorithm::mpi);
  // A candidate that runs at once: below 400 ns a call of the MPI library's, a quarter of its
  // time is the margin (the arena's one-slot reduce against the MPI's); others keep 100 ns.
  EXPECT_EQ(choice(110, 1500, 190, true), Algorithm::shared_memory);
  EXPECT_EQ(choice(110, 1500, 190), Algorithm::mpi);
  EXPECT_EQ(choice(130, 1500, 160, true), Algorithm::mpi);
  EXPECT_EQ(choice(300, 1500, 340, true), Algorithm::mpi);
  EXPECT_EQ(ClassTuner::library_margin_ns(190), 47u);
  EXPECT_EQ(ClassTuner::library_margin_ns(1000), ClassTuner::kLibraryMarginMinNs);
}

// A round among the arena, the binomial tree and the MPI library's collective in which the ranks
// agree on `maxima` (and `means`, where given).
ClassTuner round_with_library(const std::vector<std::uint64_t>& maxima,
                              const std::vector<std::uint64_t>& means = {}) {
  ClassTuner t;
  t.start(
      std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::binomial_tree, Algorithm::mpi}, 1,
      ClassTuner::Meetings::never, Algorithm::mpi);
  run_trials(t, {1e-6, 1e-6, 1e-6}, 1);
  EXPECT_TRUE(t.agreed(maxima, means));
  return t;
}

// What a larger class takes from a class that chose the MPI library's collective: its choice
// where the MPI library led by the margin (slowest rank or mean), but where the tie rule gave it
// the choice, the fastest of collx's candidates within the margin of it: a tie is no evidence that
// collx's loses (IMB's reduce: a 128 KiB tie held every larger class on the MPI library).
TEST(Autotune, ATieWithTheMpiLibraryIsNoEvidenceAgainstCollx) {
  const auto evidence = [](const std::vector<std::uint64_t>& maxima,
                           const std::vector<std::uint64_t>& means) {
    const ClassTuner t = round_with_library(maxima, means);
    EXPECT_EQ(t.chosen(), Algorithm::mpi);
    return t.choice_as_evidence();
  };
  // The arena faster, within the share: the arena.
  EXPECT_EQ(evidence({16100, 30000, 16400}, {}), Algorithm::shared_memory);
  // Both of collx's within the margin: the faster one.
  EXPECT_EQ(evidence({10100, 10000, 10200}, {}), Algorithm::binomial_tree);
  // Slower than the MPI's, but within the share: still a tie.
  EXPECT_EQ(evidence({1010, 1500, 1000}, {}), Algorithm::shared_memory);
  // The MPI library faster by the share: its own.
  EXPECT_EQ(evidence({1040, 1500, 1000}, {}), Algorithm::mpi);
  // A tie of the slowest ranks but the MPI's mean lower by the margin (the mean rule): its own.
  EXPECT_EQ(evidence({520, 700, 520}, {410, 450, 320}), Algorithm::mpi);
  EXPECT_EQ(evidence({520, 700, 520}, {325, 450, 320}), Algorithm::shared_memory);
  // A class that chose one of collx's: its choice.
  ClassTuner table;
  table.start(std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::mpi}, 1,
              ClassTuner::Meetings::never, Algorithm::mpi);
  run_trials(table, {1e-6, 1e-6}, 1);
  EXPECT_TRUE(table.agreed(std::vector<std::uint64_t>{1000, 2000}));
  EXPECT_EQ(table.choice_as_evidence(), Algorithm::shared_memory);
}

// Where collx's choice has the shorter slowest rank but the MPI library's calls cost the ranks
// less on average by the margin (a rooted collective whose senders return from the MPI library's
// eager send at once), the MPI library; within the margin of the mean, or with no means agreed
// (a checkpoint's), the slowest rank decides as before.
TEST(Autotune, TheMpiLibraryWinsWhereItsMeanOverRanksIsLowerByTheMargin) {
  const auto choice = round_with_library;
  // A reduce of 64 B at 2 ranks: the arena's root 0.52 us against the MPI's 0.58, its sender
  // 0.30 against the MPI's 0.06 (means 0.41 and 0.32).
  const ClassTuner reduce = choice({520, 700, 580}, {410, 450, 320});
  EXPECT_EQ(reduce.chosen(), Algorithm::mpi);
  EXPECT_EQ(reduce.agreed_mean_ns()[0], 410u);
  EXPECT_EQ(reduce.agreed_mean_ns()[2], 320u);
  // Means within the margin: the arena keeps its place (where it leads the slowest rank by
  // kLibraryMarginMinNs).
  EXPECT_EQ(choice({1040, 1400, 1160}, {820, 900, 800}).chosen(), Algorithm::shared_memory);
  // A challenger of collx's that won on the maxima yields to the MPI's lower mean too.
  EXPECT_EQ(choice({2000, 300, 1000}, {1500, 290, 200}).chosen(), Algorithm::mpi);
  EXPECT_EQ(choice({2000, 300, 1000}, {1500, 290, 900}).chosen(), Algorithm::binomial_tree);
  // No means: the maxima alone.
  EXPECT_EQ(choice({1040, 1400, 1160}, {}).chosen(), Algorithm::shared_memory);
}

// Settled calls up to the next checkpoint, each timed one taking `seconds`; returns how many.
std::uint32_t calls_to_checkpoint(ClassTuner& t, double seconds) {
  std::uint32_t calls = 0;
  TunerStep step = TunerStep::none;
  while (step != TunerStep::agree) {
    const TrialPick p = t.pick();
    ++calls;
    if (p.timed) step = t.record(seconds);
  }
  return calls;
}

// At a checkpoint whose agreed value is `value`: the class is tried again (nonblocking calls
// keep running `kept` meanwhile), and a second round in which every rank times candidate i at
// `seconds[i]` settles on `winner`.
void expect_second_round(ClassTuner& t, std::uint64_t value, Algorithm kept,
                         const std::vector<double>& seconds, Algorithm winner) {
  EXPECT_TRUE(t.agreed(std::vector<std::uint64_t>{value}));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
  EXPECT_EQ(t.chosen(), kept);
  EXPECT_EQ(run_trials(t, seconds, 1), TunerStep::agree);
  std::vector<std::uint64_t> maxima;
  for (double s : seconds)
    maxima.push_back(static_cast<std::uint64_t>(s * 1e9 + 0.5));
  EXPECT_TRUE(t.agreed(maxima));
  EXPECT_EQ(t.chosen(), winner);
  EXPECT_EQ(t.rounds(), 2);
}

// A program whose calls move the root through the ranks (IMB's Bcast: root = call % p) takes a
// rank's time as root and as receiver in turn; the trials averaged both, and so must the samples
// the checkpoint compares with them: here calls alternate 0.1 us and 0.35 us (mean 0.225, under
// the MPI library's 0.25 us in the trials), and the class stays settled on collx's choice. Every
// 16th call would have timed only the slow ones.
TEST(Autotune, SamplesTakeEveryRootOfARotation) {
  ClassTuner t;
  t.start(std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::mpi}, 8,
          ClassTuner::Meetings::never, Algorithm::mpi);
  while (t.phase() == ClassTuner::Phase::trying) {
    const TrialPick p = t.pick();
    if (t.record(p.algorithm == Algorithm::mpi ? 0.25e-6 : 0.1e-6) == TunerStep::agree)
      t.agreed(t.agree_values());
  }
  ASSERT_EQ(t.chosen(), Algorithm::shared_memory);
  std::uint32_t call = 0;
  std::vector<std::uint32_t> sampled;
  for (TunerStep step = TunerStep::none; step != TunerStep::agree;) {
    const TrialPick p = t.pick();
    ++call;
    if (!p.timed) continue;
    sampled.push_back(call);
    step = t.record(call % 2 == 1 ? 0.1e-6 : 0.35e-6);
  }
  ASSERT_GE(sampled.size(), 4u);
  EXPECT_TRUE(std::any_of(sampled.begin(), sampled.end(), [](auto c) { return c % 2 == 0; }));
  EXPECT_TRUE(std::any_of(sampled.begin(), sampled.end(), [](auto c) { return c % 2 == 1; }));
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  EXPECT_FALSE(t.agreed(t.agree_values()));
  EXPECT_EQ(t.chosen(), Algorithm::shared_memory);
}

// After settling, every kSampleEvery-th call is timed; at the checkpoint the ranks agree on the
// largest drift; beyond kDriftRatio the class is tried again.
TEST(Autotune, DriftBeyondTheRatioStartsTrialsAgain) {
  ClassTuner t;
  ASSERT_TRUE(first_round(t, {1e-6, 2e-6, 3e-6}, {1000, 2000, 3000}));
  ASSERT_EQ(t.chosen(), Algorithm::recursive_doubling);
  // Settled calls: timed only every kSampleEvery-th and at the checkpoint.
  int timed = 0;
  TunerStep step = TunerStep::none;
  std::uint32_t calls = 0;
  while (step != TunerStep::agree) {
    const TrialPick p = t.pick();
    ++calls;
    EXPECT_EQ(p.algorithm, Algorithm::recursive_doubling);
    if (!p.timed) continue;
    ++timed;
    step = t.record(1.2e-6);  // 1.2x: within the ratio
  }
  EXPECT_EQ(calls, ClassTuner::kFirstCheck);
  // The samples, and the checkpoint's call.
  EXPECT_EQ(timed, static_cast<int>((ClassTuner::kFirstCheck - 1) / ClassTuner::kSampleEvery) + 1);
  // 0.2 us above its trial time: less than kDriftMinNs, no drift to report.
  // (The table's choice won the first round: no second opinion either.)
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  // Another rank drifted to 1.4x: still settled, next checkpoint twice as far.
  EXPECT_FALSE(t.agreed(std::vector<std::uint64_t>{1400, 0}));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
  // 2x its trial time; the checkpoint at twice kFirstCheck settled calls.
  EXPECT_EQ(calls_to_checkpoint(t, 2e-6), ClassTuner::kFirstCheck);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{2000, 0}));
  // The second round tries every candidate again; meanwhile nonblocking calls keep the choice.
  expect_second_round(t, 2000, Algorithm::recursive_doubling, {5e-6, 2e-6, 3e-6}, Algorithm::ring);
}

// A challenger that displaced the table's choice in the first round is tried again at the first
// checkpoint however steady its time (a second opinion); the table's choice winning the second
// round keeps it, and no further second opinion follows.
TEST(Autotune, AFirstRoundChallengerGetsASecondOpinion) {
  ClassTuner t;
  ASSERT_TRUE(first_round(t, {3e-6, 1e-6, 3e-6}, {3000, 1000, 3000}));
  ASSERT_EQ(t.chosen(), Algorithm::ring);
  // Steady at its trial time: no drift, but the checkpoint asks for the second opinion.
  EXPECT_EQ(calls_to_checkpoint(t, 1e-6), ClassTuner::kFirstCheck);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{ClassTuner::kSecondOpinion, 0}));
  // This time the table's choice is the fastest: it is kept.
  expect_second_round(t, ClassTuner::kSecondOpinion, Algorithm::ring, {1e-6, 3e-6, 3e-6},
                      Algorithm::recursive_doubling);
  // No second opinion after the second round, whoever won it.
  EXPECT_EQ(calls_to_checkpoint(t, 1e-6), ClassTuner::kFirstCheck);
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  EXPECT_FALSE(t.agreed(std::vector<std::uint64_t>{0, 0}));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
}

// Where one of collx's candidates wins a round among three or more over the MPI library's
// collective, the two run again head to head before the class settles (the winner's curse: the
// fastest of several noisy trial times was, on average, lucky). A winner that was lucky loses
// the confirmation; one that holds settles; the MPI library winning the first round settles at
// once; a later drift tries every candidate of the first round again.
TEST(Autotune, ACollxWinnerOverTheMpiLibraryIsConfirmedHeadToHead) {
  const std::vector<Algorithm> candidates = {Algorithm::shared_memory, Algorithm::binomial_tree,
                                             Algorithm::mpi};
  const auto confirmation = [&](ClassTuner& t, double challenger_seconds) {
    t.start(candidates, 1, ClassTuner::Meetings::never, Algorithm::mpi);
    run_trials(t, {3e-6, 1e-6, 2e-6}, 1);
    EXPECT_TRUE(t.agreed(t.agree_values()));
    // Not settled: the challenger and the MPI library again, the MPI library first.
    EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
    EXPECT_TRUE(t.head_to_head());
    EXPECT_EQ(std::vector<Algorithm>(t.candidates().begin(), t.candidates().end()),
              (std::vector<Algorithm>{Algorithm::mpi, Algorithm::binomial_tree}));
    EXPECT_EQ(run_trials(t, {2e-6, challenger_seconds}, 1), TunerStep::agree);
    EXPECT_TRUE(t.agreed(t.agree_values()));
    EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
    EXPECT_EQ(t.rounds(), 2);
  };
  ClassTuner lucky;
  confirmation(lucky, 2.5e-6);
  EXPECT_EQ(lucky.chosen(), Algorithm::mpi);
  // Slowness is the most over the rounds: the MPI library 2x the fastest in the first round, the
  // fastest in the confirmation; the challenger the fastest, then 1.25x.
  EXPECT_DOUBLE_EQ(lucky.slowness(Algorithm::mpi), 2.0);
  EXPECT_DOUBLE_EQ(lucky.slowness(Algorithm::binomial_tree), 1.25);
  ClassTuner holds;
  confirmation(holds, 1e-6);
  EXPECT_EQ(holds.chosen(), Algorithm::binomial_tree);
  // What a larger class learns of each candidate: its time over its round's fastest, the most
  // over the rounds that timed it; the table's choice, out of the confirmation, keeps the first
  // round's.
  EXPECT_DOUBLE_EQ(holds.slowness(Algorithm::shared_memory), 3.0);
  EXPECT_DOUBLE_EQ(holds.slowness(Algorithm::mpi), 2.0);
  EXPECT_DOUBLE_EQ(holds.slowness(Algorithm::binomial_tree), 1.0);
  EXPECT_EQ(holds.slowness(Algorithm::ring), 0.0);
  // The table's choice winning is confirmed in its own place: the MPI library must beat it.
  ClassTuner table;
  table.start(candidates, 1, ClassTuner::Meetings::never, Algorithm::mpi);
  run_trials(table, {1e-6, 3e-6, 2e-6}, 1);
  EXPECT_TRUE(table.agreed(table.agree_values()));
  EXPECT_EQ(std::vector<Algorithm>(table.candidates().begin(), table.candidates().end()),
            (std::vector<Algorithm>{Algorithm::shared_memory, Algorithm::mpi}));
  run_trials(table, {1e-6, 3e-6}, 1);
  EXPECT_TRUE(table.agreed(table.agree_values()));
  EXPECT_EQ(table.chosen(), Algorithm::shared_memory);
  // Drift after a confirmation (still faster than the MPI library was): every candidate of the
  // first round is tried again.
  EXPECT_EQ(calls_to_checkpoint(table, 2.5e-6), ClassTuner::kFirstCheck);
  EXPECT_TRUE(table.agreed(table.agree_values()));
  EXPECT_EQ(table.phase(), ClassTuner::Phase::trying);
  EXPECT_FALSE(table.head_to_head());
  EXPECT_EQ(table.candidates().size(), candidates.size());
  // The MPI library winning the first round needs no confirmation.
  ClassTuner library;
  library.start(candidates, 1, ClassTuner::Meetings::never, Algorithm::mpi);
  run_trials(library, {3e-6, 2e-6, 1e-6}, 1);
  EXPECT_TRUE(library.agreed(library.agree_values()));
  EXPECT_EQ(library.phase(), ClassTuner::Phase::settled);
  EXPECT_EQ(library.chosen(), Algorithm::mpi);
}

// A challenger that displaced the table's choice and held against the MPI library head to head
// gets one second opinion, not one at every first checkpoint: winning the second opinion's
// rounds the same way again settles the class (it asked again and again, every two rounds, for
// ever, in a broadcast class under IMB through the drop-in).
TEST(Autotune, ASecondOpinionIsAskedOnce) {
  const std::vector<Algorithm> candidates = {Algorithm::shared_memory, Algorithm::binomial_tree,
                                             Algorithm::mpi};
  ClassTuner t;
  t.start(candidates, 1, ClassTuner::Meetings::never, Algorithm::mpi);
  for (int opinion = 0; opinion < 2; ++opinion) {
    // Every candidate: the challenger wins; head to head with the MPI library it holds.
    EXPECT_EQ(run_trials(t, {3e-6, 1e-6, 2e-6}, 1), TunerStep::agree);
    EXPECT_TRUE(t.agreed(t.agree_values()));
    ASSERT_TRUE(t.head_to_head());
    EXPECT_EQ(run_trials(t, {2e-6, 1e-6}, 1), TunerStep::agree);
    EXPECT_TRUE(t.agreed(t.agree_values()));
    ASSERT_EQ(t.phase(), ClassTuner::Phase::settled);
    EXPECT_EQ(t.chosen(), Algorithm::binomial_tree);
    EXPECT_EQ(calls_to_checkpoint(t, 1e-6), ClassTuner::kFirstCheck);
    if (opinion == 0) {
      // The second opinion: every candidate of the first round again.
      EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{ClassTuner::kSecondOpinion, 0}));
      EXPECT_TRUE(t.agreed(t.agree_values()));
      EXPECT_EQ(t.phase(), ClassTuner::Phase::trying);
      EXPECT_EQ(t.candidates().size(), candidates.size());
    }
  }
  // Steady at its trial time after the second opinion: settled, no third round.
  EXPECT_EQ(t.agree_values(), (std::vector<std::uint64_t>{0, 0}));
  EXPECT_FALSE(t.agreed(t.agree_values()));
  EXPECT_EQ(t.phase(), ClassTuner::Phase::settled);
  EXPECT_EQ(t.rounds(), 4);
}

TEST(Autotune, TrialsAreFewerWhereCallsAreLong) {
  EXPECT_GT(trials_for(64), trials_for(std::size_t{1} << 20));
  EXPECT_GT(trials_for(std::size_t{1} << 20), trials_for(std::size_t{1} << 30));
  EXPECT_GE(trials_for(std::size_t{1} << 30), 1);
  // Up to 2 MiB a block (half the trials: two passes) holds more calls than the arena's ring
  // has slots, plus its untimed first call, so that it times waits for room too.
  for (const std::size_t bytes : {std::size_t{128} << 10, std::size_t{2} << 20})
    EXPECT_GT(trials_for(bytes) / 2, SharedArena::kDefaultSlots + 1) << bytes;
}

// One algorithm with two segment sizes (CommState::segment_tuner_for): each trial call carries its
// candidate's segment size, and the class settles on the faster one's, which settled calls run.
TEST(Autotune, SegmentCandidatesCarryTheirSegmentSize) {
  const std::vector<std::size_t> segments = {0, std::size_t{16} << 20};
  for (const std::size_t faster : {0, 1}) {
    ClassTuner t;
    const std::vector<Algorithm> same = {Algorithm::rabenseifner, Algorithm::rabenseifner};
    t.start(same, 5, ClassTuner::Meetings::never, Algorithm::automatic, 0,
            ClassTuner::Wait::warming_library, segments);
    EXPECT_FALSE(t.offers_library());
    std::vector<int> calls(2, 0);
    TunerStep step = TunerStep::none;
    while (step != TunerStep::agree) {
      const TrialPick p = t.pick();
      ASSERT_TRUE(p.timed);
      ASSERT_EQ(p.algorithm, Algorithm::rabenseifner);
      const std::size_t index = p.segment_bytes == 0 ? 0 : 1;
      ASSERT_EQ(p.segment_bytes, segments[index]);
      ++calls[index];
      step = t.record(index == faster ? 0.0008 : 0.0012);
    }
    EXPECT_GT(calls[0], 0);
    EXPECT_GT(calls[1], 0);
    const std::vector<std::uint64_t> values = t.agree_values();
    ASSERT_EQ(values.size(), 2u);
    ASSERT_TRUE(t.agreed(values, values));
    EXPECT_EQ(t.chosen(), Algorithm::rabenseifner);
    EXPECT_EQ(t.chosen_segment(), segments[faster]);
    EXPECT_EQ(t.pick().segment_bytes, segments[faster]);
    EXPECT_EQ(describe_trials(Collective::allreduce, 24, t).find("segments of 16777216 B") !=
                  std::string::npos,
              true);
  }
  // Segment sizes need no margin (the same bits): 1 % faster is faster; on an exact tie the
  // default segments (the first candidate) stay.
  for (const std::uint64_t other : {std::uint64_t{990'000}, std::uint64_t{1'000'000}}) {
    ClassTuner t;
    const std::vector<Algorithm> same = {Algorithm::ring, Algorithm::ring};
    t.start(same, 5, ClassTuner::Meetings::never, Algorithm::automatic, 0,
            ClassTuner::Wait::warming_library, segments);
    TunerStep step = TunerStep::none;
    while (step != TunerStep::agree) {
      (void)t.pick();
      step = t.record(0.001);
    }
    const std::vector<std::uint64_t> times = {1'000'000, other};
    ASSERT_TRUE(t.agreed(times, times));
    EXPECT_EQ(t.chosen_segment(), other < 1'000'000 ? segments[1] : 0u);
  }
}

TEST(Autotune, AlgorithmsKeepTheirMarginBesideSegmentSizes) {
  // Two algorithms 1 % apart: the table's choice stays (the margin).
  ClassTuner t;
  const std::vector<Algorithm> two = {Algorithm::ring, Algorithm::rabenseifner};
  t.start(two, 5);
  TunerStep step = TunerStep::none;
  while (step != TunerStep::agree) {
    (void)t.pick();
    step = t.record(0.001);
  }
  const std::vector<std::uint64_t> close = {1'000'000, 990'000};
  ASSERT_TRUE(t.agreed(close, close));
  EXPECT_EQ(t.chosen(), Algorithm::ring);
  EXPECT_EQ(t.chosen_segment(), 0u);
}

}  // namespace
