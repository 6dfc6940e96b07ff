// collx::Communicator: a group of ranks and the collectives that run over it.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collx/options.hpp"
#include "collx/request.hpp"
#include "collx/tuning.hpp"
#include "collx/types.hpp"

namespace collx {

namespace detail {
struct CommState;
// The library's own way to a communicator's state, defined only in the library's sources.
struct CommunicatorAccess;
}  // namespace detail

// Which ranks of a communicator share a node. Nodes are numbered by their lowest rank; a node's
// ranks keep the communicator's order (local rank 0 is its leader).
struct NodeLayoutInfo {
  int nodes = 1;
  std::vector<int> ranks_per_node;  // by node
  int node = 0;                     // this rank's node
  int local_rank = 0;               // this rank's place on it
  bool uniform = true;              // every node holds as many ranks
  bool emulated = false;            // COLLX_NODE_LAYOUT's nodes, not MPI_Comm_split_type
  std::string description;          // "2 nodes x 2 ranks (uniform)"
};

class Communicator {
 public:
  // Duplicates `comm` (so collx's messages never match the application's) and frees the
  // duplicate on destruction. MPI must be initialised.
  explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD);
  // The same, moving its bytes with `transport` instead of what COLLX_TRANSPORT says.
  Communicator(MPI_Comm comm, TransportChoice transport);
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  int rank() const;
  int size() const;
  // The duplicated MPI communicator that collx sends on.
  MPI_Comm mpi_comm() const;
  // Releases the communicator (its operations in flight finish first); any later call on it
  // throws ErrorCode::communicator_freed.
  void free();
  bool is_freed() const noexcept;
  // The transport this communicator moves its bytes with: "mpi" or "ucx".
  std::string_view transport_name() const;
  // Whether its ranks share an arena of memory (one node, several ranks, COLLX_SHM not 0), which
  // Algorithm::shared_memory runs through.
  bool shared_memory() const;
  // Across nodes: whether this rank's node has an arena of its own for the node-aware
  // algorithms' phases inside the node.
  bool node_shared_memory() const;
  // Which of its ranks share a node, found at creation (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED),
  // or COLLX_NODE_LAYOUT's nodes).
  NodeLayoutInfo node_layout() const;
  // What auto runs in the next blocking host call of `collective` on `bytes` (the whole buffer)
  // of `type` (and `op`, for reductions): during the size class's trials (`trying` set true) the
  // next candidate, after them the agreed choice, without trials the table's (or `mpi` where an
  // untried small floating-point sum runs the MPI library's collective).
  Algorithm auto_choice(Collective collective, std::size_t bytes, DataType type, ReduceOp op,
                        bool* trying = nullptr);
  // What the autotuner settled, a line per size class: each candidate's time, the choice.
  std::vector<std::string> learned_choices() const;
  // A line per size class whose first trials have not ended: how far its calls went into the
  // wait before its trials or into the trials, and what the wait runs.
  std::vector<std::string> unsettled_classes() const;
  // The same as tuning-file rules for this communicator's size (collx/tuning.hpp), up to the
  // largest class auto has seen: the agreed choice where there were trials, else the table's.
  // Loaded through COLLX_TUNING_FILE they are taken as they are, without trials.
  std::vector<TuningRule> learned_rules() const;

  // Whether the next blocking host call of `collective` with default Options goes to the MPI
  // library's own collective (its class settled on Algorithm::mpi, and a reduction's bits do not
  // depend on the algorithm). `count` as the call takes it
  // (one rank's block for allgather, gather, scatter, alltoall, reduce_scatter; barrier: 0). A
  // caller holding the MPI arguments (libcollx_mpi) may then make that MPI call itself on
  // mpi_comm(), after library_call_made(): to every rank it is collx's own delegated call.
  bool goes_to_library(Collective collective, std::size_t count, DataType type,
                       ReduceOp op = ReduceOp::sum) const noexcept;
  // Numbers a call that goes_to_library sent to the caller, as collx numbers its own.
  void library_call_made() noexcept;
  // The count library_call_made() adds one to (null without state), for a caller that numbers
  // its delegated calls inline on its shortest path (libcollx_mpi); valid while this lives.
  std::uint64_t* calls_started() noexcept;
  // For a caller in front of collx (libcollx_mpi): its next blocking call on this communicator
  // starts now, and the caller's own work until collx's entry (its arguments converted) is part
  // of what that call costs. While auto's trials run, they time collx's candidates from here, as
  // they time the MPI library's collective from its delegated call, which skips that work.
  void entering_call() noexcept;

