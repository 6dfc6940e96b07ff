// The UCX transport on real MPI ranks: context ids, matching across communicators, sources and
// tags, in-order matching per (source, tag), messages split into pieces, errors.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "collx/collx.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "mpi_test_util.hpp"
#include "transport_ucx.hpp"

namespace {

using collx::DataType;
using collx::ReduceOp;
using collx::detail::Transfer;
using collx::detail::UcxTransport;
using collx::testing::all_ranks;

// Every communicator created in these tests uses UCX, whatever COLLX_TRANSPORT says.
class UcxConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = collx::detail::config();
    collx::detail::Config c = saved_;
    c.transport = collx::TransportChoice::ucx;
    collx::detail::set_config(c);
  }
  void TearDown() override { collx::detail::set_config(saved_); }

 private:
  collx::detail::Config saved_;
};

std::uint64_t context_id_of(const collx::Communicator& comm) {
  auto* ucx = dynamic_cast<UcxTransport*>(collx::detail::state_of(comm).transport.get());
  return ucx != nullptr ? ucx->context_id() : 0;
}

// A byte pattern that names its message.
std::vector<unsigned char> pattern(std::size_t bytes, int source, int message) {
  std::vector<unsigned char> out(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    out[i] = static_cast<unsigned char>(i * 31 + static_cast<std::size_t>(source) * 7 +
                                        static_cast<std::size_t>(message) * 101);
  return out;
}

TEST(UcxTag, FieldsDoNotOverlap) {
  using collx::detail::make_ucx_tag;
  EXPECT_EQ(make_ucx_tag(0, 0, 32766), 32766u);
  EXPECT_EQ(make_ucx_tag(0, 1, 0), std::uint64_t{1} << collx::detail::kUcxTagBits);
  EXPECT_EQ(make_ucx_tag(1, 0, 0), std::uint64_t{1} << 39);
  const std::uint64_t max_context = (std::uint64_t{1} << collx::detail::kUcxContextBits) - 1;
  const std::uint64_t max_rank = (std::uint64_t{1} << collx::detail::kUcxRankBits) - 1;
  EXPECT_EQ(make_ucx_tag(max_context, max_rank, 32767), ~std::uint64_t{0});
}

TEST_F(UcxConfig, CommunicatorsUseUcxWithAContextIdAgreedByAllRanks) {
  collx::Communicator world(MPI_COMM_WORLD);
  ASSERT_EQ(collx::detail::state_of(world).transport->name(), "ucx");
  MPI_Comm reversed_comm;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world.size() - world.rank(), &reversed_comm);
  collx::Communicator reversed(reversed_comm);
  MPI_Comm half_comm;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank() % 2, world.rank(), &half_comm);
  collx::Communicator half(half_comm);

  const std::uint64_t ids[3] = {context_id_of(world), context_id_of(reversed), context_id_of(half)};
  EXPECT_NE(ids[0], 0u);
  // Later communicators of a process get larger ids.
  EXPECT_LT(ids[0], ids[1]);
  EXPECT_LT(ids[1], ids[2]);
  // The same on every rank of each communicator.
  EXPECT_TRUE(collx::testing::identical_on_all_ranks(&ids[0], sizeof ids[0], MPI_COMM_WORLD));
  EXPECT_TRUE(collx::testing::identical_on_all_ranks(&ids[1], sizeof ids[1], reversed_comm));
  EXPECT_TRUE(collx::testing::identical_on_all_ranks(&ids[2], sizeof ids[2], half_comm));
  MPI_Comm_free(&half_comm);
  MPI_Comm_free(&reversed_comm);
}

