// FailureNotices: how one rank's failure reaches the other ranks of a communicator.
//
// MPI cannot interrupt a peer's wait, so a rank that throws inside a collective would leave the
// others waiting for ever. As in ULFM and NCCL's asynchronous errors, a failing rank notifies the
// others on a side channel, where each keeps one receive posted that the transports' waits include.
//  - local (call #S): this rank's call #S failed an argument check before sending anything. A
//    rank that failed #S the same way counts it as an answer; one that took part in #S revokes
//    the communicator. The failing rank awaits every answer at its next call: where all ranks
//    reject the same arguments the communicator stays usable.
//  - revoked (call #S): this rank's call #S failed after it started. Every rank that hears it
//    revokes the communicator: waits in flight and every later call end with
//    ErrorCode::revoked naming the failed rank and its reason.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "collx/algorithm.hpp"

namespace collx::detail {

class FailureNotices {
 public:
  // Notices travel on `comm` with `tag` (used by nothing else there); posts the receive.
  // `next_sequence`: the communicator's count of calls started.
  FailureNotices(MPI_Comm comm, int tag, int rank, int size, const std::uint64_t& next_sequence);
  ~FailureNotices();

  // The receive the transports add to their waits; when a wait completes it, call poll(true).
  MPI_Request* request() { return &receive_; }
  // Handles the notices that arrived (`completed`: a transport's wait completed the receive) and
  // reposts; throws ErrorCode::revoked when the communicator is (or becomes) revoked.
  void poll(bool completed = false);

  // At the start of every call: nothing to do unless this rank failed a call locally (then
  // waits for the other ranks' answers) or the communicator is revoked (throws).
  void before_call(Collective collective) {
    if (!quiet()) [[unlikely]]
      settle(collective);
  }
  // This rank's call #sequence (the next number, which the call now takes) failed an argument
  // check before sending anything: tells the others.
  void failed_locally(std::uint64_t sequence, Collective collective, const std::string& reason);
  // This rank's operation #sequence failed after it started: revokes the communicator and
  // tells the others, unless every rank sees the error together (COLLX_CHECK) or it came from
  // a notice. Never throws.
  void failed_in_flight(std::uint64_t sequence, Collective collective,
                        const std::exception_ptr& error) noexcept;

  bool revoked() const { return revoked_; }
  // Whether notices may still arrive: this rank awaits answers about a call it failed locally, or
  // holds notices about calls it never made. Its communicator is then not freed (~CommState): a
  // notice left unmatched there would match the notices' receive, or a program's, on a later
  // communicator that reuses the freed one's context.
  bool awaiting() const { return !awaited_.empty() || !deferred_.empty(); }
  // Nothing for before_call to settle: the communicator stands and no answer is awaited.
  bool quiet() const { return !revoked_ && awaited_.empty(); }

 private:
  enum class Kind : std::uint32_t { local = 1, revoked = 2 };
  // As it travels (the reason cut to fit, 0-terminated).
  struct Notice {
    std::uint32_t magic;
    Kind kind;
    std::int32_t rank;
    Collective collective;
    std::uint64_t sequence;
    char reason[232];
    static constexpr std::uint32_t kMagic = 0x636f6c78;  // "colx"
    Notice(Kind k = Kind::local, int r = -1, Collective c = {}, std::uint64_t s = 0,
           std::string_view why = {})
        : magic(kMagic), kind(k), rank(r), collective(c), sequence(s), reason{} {
      why.copy(reason, std::min(why.size(), sizeof(reason) - 1));
    }
  };
  static_assert(sizeof(Notice) == 256);

  void settle(Collective collective);
  // Handles the notice that completed the receive, and every one already queued behind it.
  void handle_arrivals();
  // Whether the posted receive has completed (MPI_Test).
  bool received();
  void judge(const Notice& notice);
  void judge_deferred();
  void revoke(const Notice& cause, bool tell_others);
  void announce(const Notice& notice) noexcept;
  void post_receive();
  // ErrorCode::revoked for a call of `collective` ("" inside a transport).
  [[noreturn]] void throw_revoked(std::string_view collective) const;

  MPI_Comm comm_;
  int tag_;
  int rank_;
  int size_;
  const std::uint64_t& next_sequence_;
  Notice incoming_;
  MPI_Request receive_ = MPI_REQUEST_NULL;
  // Calls this rank failed locally, and how many answers each still waits for.
  std::map<std::uint64_t, int> awaited_;
  // Local notices about calls this rank has not reached yet.
  std::deque<Notice> deferred_;
  // Notices sent, until their sends complete (a list: the sends read `wire` where it is).
  struct Outgoing {
    Notice wire;
    std::vector<MPI_Request> requests;  // by peer
  };
  std::list<Outgoing> outgoing_;
  bool revoked_ = false;
  Notice cause_{};
  // The user's thread (before_call) and the progress thread (poll) may both use the receive.
  std::recursive_mutex mutex_;
};

}  // namespace collx::detail