  // ---- allreduce: every rank gets op over all ranks' sendbuf, elementwise ----
  // In place when sendbuf == recvbuf.
  void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                 const Options& options = {});
  void allreduce(InPlace, void* buffer, std::size_t count, DataType type, ReduceOp op,
                 const Options& options = {});
  template <class T>
  void allreduce(std::span<const T> send, std::span<T> recv, ReduceOp op,
                 const Options& options = {}) {
    check_span_sizes("allreduce", send.size(), recv.size());
    allreduce(send.data(), recv.data(), send.size(), datatype_of_v<T>, op, options);
  }
  template <class T>
  void allreduce(std::span<T> buffer, ReduceOp op, const Options& options = {}) {
    allreduce(in_place, buffer.data(), buffer.size(), datatype_of_v<T>, op, options);
  }
  Request iallreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                     ReduceOp op, const Options& options = {});
  template <class T>
  Request iallreduce(std::span<T> buffer, ReduceOp op, const Options& options = {}) {
    return iallreduce(buffer.data(), buffer.data(), buffer.size(), datatype_of_v<T>, op, options);
  }

  // ---- broadcast: root's `buffer` to every rank ----
  void broadcast(void* buffer, std::size_t count, DataType type, int root,
                 const Options& options = {});
  Request ibroadcast(void* buffer, std::size_t count, DataType type, int root,
                     const Options& options = {});
  template <class T>
  void broadcast(std::span<T> buffer, int root, const Options& options = {}) {
    broadcast(buffer.data(), buffer.size(), datatype_of_v<T>, root, options);
  }

  // ---- reduce: op over every rank's sendbuf into recvbuf at the root ----
  // recvbuf is significant at the root only (may be null elsewhere); in place at the root when
  // sendbuf == recvbuf.
  void reduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
              int root, const Options& options = {});
  Request ireduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, ReduceOp op,
                  int root, const Options& options = {});

  // ---- allgather: rank r's `count` elements land at recvbuf + r * count on every rank ----
  // In place when sendbuf == recvbuf + rank * count (or with collx::in_place).
  void allgather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                 const Options& options = {});
  void allgather(InPlace, void* recvbuf, std::size_t count, DataType type,
                 const Options& options = {});
  Request iallgather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                     const Options& options = {});

  // ---- reduce_scatter: op over every rank's sendbuf (size() * count elements); rank r gets
  // block r (count elements) ----
  // In place when recvbuf == sendbuf: the result goes to the buffer's first count elements.
  void reduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                      ReduceOp op, const Options& options = {});
  Request ireduce_scatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                          ReduceOp op, const Options& options = {});
  // Per-rank block lengths: counts[r] elements for rank r, the blocks back to back in sendbuf.
  void reduce_scatter_v(const void* sendbuf, void* recvbuf, std::span<const std::size_t> counts,
                        DataType type, ReduceOp op, const Options& options = {});
  Request ireduce_scatter_v(const void* sendbuf, void* recvbuf, std::span<const std::size_t> counts,
                            DataType type, ReduceOp op, const Options& options = {});

  // ---- gather: every rank's `count` elements to recvbuf + r * count at the root ----
  // In place at the root when sendbuf == recvbuf + root * count (or sendbuf is null there).
  void gather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, int root,
              const Options& options = {});
  Request igather(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, int root,
                  const Options& options = {});

  // ---- scatter: block r (count elements) of the root's sendbuf to rank r's recvbuf ----
  // In place at the root when recvbuf == sendbuf + root * count (or recvbuf is null there).
  void scatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, int root,
               const Options& options = {});
  Request iscatter(const void* sendbuf, void* recvbuf, std::size_t count, DataType type, int root,
                   const Options& options = {});

  // ---- alltoall: block j (count elements) of rank i's sendbuf to block i of rank j's recvbuf
  // (in place when sendbuf == recvbuf) ----
  void alltoall(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                const Options& options = {});
  Request ialltoall(const void* sendbuf, void* recvbuf, std::size_t count, DataType type,
                    const Options& options = {});

  // ---- barrier ----
  void barrier(const Options& options = {});
  Request ibarrier(const Options& options = {});

  // ---- point to point, on a context of their own (they never match collectives) ----
  // Tags from 0 to kMaxTag. A receive may be longer than the message it gets.
  static constexpr int kMaxTag = 32767;
  void send(const void* buffer, std::size_t count, DataType type, int dest, int tag = 0);
  void recv(void* buffer, std::size_t count, DataType type, int source, int tag = 0);
  void sendrecv(const void* sendbuf, std::size_t sendcount, int dest, void* recvbuf,
                std::size_t recvcount, int source, DataType type, int tag = 0);
  Request isend(const void* buffer, std::size_t count, DataType type, int dest, int tag = 0);
  Request irecv(void* buffer, std::size_t count, DataType type, int source, int tag = 0);

  // ---- sub-communicators ----
  // Collective: ranks giving the same color form one communicator, ordered by key (then rank);
  // a negative color leaves the rank out (empty optional).
  std::optional<Communicator> split(int color, int key) const;
  // Collective over the listed ranks only, each calling with the same list: a communicator of
  // those ranks in that order.
  Communicator create_group(std::span<const int> ranks) const;
  // Collective: the same ranks in the same order, moving their bytes with `transport`.
  Communicator dup(TransportChoice transport = TransportChoice::automatic) const;

 private:
  friend struct detail::CommunicatorAccess;
  struct Adopt {};
  Communicator(Adopt, MPI_Comm owned, TransportChoice transport = TransportChoice::automatic);
  void check_span_sizes(const char* collective, std::size_t send, std::size_t recv) const;
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace collx
