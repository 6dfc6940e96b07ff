#include "transport_mpi.hpp"

#include <sched.h>

#include <climits>
#include <string>

#include "collx/build_config.hpp"
#include "collx/error.hpp"
#include "failure_notices.hpp"

namespace collx::detail {

// Waits and tests go to the PMPI_ names: libcollx_mpi intercepts MPI_Wait, MPI_Test and their
// -all and -some forms, which collx's own requests do not need.

namespace {

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) length = 0;
  return std::string(text, static_cast<std::size_t>(length));
}

// A batch call over the requests of `n` owners failed with `rc`; MPI_ERR_IN_STATUS: the message
// names each failed request and MPI's reason for it (the status's error), not only that one of
// them failed. Status i is of owners[indices[i]] (an index from `n` on is another request's: the
// notice receive).
[[noreturn]] void throw_batch_error(int rc, const char* what, int rank, Transfer* const* owners,
                                    int n, const MPI_Status* statuses, int count,
                                    const int* indices) {
  if (rc != MPI_ERR_IN_STATUS) throw_mpi_error(rc, what, rank);
  std::string message = std::string(what) + " failed:";
  for (int i = 0; i < count; ++i) {
    const int rc = statuses[i].MPI_ERROR;
    if (indices[i] >= n || rc == MPI_SUCCESS || rc == MPI_ERR_PENDING) continue;
    message += " [" + describe(*owners[indices[i]]) + ": " + error_string(rc) + "]";
  }
  throw Error(ErrorCode::mpi, "", rank, message);
}

// MPI counts are int: a message above INT_MAX bytes travels as one element of a derived type
// made of 1 GiB fragments and a remainder, so nothing is truncated and it stays one request.
MPI_Datatype large_message_type(std::size_t bytes) {
  constexpr std::size_t kFragment = std::size_t{1} << 30;
  const std::size_t fragments = bytes / kFragment;
  const std::size_t rest = bytes % kFragment;
  MPI_Datatype fragment_type = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_contiguous(static_cast<int>(kFragment), MPI_BYTE, &fragment_type),
            "MPI_Type_contiguous");
  int lengths[2] = {static_cast<int>(fragments), static_cast<int>(rest)};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(fragments * kFragment)};
  MPI_Datatype types[2] = {fragment_type, MPI_BYTE};
  MPI_Datatype type = MPI_DATATYPE_NULL;
  check_mpi(MPI_Type_create_struct(rest == 0 ? 1 : 2, lengths, displacements, types, &type),
            "MPI_Type_create_struct");
  check_mpi(MPI_Type_commit(&type), "MPI_Type_commit");
  MPI_Type_free(&fragment_type);
  return type;
}

constexpr int kMaxBatch = 16;

}  // namespace

void throw_mpi_error(int rc, const char* what, int rank, std::string_view collective) {
  throw Error(ErrorCode::mpi, collective, rank, std::string(what) + " failed: " + error_string(rc));
}

