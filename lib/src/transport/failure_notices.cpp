#include "failure_notices.hpp"

#include <chrono>
#include <thread>
#include <utility>

#include "collx/error.hpp"
#include "config.hpp"
#include "transport_mpi.hpp"

namespace collx::detail {

// Waits and tests here are PMPI_ calls: libcollx_mpi intercepts MPI_Wait and MPI_Test.

FailureNotices::FailureNotices(MPI_Comm comm, int tag, int rank, int size,
                               const std::uint64_t& next_sequence)
    : comm_(comm), tag_(tag), rank_(rank), size_(size), next_sequence_(next_sequence) {
  if (size_ > 1) post_receive();
}

FailureNotices::~FailureNotices() {
  if (mpi_finalized()) return;
  if (receive_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&receive_);
    PMPI_Wait(&receive_, MPI_STATUS_IGNORE);
  }
  // Notices nobody received (the peers left first) stay with MPI.
  for (Outgoing& o : outgoing_) {
    for (MPI_Request& r : o.requests)
      if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
}

void FailureNotices::post_receive() {
  if (MPI_Irecv(&incoming_, sizeof(Notice), MPI_BYTE, MPI_ANY_SOURCE, tag_, comm_, &receive_) !=
      MPI_SUCCESS) {
    // Without the receive this rank cannot hear notices; its waits still end with COLLX_TIMEOUT.
    receive_ = MPI_REQUEST_NULL;
  }
}

void FailureNotices::poll(bool completed) {
  std::lock_guard lock(mutex_);
  if (completed || (!revoked_ && received())) handle_arrivals();
  // The notices sent whose sends have completed go.
  std::erase_if(outgoing_, [](Outgoing& o) {
    int flag = 0;
    return PMPI_Testall(static_cast<int>(o.requests.size()), o.requests.data(), &flag,
                        MPI_STATUSES_IGNORE) == MPI_SUCCESS &&
           flag;
  });
  if (revoked_) throw_revoked("");
}

void FailureNotices::handle_arrivals() {
  // The receive completed: take its notice, repost, and take every notice already waiting.
  do {
    const Notice notice = incoming_;
    post_receive();
    // Not a notice cannot happen (the tag is ours); the reason is kept 0-terminated.
    if (notice.magic == Notice::kMagic && notice.reason[sizeof(notice.reason) - 1] == '\0')
      judge(notice);
  } while (received());
  judge_deferred();
}

bool FailureNotices::received() {
  int flag = 0;
  return receive_ != MPI_REQUEST_NULL &&
         PMPI_Test(&receive_, &flag, MPI_STATUS_IGNORE) == MPI_SUCCESS && flag;
}

void FailureNotices::judge(const Notice& n) {
  if (n.kind == Kind::revoked) {
    revoke(n, /*tell_others=*/false);  // its sender told everybody
    return;
  }
  // A local failure of call #S at rank n.rank.
  if (const auto it = awaited_.find(n.sequence); it != awaited_.end()) {
    // This rank failed the same call before sending anything: an answer.
    if (--it->second <= 0) awaited_.erase(it);
    return;
  }
  if (n.sequence < next_sequence_) {
    // This rank took part in that call (or finished it): its result is not what the call
    // means, and whoever waits on the failed rank waits for ever.
    revoke(n, /*tell_others=*/true);
    return;
  }
  deferred_.push_back(n);  // about a call this rank has not reached yet
}

void FailureNotices::judge_deferred() {
  if (deferred_.empty()) return;
  for (const Notice& n : std::exchange(deferred_, {}))
    judge(n);
}

void FailureNotices::revoke(const Notice& cause, bool tell_others) {
  if (revoked_) return;
  revoked_ = true;
  cause_ = cause;
  cause_.kind = Kind::revoked;
  awaited_.clear();
  deferred_.clear();
  if (tell_others) announce(cause_);
}

void FailureNotices::announce(const Notice& notice) noexcept {
  if (size_ <= 1) return;
  try {
    Outgoing& o = outgoing_.emplace_back(Outgoing{
        notice, std::vector<MPI_Request>(static_cast<std::size_t>(size_), MPI_REQUEST_NULL)});
    for (int peer = 0; peer < size_; ++peer) {
      // An error here leaves that peer to its COLLX_TIMEOUT; there is no one to tell.
      if (peer != rank_)
        MPI_Isend(&o.wire, sizeof(Notice), MPI_BYTE, peer, tag_, comm_, &o.requests[peer]);
    }
  } catch (...) {
    // Out of memory while failing: the peers are left to their timeouts.
  }
}

void FailureNotices::failed_locally(std::uint64_t sequence, Collective collective,
                                    const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (size_ <= 1 || revoked_) return;
  awaited_[sequence] = size_ - 1;
  announce({Kind::local, rank_, collective, sequence, reason});
  judge_deferred();
}

void FailureNotices::failed_in_flight(std::uint64_t sequence, Collective collective,
                                      const std::exception_ptr& error) noexcept {
  std::string reason;
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // A COLLX_CHECK mismatch fails every rank together (one without COLLX_CHECK is this rank's
    // alone, refuse_foreign_messages, and the others must hear of it); a revoke came from a
    // notice, whose sender told everybody.
    if ((e.code() == ErrorCode::mismatch && config().check) || e.code() == ErrorCode::revoked)
      return;
    reason = std::string(to_string(e.code())) + ": " + e.detail();
  } catch (const std::exception& e) {
    reason = e.what();
  } catch (...) {
    reason = "unknown error";
  }
  std::lock_guard lock(mutex_);
  revoke({Kind::revoked, rank_, collective, sequence, reason}, /*tell_others=*/true);
}

void FailureNotices::settle(Collective collective) {
  std::unique_lock lock(mutex_);
  const double timeout = config().timeout_seconds;
  const auto start = std::chrono::steady_clock::now();
  while (!revoked_ && !awaited_.empty() && receive_ != MPI_REQUEST_NULL) {
    // Every other rank answers a local failure at its next wait: a local notice or a revoke.
    int flag = 0;
    if (PMPI_Test(&receive_, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
    if (flag) {
      handle_arrivals();
      continue;
    }
    if (timeout > 0) {
      const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
      if (waited.count() > timeout) {
        const std::uint64_t call = awaited_.begin()->first;
        const std::string why = "no answer for " + std::to_string(waited.count()) +
                                " s (COLLX_TIMEOUT) from the other ranks about call #" +
                                std::to_string(call) +
                                ", which failed on this rank before sending anything";
        revoke({Kind::revoked, rank_, collective, call, why}, /*tell_others=*/true);
        throw Error(ErrorCode::timeout, to_string(collective), rank_, why);
      }
    }
    lock.unlock();
    std::this_thread::yield();
    lock.lock();
  }
  if (revoked_) throw_revoked(to_string(collective));
}

void FailureNotices::throw_revoked(std::string_view collective) const {
  const std::string who =
      cause_.rank == rank_ ? "this rank" : "rank " + std::to_string(cause_.rank);
  throw Error(ErrorCode::revoked, collective, rank_,
              who + " failed in " + std::string(to_string(cause_.collective)) + " #" +
                  std::to_string(cause_.sequence) + ": " + cause_.reason +
                  " (the communicator is revoked: every call on it fails; create a new one)");
}

}  // namespace collx::detail
