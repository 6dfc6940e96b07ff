// How a producer chooses between plain and streaming stores into its ring (ring_stores.hpp),
// fed with made-up copy times.
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>

#include "ring_stores.hpp"

namespace {

using collx::detail::RingStorePolicy;
using collx::detail::RingStores;
using Kind = RingStores::Kind;
using std::chrono::microseconds;

constexpr std::size_t kPiece = std::size_t{512} << 10;

// Writes `slots` slots the way `stores` says, each taking `plain` or `streaming`; returns
// how many were written with streaming stores.
int write(RingStores& stores, int slots, microseconds plain, microseconds streaming,
          std::size_t bytes = kPiece) {
  int streamed = 0;
  for (int i = 0; i < slots; ++i) {
    const Kind kind = stores.next(bytes);
    streamed += kind == Kind::streaming ? 1 : 0;
    stores.record(kind, bytes, kind == Kind::plain ? plain : streaming);
  }
  return streamed;
}

TEST(RingStores, PlainWhileItIsFast) {
  RingStores stores;
  EXPECT_EQ(stores.next(kPiece), Kind::plain);
  // Streaming is tried once early, then again only after longer and longer runs.
  const int streamed = write(stores, 2000, microseconds(15), microseconds(19));
  EXPECT_EQ(stores.current(), Kind::plain);
  EXPECT_GE(streamed, 1);
  EXPECT_LE(streamed, 8);
}

TEST(RingStores, SwitchesToStreamingWhenPlainStoresTurnSlowAndBack) {
  RingStores stores;
  write(stores, 100, microseconds(15), microseconds(19));
  ASSERT_EQ(stores.current(), Kind::plain);
  // The slow state: plain 213 us a slot, streaming 18 us. Within a few slots the producer
  // writes with streaming stores, and tries plain rarely.
  write(stores, 8, microseconds(213), microseconds(18));
  EXPECT_EQ(stores.current(), Kind::streaming);
  const int streamed = write(stores, 1000, microseconds(213), microseconds(18));
  EXPECT_GE(streamed, 990);
  // Back to the fast state: the next trial of plain stores brings them back.
  write(stores, 1100, microseconds(15), microseconds(19));
  EXPECT_EQ(stores.current(), Kind::plain);
}

TEST(RingStores, StartsInTheSlowStateAndLeavesItAtTheSecondPiece) {
  RingStores stores;
  EXPECT_EQ(write(stores, 1, microseconds(213), microseconds(18)), 0);
  EXPECT_EQ(stores.next(kPiece), Kind::streaming);
  write(stores, 1, microseconds(213), microseconds(18));
  EXPECT_EQ(stores.current(), Kind::streaming);
}

TEST(RingStores, KeepsPlainUnlessClearlySlower) {
  // Streaming costs the readers a copy from memory, so a small edge does not switch; plain
  // copies at twice streaming's time and more do (the VM's far state: docs/AUTO.md).
  RingStores stores;
  write(stores, 500, microseconds(25), microseconds(19));
  EXPECT_EQ(stores.current(), Kind::plain);
  write(stores, 500, microseconds(35), microseconds(19));
  EXPECT_EQ(stores.current(), Kind::plain);
  write(stores, 500, microseconds(45), microseconds(19));
  EXPECT_EQ(stores.current(), Kind::streaming);
}

TEST(RingStores, OnePreemptedCopyDoesNotSwitch) {
  RingStores stores;
  write(stores, 50, microseconds(15), microseconds(19));
  stores.record(Kind::plain, kPiece, microseconds(5000));
  EXPECT_EQ(stores.current(), Kind::plain);
}

TEST(RingStores, SmallPiecesFollowTheLargeOnesWithoutBeingTimed) {
  RingStores stores;
  write(stores, 10, microseconds(213), microseconds(18));
  ASSERT_EQ(stores.current(), Kind::streaming);
  // Small slots, however fast plain stores look for them, neither try nor change the kind.
  const std::size_t small = RingStores::kTimedBytes - 64;
  EXPECT_FALSE(stores.timed(small));
  EXPECT_TRUE(stores.timed(kPiece));
  EXPECT_EQ(write(stores, 5000, microseconds(0), microseconds(1), small), 5000);
  EXPECT_EQ(stores.current(), Kind::streaming);
}

TEST(RingStores, PiecesThatGoAnotherWayStillLeadToTrials) {
  RingStores stores;
  write(stores, 10, microseconds(213), microseconds(18));
  ASSERT_EQ(stores.current(), Kind::streaming);
  // While streaming is chosen, slots handed over directly are counted, and plain stores are
  // still due for a trial within the longest interval.
  int untimed = 0;
  while (stores.next(kPiece) == Kind::streaming && untimed < 2000) {
    stores.count_untimed();
    ++untimed;
  }
  EXPECT_LE(untimed, static_cast<int>(RingStores::kLongestTrialInterval));
  stores.record(Kind::plain, kPiece, microseconds(15));
  EXPECT_EQ(stores.current(), Kind::plain);
}

TEST(RingStores, RecordSaysWhenTheChoiceChangesAndShowsItsEstimates) {
  RingStores stores;
  EXPECT_FALSE(stores.record(Kind::plain, kPiece, microseconds(213)));
  EXPECT_TRUE(stores.record(Kind::streaming, kPiece, microseconds(18)));
  EXPECT_FALSE(stores.record(Kind::streaming, kPiece, microseconds(18)));
  EXPECT_NEAR(stores.best_ns_per_kib(Kind::streaming), 18000.0 / 512, 0.01);
  EXPECT_NEAR(stores.best_ns_per_kib(Kind::plain), 213000.0 / 512, 0.01);
}

TEST(RingStores, NamedPolicyIsKept) {
  RingStores plain(RingStorePolicy::plain);
  EXPECT_FALSE(plain.timed(kPiece));  // nothing to choose, nothing to time
  EXPECT_EQ(write(plain, 100, microseconds(213), microseconds(18)), 0);
  RingStores streaming(RingStorePolicy::streaming);
  EXPECT_EQ(write(streaming, 100, microseconds(15), microseconds(19)), 100);
  EXPECT_EQ(streaming.next(64), Kind::streaming);
}

}  // namespace
