// SimWorld: p ranks in one thread, each with its own transport, running the real algorithm
// tasks. Sends are rendezvous (complete only when matched by a receive), the strictest
// behaviour MPI allows, so an algorithm that relies on buffering deadlocks here and the
// deadlock is reported instead of hanging.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "node_layout.hpp"
#include "operation.hpp"
#include "transport.hpp"

namespace collx::testing {

class SimWorld;

class SimTransport final : public detail::Transport {
 public:
  SimTransport(SimWorld& world, int rank, int size) : Transport(rank, size), world_(world) {}
  std::string_view name() const override { return "sim"; }
  void post(detail::Transfer& t, void* buf, int tag, bool device) override;
  void abandon(detail::Transfer& t) noexcept override;
  // Waiting, with ranks on threads (SimWorld::run_threads): waits for the peers' threads, and
  // fails after a few seconds in which no message matched anywhere (a deadlock).
  bool test_or_wait_all(std::span<detail::Transfer* const> ts, bool wait) override;

 private:
  SimWorld& world_;
};

class SimWorld {
 public:
  // The ranks share an in-process SharedArena of `shm_slots` entries of `shm_slot_bytes`
  // (small, so the shared_memory algorithms cut even small buffers into slots and wrap their
  // rings); 0 entries: no arena, as for ranks on different nodes.
  explicit SimWorld(int nranks, std::size_t shm_slot_bytes = 512, int shm_slots = 3);
  int size() const { return static_cast<int>(transports_.size()); }
  SimTransport& transport(int rank) { return *transports_[static_cast<std::size_t>(rank)]; }

  // Starts make(op, rank) on every rank and drives them all to completion. Throws
  // std::runtime_error on a deadlock (a full pass in which no message matched) and rethrows
  // the first rank's algorithm error.
  using MakeTask = std::function<detail::Task(detail::Operation&, int rank)>;
  void run(const detail::OpInfo& info, const MakeTask& make);

  // Runs blocking(transport, rank) for every rank, each on a thread of its own (blocking calls
  // run to completion in place, which cannot share one thread). Rethrows the first rank's error.
  using Blocking = std::function<void(detail::Transport&, int rank)>;
  void run_threads(const Blocking& blocking);

  // One posted message, as a rank posted it.
  struct Posting {
    bool is_send;
    int peer;
    int tag;
    std::size_t bytes;
    bool operator==(const Posting&) const = default;
  };
  // Every message each rank posted since the last clear_postings(), in posting order.
  const std::vector<std::vector<Posting>>& postings() const { return postings_; }
  void clear_postings();

  std::uint64_t messages_matched() const { return matched_; }
  // The most sends one rank had posted to one peer at once for which that peer had posted no
  // receive yet (on any tag): how far a schedule's sends run ahead of its peer's receives.
  std::size_t max_waiting_sends() const { return max_waiting_sends_; }
  // Postings withdrawn because their Transfer went while pending (an operation that failed):
  // run() fails when a run that succeeded left any.
  std::uint64_t messages_abandoned() const { return abandoned_; }
  // The ranks' shared arena (null without one).
  detail::SharedArena* shared_arena() const { return arena_.get(); }
  // Gives the ranks of each node of `layout` (already set on the transports) with more than
  // one rank an arena of their own (Transport::node_arena), as real nodes have.
  void use_node_arenas(const patterns::NodeLayout& layout, std::size_t slot_bytes = 512,
                       int slots = 3);
  // Slots published through the node arenas so far (0 without any).
  std::uint64_t node_arena_slots() const;
  std::uint64_t bytes_moved() const { return bytes_; }

 private:
  friend class SimTransport;
  struct Posted {
    std::uintptr_t id;
    const void* send_buf;
    void* recv_buf;
    std::size_t bytes;
  };
  using Key = std::tuple<int, int, int>;  // source, destination, tag
  std::uintptr_t post(bool is_send, int src, int dst, int tag, const void* sbuf, void* rbuf,
                      std::size_t bytes);
  // Withdraws an unmatched posting (a no-op for a matched one).
  void withdraw(std::uintptr_t id);
  bool is_done(std::uintptr_t id) const {
    std::lock_guard lock(mutex_);
    return done_[id] != 0;
  }

  // Sum of the arena's counters: the shared_memory algorithms' progress, as matched_ is the
  // messages'.
  std::uint64_t shm_activity() const;

  std::vector<std::unique_ptr<SimTransport>> transports_;
  std::shared_ptr<detail::SharedArena> arena_;
  std::vector<std::shared_ptr<detail::SharedArena>> node_arenas_;
  std::map<Key, std::deque<Posted>> sends_;
  std::map<Key, std::deque<Posted>> recvs_;
  std::vector<std::uint8_t> done_;
  std::vector<std::vector<Posting>> postings_;
  // Held by post() and test_or_wait_all() while ranks run on threads.
  mutable std::mutex mutex_;
  std::atomic<std::uint64_t> matched_{0};
  std::uint64_t bytes_ = 0;
  std::atomic<std::uint64_t> abandoned_{0};
  // Unmatched sends per (source, destination), and their maximum so far.
  std::map<std::pair<int, int>, std::size_t> waiting_sends_;
  std::size_t max_waiting_sends_ = 0;
};

}  // namespace collx::testing
