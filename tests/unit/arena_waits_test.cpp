// The arena's waits (SharedArena::spin, yield_until) where every rank has its core: a condition
// met is seen at the first poll or the first after it is met; one never met is given up after
// the spin's budget in time, whatever a PAUSE costs on the machine.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "shm_arena.hpp"

namespace {

using collx::detail::SharedArena;
using Clock = std::chrono::steady_clock;

TEST(ArenaWaits, AConditionAlreadyMetIsSeenAtTheFirstPoll) {
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  int polls = 0;
  EXPECT_TRUE(arena->spin([&] { return ++polls >= 1; }));
  EXPECT_EQ(polls, 1);
}

TEST(ArenaWaits, AConditionMetAfterManyPollsEndsTheSpinThere) {
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  // Past the first clock read (at the 128th poll) and its yield, before the second (the 256th):
  // met there whatever the yield took (on a loaded machine a yield can outlast the budget).
  int polls = 0;
  EXPECT_TRUE(arena->spin([&] { return ++polls >= 200; }));
  EXPECT_EQ(polls, 200);
}

TEST(ArenaWaits, AConditionNeverMetIsGivenUpAfterTheBudget) {
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  int polls = 0;
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(arena->spin([&] {
    ++polls;
    return false;
  }));
  const Clock::duration spent = Clock::now() - start;
  EXPECT_GE(spent, SharedArena::kSpinBudget);
  // Given up, not spinning on: a generous bound for a loaded machine's preemptions.
  EXPECT_LT(spent, std::chrono::seconds(2));
  EXPECT_GT(polls, 128);
}

TEST(ArenaWaits, YieldingUntilACounterIsForOversubscribedNodesOnly) {
  const std::shared_ptr<SharedArena> arena = SharedArena::create_local(2);
  ASSERT_TRUE(arena);
  // An arena made in one process is not oversubscribed: yield_until declines at once, reached or
  // not, and the caller goes on to its own wait (a counter of the arena's: rank 0's turn, 0).
  const SharedArena::Counter& turn = arena->turn(0);
  EXPECT_FALSE(arena->yield_until(turn, 0));
  EXPECT_FALSE(arena->yield_until(turn, 1));
  // The wait it goes on to: a counter reached is seen at once, one not reached after the limit.
  EXPECT_TRUE(arena->wait_for(turn, 0, std::chrono::microseconds(10)));
  const Clock::time_point start = Clock::now();
  EXPECT_FALSE(arena->wait_for(turn, 1, std::chrono::microseconds(10)));
  EXPECT_GE(Clock::now() - start, SharedArena::kSpinBudget);
}

}  // namespace