bool on_every_rank(bool mine, MPI_Comm comm, int rank) {
  const int local = mine ? 1 : 0;
  int all = 0;
  check_mpi(PMPI_Allreduce(&local, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", rank);
  return all != 0;
}

Transport::Transport(MPI_Comm comm) {
  check_mpi(MPI_Comm_rank(comm, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size_), "MPI_Comm_size");
}

void MpiTransport::post(Transfer& t, void* buf, int tag, bool /*device: MPI takes it as it is*/) {
  auto post_as = [&](int count, MPI_Datatype type) {
    return t.is_send ? MPI_Isend(buf, count, type, t.peer, tag, comm_, &t.mpi_request)
                     : MPI_Irecv(buf, count, type, t.peer, tag, comm_, &t.mpi_request);
  };
  const char* what = t.is_send ? "MPI_Isend" : "MPI_Irecv";
  if (t.bytes <= static_cast<std::size_t>(INT_MAX)) {
    check_mpi(post_as(static_cast<int>(t.bytes), MPI_BYTE), what, rank());
  } else {
    MPI_Datatype type = large_message_type(t.bytes);
    const int rc = post_as(1, type);
    // Freeing right after posting is allowed: MPI keeps the type alive for pending operations.
    MPI_Type_free(&type);
    check_mpi(rc, what, rank());
  }
}

namespace {
// Open MPI's progress engine yields by itself where it is told to (mpi_yield_when_idle, which
// it sets when it sees the node oversubscribed): a second yield per pass only delays the
// handoff. MPICH's never yields, so collx's waits do it there (Transport::yield_when_idle).
#if defined(OPEN_MPI)
constexpr bool kMpiYieldsItself = true;
#else
constexpr bool kMpiYieldsItself = false;
#endif
// Under SimGrid's SMPI a wait blocks (MPI_Waitall, MPI_Waitany) instead of testing in a loop:
// SMPI charges every failed MPI_Test simulated time (smpi/test), and simulated time does not
// advance while a rank only tests (docs/SCALE.md).
constexpr bool kBlockingWaits = COLLX_SMPI;

// Calls batch(n, requests, owners) for the pending transfers of `ts`, at most kMaxBatch at a
// time: their requests copied out (with room for one more after them) and their Transfers.
template <class Batch>
void for_each_batch(std::span<Transfer* const> ts, Batch&& batch) {
  MPI_Request requests[kMaxBatch + 1];
  Transfer* owners[kMaxBatch];
  int n = 0;
  for (Transfer* t : ts) {
    if (!t->pending()) continue;
    requests[n] = t->mpi_request;
    owners[n] = t;
    if (++n == kMaxBatch) {
      batch(n, requests, owners);
      n = 0;
    }
  }
  if (n > 0) batch(n, requests, owners);
}

// After an MPI completion call over a batch: the requests that completed (with or without an
// error) are freed and nulled, and their Transfers done; the others keep their live handles
// (whoever abandons them cancels those). Returns how many completed now.
int take_completed(int n, const MPI_Request* requests, Transfer* const* owners) {
  int completed = 0;
  for (int i = 0; i < n; ++i) {
    owners[i]->mpi_request = requests[i];
    if (requests[i] == MPI_REQUEST_NULL && owners[i]->pending()) {
      owners[i]->state = Transfer::State::done;
      ++completed;
    }
  }
  return completed;
}

}  // namespace

bool MpiTransport::test_or_wait_all(std::span<Transfer* const> ts, bool wait) {
  // Waiting, each batch waits beside the communicator's notice receive, where it has one (a
  // notice that revokes the communicator ends the wait): MPI_Testsome in a loop, not
  // MPI_Waitsome, whose per-request synchronisation object in Open MPI costs more than a small
  // message's exchange. Testing, one pass of MPI's progress engine over the batches, and the
  // notices polled once after them.
  FailureNotices* notices = failure_notices();
  const bool with_notice = wait && notices != nullptr;
  const bool yield = yield_when_idle() && !kMpiYieldsItself;
  bool all_done = true;
  for_each_batch(ts, [&](int n, MPI_Request* requests, Transfer** owners) {
    int pending = n;
    do {
      requests[n] = with_notice ? *notices->request() : MPI_REQUEST_NULL;
      const bool notice_posted = requests[n] != MPI_REQUEST_NULL;
      int completed = 0;
      int indices[kMaxBatch + 1];
      MPI_Status statuses[kMaxBatch + 1];
      int rc;
      if (kBlockingWaits && wait) {
        // One completion at a time: SMPI's MPI_Waitsome tests every other request after the
        // first completes, and each test of the notice receive (which rarely completes) costs
        // simulated time.
        rc = PMPI_Waitany(n + 1, requests, &indices[0], &statuses[0]);
        completed = indices[0] == MPI_UNDEFINED ? 0 : 1;
        if (rc != MPI_SUCCESS && completed == 1) {
          statuses[0].MPI_ERROR = rc;
          rc = MPI_ERR_IN_STATUS;
        }
      } else {
        while ((rc = PMPI_Testsome(n + 1, requests, &completed, indices, statuses)) ==
                   MPI_SUCCESS &&
               completed == 0 && wait) {
          if (yield) sched_yield();
        }
      }
      if (completed == MPI_UNDEFINED) completed = 0;
      if (with_notice) *notices->request() = requests[n];
      pending -= take_completed(n, requests, owners);
      const bool notice_arrived = notice_posted && requests[n] == MPI_REQUEST_NULL;
      if (notice_arrived) {
        // Throws when the notice revokes the communicator; after an MPI error the notice is
        // taken (and the receive posted again), and the error is reported instead.
        try {
          notices->poll(/*completed=*/true);
        } catch (const Error&) {
          if (rc == MPI_SUCCESS) throw;
        }
      }
      if (rc != MPI_SUCCESS) [[unlikely]]
        throw_batch_error(rc, "MPI_Testsome", rank(), owners, n, statuses, completed, indices);
    } while (wait && pending > 0);
    all_done = all_done && pending == 0;
  });
  // A communicator revoked meanwhile (by another operation) ends a test too.
  if (!all_done && notices != nullptr) notices->poll();
  return all_done;
}

void MpiTransport::abandon(Transfer& t) noexcept {
  if (t.mpi_request != MPI_REQUEST_NULL) {
    if (t.is_send) {
      // Cancelling a send is deprecated (MPI 4.0) and a no-op in some libraries, after which a
      // wait could block for ever on a peer that failed: the send is left to finish on its own.
      MPI_Request_free(&t.mpi_request);
    } else {
      // Either cancelled, or matched and finishing (then the sender is delivering it): after
      // MPI_Cancel the wait is local. Errors are ignored: this runs while another unwinds.
      MPI_Cancel(&t.mpi_request);
      PMPI_Wait(&t.mpi_request, MPI_STATUS_IGNORE);
    }
  }
  t.mpi_request = MPI_REQUEST_NULL;
  t.state = Transfer::State::done;
}

void MpiTransport::progress() {
  // Either is a pass of the progress engine: the notices' poll an MPI_Test, else an MPI_Iprobe.
  if (FailureNotices* notices = failure_notices())
    notices->poll();
  else
    message_arrived(MPI_ANY_TAG);
}

bool MpiTransport::message_arrived(int tag) {
  int flag = 0;
  check_mpi(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &flag, MPI_STATUS_IGNORE), "MPI_Iprobe", rank());
  return flag != 0;
}

}  // namespace collx::detail
