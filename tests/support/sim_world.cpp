#include "sim_world.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "shm_arena.hpp"

namespace collx::testing {

void SimTransport::post(detail::Transfer& t, void* buf, int tag, bool) {
  t.handle = t.is_send ? world_.post(true, rank(), t.peer, tag, buf, nullptr, t.bytes)
                       : world_.post(false, t.peer, rank(), tag, nullptr, buf, t.bytes);
}

bool SimTransport::test_or_wait_all(std::span<detail::Transfer* const> ts, bool wait) {
  std::chrono::steady_clock::time_point last_change;
  std::uint64_t last_matched = 0;
  for (bool first = true;; first = false) {
    bool all = true;
    for (detail::Transfer* t : ts) {
      if (!t->pending()) continue;
      if (world_.is_done(t->handle)) {
        t->state = detail::Transfer::State::done;
      } else {
        all = false;
      }
    }
    if (all || !wait) return all;
    const std::uint64_t matched = world_.messages_matched();
    const auto now = std::chrono::steady_clock::now();
    if (first || matched != last_matched) {
      last_matched = matched;
      last_change = now;
    } else if (now - last_change > std::chrono::seconds(5)) {
      throw std::runtime_error("sim: rank " + std::to_string(rank()) +
                               " waited 5 s with no message matched (deadlock)");
    }
    std::this_thread::yield();
  }
}

void SimTransport::abandon(detail::Transfer& t) noexcept {
  world_.withdraw(t.handle);
  t.state = detail::Transfer::State::done;
}

SimWorld::SimWorld(int nranks, std::size_t shm_slot_bytes, int shm_slots) {
  if (shm_slots > 0 && nranks > 1) {
    arena_ = detail::SharedArena::create_local(nranks, shm_slot_bytes, shm_slots);
  }
  for (int r = 0; r < nranks; ++r) {
    transports_.push_back(std::make_unique<SimTransport>(*this, r, nranks));
    transports_.back()->set_shared_arena(arena_);
  }
}

void SimWorld::use_node_arenas(const patterns::NodeLayout& layout, std::size_t slot_bytes,
                               int slots) {
  for (int node = 0; node < layout.nodes(); ++node) {
    const std::span<const int> members = layout.members(node);
    if (members.size() < 2) continue;
    node_arenas_.push_back(
        detail::SharedArena::create_local(static_cast<int>(members.size()), slot_bytes, slots));
    for (int r : members)
      transport(r).set_node_arena(node_arenas_.back());
  }
}

namespace {
std::uint64_t counters_of(detail::SharedArena& arena) {
  std::uint64_t sum = 0;
  for (int r = 0; r < arena.size(); ++r) {
    sum += arena.published(r).load();
    for (int q = 0; q < arena.size(); ++q)
      sum += arena.consumed(r, q).load();
  }
  return sum;
}
}  // namespace

std::uint64_t SimWorld::node_arena_slots() const {
  std::uint64_t sum = 0;
  for (const auto& arena : node_arenas_) {
    for (int r = 0; r < arena->size(); ++r)
      sum += arena->published(r).load();
  }
  return sum;
}

std::uint64_t SimWorld::shm_activity() const {
  std::uint64_t sum = arena_ ? counters_of(*arena_) : 0;
  for (const auto& arena : node_arenas_)
    sum += counters_of(*arena);
  return sum;
}

void SimWorld::withdraw(std::uintptr_t id) {
  std::lock_guard lock(mutex_);
  ++abandoned_;
  for (auto* queues : {&sends_, &recvs_}) {
    for (auto& [key, queue] : *queues) {
      const std::size_t removed = std::erase_if(queue, [&](const Posted& p) { return p.id == id; });
      if (queues == &sends_ && removed > 0) {
        waiting_sends_[{std::get<0>(key), std::get<1>(key)}] -= removed;
      }
    }
  }
}

std::uintptr_t SimWorld::post(bool is_send, int src, int dst, int tag, const void* sbuf, void* rbuf,
                              std::size_t bytes) {
  std::lock_guard lock(mutex_);
  if (src < 0 || src >= size() || dst < 0 || dst >= size()) {
    throw std::logic_error("sim: message between ranks " + std::to_string(src) + " and " +
                           std::to_string(dst) + " of " + std::to_string(size()));
  }
  const std::uintptr_t id = done_.size();
  done_.push_back(0);
  postings_.resize(static_cast<std::size_t>(size()));
  postings_[static_cast<std::size_t>(is_send ? src : dst)].push_back(
      {is_send, is_send ? dst : src, tag, bytes});
  const Key key{src, dst, tag};
  auto& other = is_send ? recvs_[key] : sends_[key];
  if (other.empty()) {
    (is_send ? sends_[key] : recvs_[key]).push_back({id, sbuf, rbuf, bytes});
    if (is_send) {
      max_waiting_sends_ = std::max(max_waiting_sends_, ++waiting_sends_[{src, dst}]);
    }
    return id;
  }
  const Posted match = other.front();
  other.pop_front();
  if (!is_send) --waiting_sends_[{src, dst}];
  const std::size_t send_bytes = is_send ? bytes : match.bytes;
  const std::size_t recv_bytes = is_send ? match.bytes : bytes;
  if (send_bytes != recv_bytes) {
    throw std::logic_error("sim: rank " + std::to_string(src) + " sends " +
                           std::to_string(send_bytes) + " B to rank " + std::to_string(dst) +
                           " which receives " + std::to_string(recv_bytes) + " B (tag " +
                           std::to_string(tag) + ")");
  }
  // Zero-byte messages may carry null buffers, which memcpy must not get (UBSan).
  if (bytes) std::memcpy(is_send ? match.recv_buf : rbuf, is_send ? sbuf : match.send_buf, bytes);
  done_[id] = 1;
  done_[match.id] = 1;
  ++matched_;
  bytes_ += bytes;
  return id;
}

void SimWorld::run(const detail::OpInfo& info, const MakeTask& make) {
  std::vector<std::unique_ptr<detail::Operation>> ops;
  for (int r = 0; r < size(); ++r) {
    ops.push_back(std::make_unique<detail::Operation>(transport(r), info));
    ops.back()->start(make(*ops.back(), r));
  }
  for (;;) {
    const std::uint64_t before = matched_;
    const std::uint64_t shm_before = shm_activity();
    bool all_done = true;
    for (auto& op : ops)
      all_done = op->progress() && all_done;
    if (all_done) break;
    if (matched_ == before && shm_activity() == shm_before) {
      // Nothing matched in a whole pass: one more pass cannot change anything.
      std::string state = "sim: deadlock with " + std::to_string(size()) + " ranks:";
      for (int r = 0; r < size(); ++r) {
        if (!ops[r]->done()) {
          state += " [rank " + std::to_string(r) + ": " + ops[r]->waiting_description() + "]";
          continue;
        }
        try {
          ops[r]->rethrow_if_failed();
        } catch (const std::exception& e) {
          state += " [rank " + std::to_string(r) + " failed: " + e.what() + "]";
        }
      }
      sends_.clear();
      recvs_.clear();
      throw std::runtime_error(state);
    }
  }
  for (auto& op : ops)
    op->rethrow_if_failed();
  // Every rank succeeded: their frames go now, and none may hold a message still in flight
  // (an algorithm that never waits for one of its messages is wrong even when the result is
  // right; its Transfer would cancel the message as it goes).
  const std::uint64_t abandoned_before = abandoned_;
  ops.clear();
  sends_.clear();
  recvs_.clear();
  if (abandoned_ != abandoned_before) {
    throw std::logic_error("sim: " + std::to_string(abandoned_ - abandoned_before) +
                           " message(s) still pending when the algorithm finished");
  }
}

void SimWorld::clear_postings() {
  postings_.assign(static_cast<std::size_t>(size()), {});
}

void SimWorld::run_threads(const Blocking& blocking) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([&, r] {
      try {
        blocking(transport(r), r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  sends_.clear();
  recvs_.clear();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace collx::testing
