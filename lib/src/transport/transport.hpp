// Transport: the few verbs the executor needs to move bytes between ranks: post a send or a
// receive of contiguous bytes with a peer and a tag (MPI's matching order), then test. Over
// MPI, UCX, and the tests' simulated ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "node_layout.hpp"

namespace collx::detail {

class FailureNotices;
class SharedArena;

class Transport;

// One posted message, neither copied nor moved. One that goes while still pending (its operation
// failed) is first abandoned: a receive is cancelled and waited for, a send released. So an
// algorithm declares its buffers before the Transfers that use them.
struct Transfer {
  enum class State : std::uint8_t { idle, pending, done };
  State state = State::idle;
  bool is_send = false;
  int peer = -1;
  std::size_t bytes = 0;
  MPI_Request mpi_request = MPI_REQUEST_NULL;  // MPI transport
  std::uintptr_t handle = 0;                   // other transports
  // Who posted it, who abandons it; null for a DeviceCall's message (`handle`, device_call.hpp).
  Transport* owner = nullptr;

  Transfer() = default;
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;
  ~Transfer() {
    if (pending()) [[unlikely]]
      abandon();
  }

  bool pending() const { return state == State::pending; }
  bool done() const { return state == State::done; }
  // Says what the message is and who posted it (null: nobody to abandon it); now pending.
  void start(bool send, int to, std::size_t length, Transport* by) {
    is_send = send;
    peer = to;
    bytes = length;
    owner = by;
    state = State::pending;
  }
  // Cancels (a receive) or releases (a send) a pending transfer through its owner; it is then
  // no longer pending. Defined below Transport.
  void abandon() noexcept;
};
// "recv of 4096 B from rank 3", for error messages.
std::string describe(const Transfer& t);

// A run of Transfers with room for a few inline: small collectives should not allocate.
class TransferArray {
 public:
  explicit TransferArray(std::size_t n) : size_(n) {
    // A count from a negative int (a caller's bug) fails here; the bound also lets the
    // compiler see that the array's size cannot overflow.
    if (n > static_cast<std::size_t>(PTRDIFF_MAX) / sizeof(Transfer))
      throw std::bad_array_new_length();
    if (n > kInline) heap_ = std::make_unique<Transfer[]>(n);
  }
  Transfer& operator[](std::size_t i) { return data()[i]; }
  std::size_t size() const { return size_; }
  Transfer* begin() { return data(); }
  Transfer* end() { return data() + size_; }

 private:
  static constexpr std::size_t kInline = 4;
  Transfer* data() { return heap_ ? heap_.get() : inline_; }
  std::size_t size_;
  Transfer inline_[kInline];
  std::unique_ptr<Transfer[]> heap_;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Posts a send or a receive; `t` becomes pending (or done at once if the transport completed
  // it). `device`: `buf` is device memory (only where supports_device_memory()).
  void post_message(Transfer& t, bool is_send, const void* buf, std::size_t bytes, int peer,
                    int tag, bool device = false) {
    t.start(is_send, peer, bytes, this);
    post(t, const_cast<void*>(buf), tag, device);
  }
  // Drives progress and marks completed transfers done; true when every transfer in `ts` is
  // done (idle ones count as done). With `wait`, blocks until they are.
  virtual bool test_or_wait_all(std::span<Transfer* const> ts, bool wait) = 0;
  bool test_all(std::span<Transfer* const> ts) { return test_or_wait_all(ts, false); }
  void wait_all(std::span<Transfer* const> ts) { test_or_wait_all(ts, true); }
  // The communicator the MPI library's own collectives run on (Algorithm::mpi), the duplicate
  // collx sends on; MPI_COMM_NULL for simulated ranks.
  MPI_Comm library_comm() const { return library_comm_; }
  void set_library_comm(MPI_Comm comm) { library_comm_ = comm; }
  // Gives a progress engine a chance to run with nothing to test (UCX workers need it).
  virtual void progress() {}
  // Whether a message with `tag` from any peer waits for its receive (false where the transport
  // cannot tell): Operation::refuse_foreign_messages.
  virtual bool message_arrived(int /*tag*/) { return false; }
  // Abandons a pending transfer nobody will wait for (see Transfer); never throws (it runs in
  // destructors while an error unwinds). Afterwards the transfer is done.
  virtual void abandon(Transfer& t) noexcept = 0;

  // Whether this transport may be given CUDA device buffers (a CUDA-aware MPI, UCX built with
  // CUDA; COLLX_CUDA_AWARE overrides); if not, they are staged through host memory.
  virtual bool supports_device_memory() const { return false; }

  // The arena this transport's ranks share when all are on one node (shm_arena.hpp), or null.
  SharedArena* shared_arena() const { return arena_.get(); }
  void set_shared_arena(std::shared_ptr<SharedArena> arena) { arena_ = std::move(arena); }
  // Across nodes: the arena this rank's node shares (its ranks in local-rank order), or null;
  // the node-aware algorithms' node phases run through it.
  SharedArena* node_arena() const { return node_arena_.get(); }
  void set_node_arena(std::shared_ptr<SharedArena> arena) { node_arena_ = std::move(arena); }

  // Which of this transport's ranks share a node: what the node-aware algorithms split by.
  // Null (simulated ranks without one): one node.
  const patterns::NodeLayout* node_layout() const { return layout_.get(); }
  void set_node_layout(std::shared_ptr<const patterns::NodeLayout> layout) {
    layout_ = std::move(layout);
    if (layout_ != nullptr && rank() < layout_->size() &&
        processors_oversubscribed(layout_->ranks_on(layout_->node_of(rank())))) {
      yield_when_idle_ = true;
    }
  }

  // Whether waits yield the processor when a pass found nothing (processors_oversubscribed).
  bool yield_when_idle() const { return yield_when_idle_; }
  // More processes on this node than processors (`ranks_on_node`, or the launcher's count), or
  // Open MPI's OMPI_MCA_mpi_yield_when_idle=1 (=0 keeps spinning): a spinning wait would take
  // the processor from the peer it waits for.
  static bool processors_oversubscribed(int ranks_on_node);

  // The communicator's failure notices (failure_notices.hpp), or null: waits end when one
  // revokes the communicator, and a failing operation reports itself there.
  FailureNotices* failure_notices() const { return notices_; }
  void set_failure_notices(FailureNotices* notices) { notices_ = notices; }

 protected:
  // The rank and size of this process in `comm` (not collective), or as given (simulated ranks).
  explicit Transport(MPI_Comm comm);
  Transport(int rank, int size) : rank_(rank), size_(size) {}
  // post_message: `t` says the message (Transfer::start).
  virtual void post(Transfer& t, void* buf, int tag, bool device) = 0;

 private:
  int rank_ = 0;
  int size_ = 1;
  MPI_Comm library_comm_ = MPI_COMM_NULL;
  std::shared_ptr<SharedArena> arena_;
  std::shared_ptr<SharedArena> node_arena_;
  std::shared_ptr<const patterns::NodeLayout> layout_;
  FailureNotices* notices_ = nullptr;
  bool yield_when_idle_ = processors_oversubscribed(0);
};

inline void Transfer::abandon() noexcept {
  if (owner != nullptr) owner->abandon(*this);
  state = State::done;
}

}  // namespace collx::detail