// Two communicators over the same processes, one with the ranks in reverse order, start
// operations with the same sequence numbers (so the same collx tags and, pairwise, the same
// peers): only the context id keeps their messages apart.
TEST_F(UcxConfig, InterleavedOperationsOnTwoCommunicatorsDoNotCrossMatch) {
  collx::Communicator world(MPI_COMM_WORLD);
  MPI_Comm reversed_comm;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world.size() - world.rank(), &reversed_comm);
  collx::Communicator reversed(reversed_comm);
  MPI_Comm half_comm;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank() % 2, world.rank(), &half_comm);
  collx::Communicator half(half_comm);
  const int p = world.size();
  const double r = world.rank();

  const collx::Algorithm algorithms[] = {
      collx::Algorithm::ring, collx::Algorithm::recursive_doubling, collx::Algorithm::rabenseifner};
  for (int round = 0; round < 6; ++round) {
    collx::Options options;
    options.algorithm = algorithms[round % 3];
    options.segment_bytes = 4096;  // many segments in flight: many messages with equal tags
    const std::size_t count = round % 2 ? 70001 : 37;
    std::vector<double> a(count, r + 1);           // world: sum of (r + 1)
    std::vector<double> b(count, 1000 * (r + 1));  // reversed: the same shape, other values
    std::vector<double> c(count, -(r + 1));        // half
    collx::Request ra =
        world.iallreduce(a.data(), a.data(), count, DataType::float64, ReduceOp::sum, options);
    collx::Request rb =
        reversed.iallreduce(b.data(), b.data(), count, DataType::float64, ReduceOp::sum, options);
    collx::Request rc =
        half.iallreduce(c.data(), c.data(), count, DataType::float64, ReduceOp::max, options);
    // Complete them in an order that differs between ranks and rounds.
    if ((world.rank() + round) % 2 == 0) {
      rb.wait();
      rc.wait();
      ra.wait();
    } else {
      ra.wait();
      rc.wait();
      rb.wait();
    }
    // Blocking calls while nothing else is in flight (the in-place path); the sequence numbers
    // of `world` and `reversed` stay equal.
    for (collx::Communicator* comm : {&world, &reversed}) {
      std::int64_t one = 1;
      comm->allreduce(collx::in_place, &one, 1, DataType::int64, ReduceOp::sum);
      ASSERT_EQ(one, p);
    }
    const double world_sum = p * (p + 1) / 2.0;
    const double half_max = -(world.rank() % 2 + 1);  // the smallest rank of my half, negated
    bool ok = true;
    for (std::size_t i = 0; i < count; ++i) {
      ok = ok && a[i] == world_sum && b[i] == 1000 * world_sum && c[i] == half_max;
    }
    ASSERT_TRUE(all_ranks(ok)) << "round " << round << ": a[0]=" << a[0] << " b[0]=" << b[0]
                               << " c[0]=" << c[0];
  }
  MPI_Comm_free(&half_comm);
  MPI_Comm_free(&reversed_comm);
}

// The transport itself, between ranks paired as (0,1), (2,3), ... (and the last one alone
// with itself when the count is odd). A small piece size makes the larger messages travel in
// several pieces.
class UcxTransportPairs : public ::testing::Test {
 protected:
  static constexpr std::size_t kPiece = 4096;
  void SetUp() override {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    transport_ = std::make_unique<UcxTransport>(comm_, kPiece);
    peer_ = rank_ ^ 1;
    if (peer_ >= size_) peer_ = rank_;
  }
  void TearDown() override {
    transport_.reset();
    MPI_Comm_free(&comm_);
  }

  void wait(std::vector<Transfer>& transfers) {
    std::vector<Transfer*> pointers;
    for (auto& t : transfers)
      pointers.push_back(&t);
    transport_->wait_all(pointers);
    for (auto& t : transfers)
      EXPECT_TRUE(t.done());
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int peer_ = 0;
  std::unique_ptr<UcxTransport> transport_;
};

TEST_F(UcxTransportPairs, MessagesWithTheSameTagMatchInPostingOrderWhateverTheirSize) {
  // Sizes around the piece size, and one of many pieces with a ragged tail.
  const std::size_t sizes[] = {1, kPiece - 1, kPiece, kPiece + 1, 3 * kPiece, 40 * kPiece + 17, 0};
  constexpr int kTag = 5;
  std::vector<std::vector<unsigned char>> received;
  std::vector<std::vector<unsigned char>> sent;
  for (int m = 0; m < static_cast<int>(std::size(sizes)); ++m) {
    received.emplace_back(sizes[m], 0);
    sent.push_back(pattern(sizes[m], rank_, m));
  }
  // Half the receives before the sends, half after: some messages arrive unexpected.
  std::vector<Transfer> recvs(std::size(sizes));
  std::vector<Transfer> sends(std::size(sizes));
  const std::size_t early = std::size(sizes) / 2;
  for (std::size_t m = 0; m < early; ++m)
    transport_->post_message(recvs[m], false, received[m].data(), sizes[m], peer_, kTag);
  MPI_Barrier(comm_);
  for (std::size_t m = 0; m < std::size(sizes); ++m)
    transport_->post_message(sends[m], true, sent[m].data(), sizes[m], peer_, kTag);
  for (std::size_t m = early; m < std::size(sizes); ++m)
    transport_->post_message(recvs[m], false, received[m].data(), sizes[m], peer_, kTag);
  wait(sends);
  wait(recvs);
  for (std::size_t m = 0; m < std::size(sizes); ++m)
    EXPECT_EQ(received[m], pattern(sizes[m], peer_, static_cast<int>(m))) << "message " << m;
}

TEST_F(UcxTransportPairs, DifferentTagsAreMatchedByTagNotByOrder) {
  constexpr int kCount = 8;
  std::vector<std::vector<unsigned char>> sent;
  std::vector<std::vector<unsigned char>> received(kCount, std::vector<unsigned char>(100));
  for (int m = 0; m < kCount; ++m)
    sent.push_back(pattern(100, rank_, m));
  std::vector<Transfer> sends(kCount);
  std::vector<Transfer> recvs(kCount);
  // Sent with tags 0..7, received in reverse tag order.
  for (int m = 0; m < kCount; ++m)
    transport_->post_message(sends[static_cast<std::size_t>(m)], true,
                             sent[static_cast<std::size_t>(m)].data(), 100, peer_, m);
  for (int m = kCount - 1; m >= 0; --m)
    transport_->post_message(recvs[static_cast<std::size_t>(m)], false,
                             received[static_cast<std::size_t>(m)].data(), 100, peer_, m);
  wait(recvs);
  wait(sends);
  for (int m = 0; m < kCount; ++m)
    EXPECT_EQ(received[static_cast<std::size_t>(m)], pattern(100, peer_, m)) << "tag " << m;
}

TEST_F(UcxTransportPairs, LargeExchangeAndTestAll) {
  std::vector<unsigned char> out = pattern(10 * kPiece + 3, rank_, 1);
  std::vector<unsigned char> in(out.size());
  {
    std::vector<Transfer> sends(1), recvs(1);
    transport_->post_message(recvs[0], false, in.data(), in.size(), peer_, 9);
    transport_->post_message(sends[0], true, out.data(), out.size(), peer_, 9);
    wait(recvs);
    wait(sends);
  }
  EXPECT_EQ(in, pattern(out.size(), peer_, 1));
  Transfer recv;
  Transfer send;
  transport_->post_message(recv, false, in.data(), 64, peer_, 10);
  transport_->post_message(send, true, out.data(), 64, peer_, 10);
  Transfer* both[2] = {&recv, &send};
  while (!transport_->test_all(both)) {
  }
  EXPECT_TRUE(recv.done() && send.done());
  const std::vector<unsigned char> expected = pattern(out.size(), peer_, 1);
  EXPECT_TRUE(std::equal(in.begin(), in.begin() + 64, expected.begin()));
}

TEST_F(UcxTransportPairs, AReceiveTooSmallIsATransportErrorWithUcxsReason) {
  std::vector<unsigned char> out = pattern(64, rank_, 0);
  std::vector<unsigned char> in(16);
  Transfer send;
  Transfer recv;
  transport_->post_message(send, true, out.data(), out.size(), peer_, 3);
  MPI_Barrier(comm_);  // the message may already be there when the receive is posted
  Transfer* ts[2] = {&send, &recv};
  try {
    // UCX reports it when the receive is posted (the message was there) or when it completes.
    transport_->post_message(recv, false, in.data(), in.size(), peer_, 3);
    transport_->wait_all(ts);
    ADD_FAILURE() << "a 64-byte message fit a 16-byte receive";
  } catch (const collx::Error& e) {
    EXPECT_EQ(e.code(), collx::ErrorCode::transport) << e.what();
    EXPECT_NE(std::string(e.what()).find("ucp_tag_recv_nbx of 16 B from rank"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("runcated"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(recv.pending());
  transport_->wait_all(std::span<Transfer* const>(ts, 1));  // the send completes regardless
  MPI_Barrier(comm_);
}

}  // namespace
