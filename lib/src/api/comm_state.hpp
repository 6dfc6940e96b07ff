// CommState: what a Communicator owns, shared with the operations in flight on it.
#pragma once

#include <cstddef>
#include <type_traits>

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "autotune.hpp"
#include "call_clock.hpp"
#include "collx/communicator.hpp"
#include "collx/error.hpp"
#include "collx/options.hpp"
#include "collx/request.hpp"
#include "config.hpp"
#include "device_call.hpp"
#include "failure_notices.hpp"
#include "memory.hpp"
#include "operation.hpp"
#include "registry.hpp"
#include "selector.hpp"
#include "transport.hpp"

namespace collx::detail {

class DeviceEngine;

struct CommState {
  // Takes ownership of `dup` (an MPI_Comm_dup result), freed once the Communicator and every
  // operation in flight on it are gone.
  explicit CommState(MPI_Comm dup, TransportChoice choice = TransportChoice::automatic);
  ~CommState();  // not copyable (its mutex)

  // Sequence number, tags and pipeline settings for the next operation: the same on every rank,
  // as every rank calls collectives in the same order.
  OpInfo next_op(Collective collective, Algorithm algorithm, const Options& options) {
    if (options.pipeline_depth < 0 || defaults_config != &config()) [[unlikely]]
      refresh_op_defaults(collective, options);
    OpInfo info;
    info.collective = collective;
    info.algorithm = algorithm;
    info.sequence = next_sequence++;
    info.tag_base = tag_base_for(info.sequence);
    info.segment_bytes = options.segment_bytes ? options.segment_bytes : default_segment_bytes;
    info.pipeline_depth =
        options.pipeline_depth > 0 ? options.pipeline_depth : default_pipeline_depth;
    return info;
  }
  // Up to this many bytes, an untried order-sensitive blocking call on one node runs the MPI
  // library's own collective where the table chose one of collx's message algorithms
  // (docs/AUTO.md, "Reductions whose bits depend on the order of combination").
  static constexpr std::size_t kUntriedLibraryBytes = std::size_t{8} << 10;
  // The segment size where neither the call, the environment nor a tuning file sets one.
  static constexpr std::size_t kDefaultSegmentBytes = std::size_t{256} << 10;
  // The algorithm for a call (resolve_algorithm), remembered per collective and keyed by all the
  // choice reads (a replaced configuration is a new Config). Where the table decides and
  // COLLX_AUTOTUNE is on, the class's tuner picks (autotune.hpp); `tuner` is set for a timed call.
  struct CallChoice {
    Algorithm algorithm = Algorithm::automatic;
    ClassTuner* tuner = nullptr;
    bool meet = false;              // the ranks meet before the call is timed (TrialPick::meet)
    std::size_t segment_bytes = 0;  // the tuner's segment size (TrialPick); 0: the default
  };
  // `order_sensitive` (see order_sensitive()): only COLLX_AUTOTUNE=all tries candidates for it.
  CallChoice choose(Collective collective, Algorithm requested, std::size_t bytes,
                    bool shared_memory, bool blocking, bool order_sensitive = false) {
    Choice& last = last_choice[static_cast<std::size_t>(collective)];
    const Config* const current = &config();
    const ChoiceKey key{current, bytes, requested, shared_memory, order_sensitive};
    if (last.key != key) [[unlikely]] {
      last.algorithm =
          resolve_algorithm(collective, requested, bytes, size, rank, shared_memory, node_shape());
      last.tuner = requested == Algorithm::automatic ? tuner_for(collective, bytes, order_sensitive)
                                                     : nullptr;
      last.library_instead =
          requested == Algorithm::automatic && order_sensitive && last.tuner == nullptr
              ? library_for_untried(collective, bytes, shared_memory, last.algorithm)
              : Algorithm::automatic;
      // The class's order-sensitive calls then take the delegated path.
      if (last.library_instead != Algorithm::automatic)
        mark_delegated(untried_library_, collective, bytes, true);
      // A choice of the MPI library's collective that no trials time (an explicit mpi,
      // COLLX_ALGO, a tuning file's rule, the table's row): the size's blocking calls too.
      if (last.tuner == nullptr) note_untimed_library(collective, key, last.algorithm);
      last.key = key;
    }
    if (last.tuner == nullptr) [[likely]] {
      if (blocking && last.library_instead != Algorithm::automatic) [[unlikely]]
        return {last.library_instead, nullptr};
      return {last.algorithm, nullptr};
    }
    if (!blocking) return {last.tuner->chosen(), nullptr, false, last.tuner->chosen_segment()};
    const TrialPick pick = last.tuner->pick();
    return {pick.algorithm, pick.timed ? last.tuner : nullptr, pick.meet, pick.segment_bytes};
  }
  // Equal blocks of `count` elements per rank as p + 1 prefix sums, lent to a call and given
  // back after it, so that small calls allocate nothing for them.
  std::vector<std::size_t> lend_equal_offsets(std::size_t count) {
    std::vector<std::size_t> offsets = std::move(spare_offsets_);
    if (spare_offsets_count_ != count || offsets.size() != static_cast<std::size_t>(size) + 1) {
      offsets.resize(static_cast<std::size_t>(size) + 1);
      for (std::size_t r = 0; r < offsets.size(); ++r)
        offsets[r] = r * count;
    }
    spare_offsets_count_ = kNoSpareOffsets;
    return offsets;
  }
  // `offsets`: equal blocks of `count` elements (or of kNoSpareOffsets: other blocks, kept
  // for their storage only).
  void give_back_offsets(std::size_t count, std::vector<std::size_t>&& offsets) {
    spare_offsets_ = std::move(offsets);
    spare_offsets_count_ = count;
  }
  static constexpr std::size_t kNoSpareOffsets = static_cast<std::size_t>(-1);
  // The ranks meet (a barrier) before a round of trials, so its calls start together.
  void meet();
  // Hands a timed call's duration to its tuner; where it asks, the ranks agree (a max allreduce).
  void after_timed_call(Collective collective, std::size_t bytes, ClassTuner& tuner,
                        double seconds);
  // Every size class's tuner whose trials started, for reports (`segment_classes`:
  // segment_tuner_for's).
  struct LearnedClass {
    Collective collective;
    int size_class;
    const ClassTuner* tuner;
    bool tried() const { return tuner->rounds() > 0; }
  };
  // `waiting`: the classes still in their wait before their first trials too.
  std::vector<LearnedClass> learned(bool segment_classes = false, bool waiting = false) const;
  // The tuner of the call's size class, started on first use; null where the call is not tuned
  // (an `order_sensitive` one tries only segment sizes, segment_tuner_for, but under
  // COLLX_AUTOTUNE=all).
  ClassTuner* tuner_for(Collective collective, std::size_t bytes, bool order_sensitive = false);
  // An order-sensitive call's class: its table's choice with the default segments and with one
  // segment the class's size, where the row's bits do not depend on its segments
  // (AlgorithmRow::segments_keep_bits) and the default cuts the call into several; else null.
  ClassTuner* segment_tuner_for(Collective collective, std::size_t bytes);
  // The delegated path: whether a blocking call goes straight to the MPI library's collective
  // (run_delegated) as its class's trials settled; the same on every rank (agreed trials, and
  // conditions every rank's call shares). Not with an explicit algorithm, device memory, a
  // stream, COLLX_CHECK or COLLX_DEBUG. An `order_sensitive` call is delegated where its class
  // runs the MPI library untried (library_for_untried).
  [[gnu::always_inline]] bool delegates(Collective collective, std::size_t bytes,
                                        const Options& options,
                                        bool order_sensitive = false) const {
    // No branch hint: a hint makes the delegated path cold, and the compiler then calls its
    // small helpers out of line.
    if (!delegating_) return false;
    if (!options_may_delegate(options)) return false;
    // A barrier has no buffer to be in device memory (and a program of barriers alone never
    // learns that the process is host-only: memory.cpp learns it from a call's buffers).
    if (collective != Collective::barrier && (bytes == 0 || !surely_host_memory(options)))
      return false;
    const ChoiceKey& untimed = untimed_library_[static_cast<std::size_t>(collective)];
    if (untimed.bytes == bytes && untimed.requested == options.algorithm &&
        untimed.order_sensitive == order_sensitive && untimed.config == &config()) {
      return true;
    }
    // The classes' flags are auto's.
    if (options.algorithm != Algorithm::automatic) return false;
    const int k = size_class_of(bytes);
    const auto& classes = order_sensitive ? untried_library_ : delegated_;
    return classes[static_cast<std::size_t>(collective)][static_cast<std::size_t>(k)] &&
           delegating_config_ == &config();
  }
  // auto or the MPI library's collective asked for (Algorithm::mpi), no stream, and not a
  // negative pipeline depth (collx's path rejects it).
  static bool options_may_delegate(const Options& options) {
    return (options.algorithm == Algorithm::automatic || options.algorithm == Algorithm::mpi) &&
           options.stream == nullptr && options.pipeline_depth >= 0;
  }
  // COLLX_CHECK, COLLX_DEBUG and COLLX_TIMEOUT work on collx's path only.
  static bool needs_collx_path(const Config& c) {
    return c.check || c.debug >= DebugLevel::info || c.timeout_seconds > 0;
  }
  // Whether a blocking host call with these options may run on the delegated path now.
  static bool may_delegate(const Options& options) {
    return options_may_delegate(options) && !needs_collx_path(config());
  }
  // What the smaller size classes of `collective` whose trials ended say of a new class's
  // `candidates`: above kLongCallBytes those timed slow there leave (the MPI library's collective
  // only far behind, kLibrarySlowRatio; the list is never left empty); the nearest one's choice
  // (ClassTuner::choice_as_evidence), where it is one of collx's candidates, moves to the front.
  // Returns what the wait before the new class's trials runs (ClassTuner::Wait): the MPI
  // library's collective where that choice is it; above kLongCallBytes, that choice throughout
  // where it is a candidate and the MPI library's collective was timed kLibraryBehindRatio behind
  // the fastest or more (for its distance, as a slow candidate); else the table's choice, warming
  // the library up.
  // docs/AUTO.md, "The trials wait".
  ClassTuner::Wait weigh_by_smaller_classes(Collective collective, std::size_t bytes,
                                            std::vector<Algorithm>& candidates) const;
  // What a new class's trials among `candidates` (after weigh_by_smaller_classes) are expected to
  // cost, in calls of its choice per trial call of each: above kLongCallBytes the sum of each
  // candidate's slowness in the nearest smaller class whose trials timed it (at least 1, at most
  // kMaxTrialCost; 1 where none timed it), else one per candidate. The wait before the trials is
  // COLLX_AUTOTUNE_WAIT times the trials' calls weighted so (tuner_for): a class called more pays
  // for its trials at most about half the time it has spent, slow challengers included.
  double trial_cost_in_calls(Collective collective, std::size_t bytes,
                             std::span<const Algorithm> candidates) const;
  static constexpr double kMaxTrialCost = 8.0;
  // The slowness (ClassTuner::slowness) of `algorithm` in the nearest class of `collective` below
  // `size_class` whose trials ended and timed it, and how many classes down that is; {0, 0}
  // where none did.
  std::pair<double, int> known_slowness(Collective collective, int size_class,
                                        Algorithm algorithm) const;
  // Above kLongCallBytes a new class leaves out what its smaller classes timed slow
  // (weigh_by_smaller_classes), and a wait on the MPI library's collective is kLibraryWaitFactor
  // times longer (tuner_for): there a trial call costs a call of that size.
  static constexpr std::size_t kLongCallBytes = std::size_t{64} << 10;
  static constexpr int kLibraryWaitFactor = 4;
  // A candidate that the nearest smaller class to try it timed at kSlowRatio times its fastest
  // or more (ClassTuner::slowness), kSlowDecay times more for each class further down, is slow
  // (docs/AUTO.md, "A candidate already shown slow is not tried again").
  static constexpr double kSlowRatio = 2.0;
  static constexpr double kSlowDecay = 1.41421356;
  // The MPI library's collective timed this far behind the fastest one class down (kSlowDecay
  // times more each class further down) cannot win the new class's trials by the margin where
  // one algorithm's speed against another's changes by at most kSlowDecay per doubling, warmed
  // up or not: the wait runs collx's choice throughout (ClassTuner::Wait::on_choice).
  static constexpr double kLibraryBehindRatio = 1.5;
  // The MPI library's collective leaves a new class's candidates only where it was timed this far
  // behind the fastest one class down (kSlowDecay times more each class further down): four
  // doublings at kSlowDecay could not close the gap, and each of its trial calls costs several
  // of collx's (docs/AUTO.md, "A candidate already shown slow is not tried again"). Further up
  // it is tried again.
  static constexpr double kLibrarySlowRatio = kSlowRatio * kSlowRatio;
  // Whether some size class of this communicator goes to the MPI library (delegates()).
  bool delegating() const { return delegating_; }
  // Whether some size class of this communicator is trying its candidates.
  bool trials_running() const { return trying_classes_ > 0; }
  // Communicator::entering_call: the caller's entry for the call the next sequence number goes
  // to; caller_entry() hands it to that call (once), else nothing.
  void note_caller_entry() { caller_entry_ = {CallClock::now(), next_sequence}; }
  CallClock::time_point caller_entry() {
    const CallerEntry entry = std::exchange(caller_entry_, CallerEntry{});
    return entry.sequence == next_sequence ? entry.time : CallClock::time_point{};
  }
  // Marks what after_timed_call settled.
  void note_settled(Collective collective, std::size_t bytes, const ClassTuner& tuner);
  NodeShape node_shape() const {
    if (!node_layout) return {};
    return {node_layout->nodes(), node_layout->max_ranks_per_node(), node_layout->uniform()};
  }
  // What the selector picks for a call of `bytes` on this communicator, trials aside.
  Algorithm table_choice(Collective collective, std::size_t bytes) const {
    return resolve_algorithm(collective, Algorithm::automatic, bytes, size, rank, arena_for(bytes),
                             node_shape());
  }
  // The device side of this communicator on `device`, made on first use.
  DeviceEngine& device_engine(int device);
  // Whether a call of `bytes` may run through the shared arena: there is one, and the call is
  // not large (above max(COLLX_DEVICE_HOST_COPY_BYTES, kArenaHostCopyBytes)) where every rank's
  // transport takes device memory: those run without the arena on every rank, device to device.
  // Keyed on what every rank sees alike, never on the call's memory.
  bool arena_for(std::size_t bytes) const {
    if (transport->shared_arena() == nullptr) return false;
    if (!device_direct_everywhere) [[likely]]
      return true;
    return bytes <= std::max(config().device_host_copy_bytes, kArenaHostCopyBytes);
  }
  // Every rank's transport takes device memory and sees a device: agreed once, where there is a
  // shared arena and a device API.
  bool device_direct_everywhere = false;

  MPI_Comm comm = MPI_COMM_NULL;
  // A second context for the user's point-to-point messages, so their tags are free and never
  // match a collective's.
  MPI_Comm p2p_comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Transport> p2p_transport;
  std::uint64_t next_sequence = 0;
  // Failure notices go on p2p_comm with a tag above the user's, or on a duplicate of their own.
  MPI_Comm notice_comm = MPI_COMM_NULL;
  std::unique_ptr<FailureNotices> notices;
  std::mutex device_mutex;
  std::vector<std::unique_ptr<DeviceEngine>> device_engines;
  // Which ranks share a node (MPI_Comm_split_type, or COLLX_NODE_LAYOUT: `emulated_layout`).
  std::shared_ptr<const patterns::NodeLayout> node_layout;
  bool emulated_layout = false;
  // The last blocking call of each collective that took the delegated path, as its public entry
  // took it (its descriptor, what its checks returned, its options and the configuration it was
  // decided under; collectives_api.cpp's RememberedCall, kept here as bytes since the descriptors
  // are that file's): the next call with the same arguments goes to the MPI library without its
  // checks and decision, which read nothing else that can change (a settled class stays
  // settled; mark_delegated forgets them all where a class stops going to the MPI library).
  struct RememberedCallSlot {
    alignas(std::max_align_t) std::array<std::byte, 96> bytes;
    bool held = false;
  };
  std::array<RememberedCallSlot, kCollectiveCount> remembered_calls{};

 private:
  struct ChoiceKey {
    const Config* config = nullptr;  // none yet
    std::size_t bytes = 0;
    Algorithm requested = Algorithm::automatic;
    bool shared_memory = false;
    bool order_sensitive = false;
    bool operator==(const ChoiceKey&) const = default;
  };
  struct Choice {
    ChoiceKey key;
    Algorithm algorithm = Algorithm::automatic;
    ClassTuner* tuner = nullptr;  // where the size class is tuned
    // What a blocking call runs instead (library_for_untried), else automatic.
    Algorithm library_instead = Algorithm::automatic;
  };
  // The MPI library's algorithm for an untried order-sensitive call (kUntriedLibraryBytes), or
  // automatic to keep `table_choice`.
  Algorithm library_for_untried(Collective collective, std::size_t bytes, bool shared_memory,
                                Algorithm table_choice) const;
  // A call's candidates: the table's choice at its size and the neighbouring classes, the arena's
  // row, the cost model's best with and without the arena.
  std::vector<Algorithm> tuning_candidates(Collective collective, std::size_t bytes) const;
  // `values` combined over ranks by `combine` (an internal allreduce on this communicator).
  std::vector<std::uint64_t> agree(std::span<const std::uint64_t> values, ReduceOp combine);
  using ClassTuners = std::array<std::array<ClassTuner, kSizeClasses>, kCollectiveCount>;
  std::unique_ptr<ClassTuners> tuners;          // made at the first tuned call
  std::unique_ptr<ClassTuners> segment_tuners;  // segment_tuner_for's, made at its first call
  // How many size classes are trying their candidates.
  int trying_classes_ = 0;
  struct CallerEntry {
    CallClock::time_point time{};
    std::uint64_t sequence = 0;
  };
  CallerEntry caller_entry_;
  std::array<Choice, kCollectiveCount> last_choice{};
  // Drops the transports and notices, then frees the MPI communicators where `free_comms`.
  void release(bool free_comms);
  // Rejects a negative options.pipeline_depth; sets next_op's defaults for a new configuration.
  void refresh_op_defaults(Collective collective, const Options& options);
  std::vector<std::size_t> spare_offsets_;
  std::size_t spare_offsets_count_ = kNoSpareOffsets;
  // The size classes delegated to the MPI library, for the configuration they settled under.
  bool delegating_ = false;
  const Config* delegating_config_ = nullptr;
  using SizeClassFlags = std::array<std::array<bool, kSizeClasses>, kCollectiveCount>;
  SizeClassFlags delegated_{};
  // The size classes whose order-sensitive calls run the MPI library untried (delegates()).
  SizeClassFlags untried_library_{};
  // Per collective, the call (its size, the algorithm asked for, its order sensitivity, under
  // its configuration) whose choice, untimed, is the MPI library's collective: its blocking calls
  // take the delegated path (delegates()). The last such call's; a program's calls of one size
  // follow each other (a benchmark's, a solver's iterations).
  std::array<ChoiceKey, kCollectiveCount> untimed_library_{};
  // Remembers `key` in untimed_library_ where `algorithm` is the MPI library's row and nothing
  // needs collx's path.
  void note_untimed_library(Collective collective, const ChoiceKey& key, Algorithm algorithm);
  // Sets (or clears) the flag of the call's class, where nothing needs collx's path.
  void mark_delegated(SizeClassFlags& classes, Collective collective, std::size_t bytes,
                      bool to_mpi);
  // next_op's defaults (configuration, then tuning file, then built in) for `defaults_config`.
  const Config* defaults_config = nullptr;
  std::size_t default_segment_bytes = 0;
  int default_pipeline_depth = 0;
};

// A Communicator's state, for the library and its tests; throws ErrorCode::communicator_freed
// once the communicator was freed or moved from.
struct CommunicatorAccess {
  static CommState& state(const Communicator& comm);
};
inline CommState& state_of(const Communicator& comm) {
  return CommunicatorAccess::state(comm);
}
// `s`, or ErrorCode::communicator_freed where it is null.
[[noreturn]] void throw_freed();
inline const std::shared_ptr<CommState>& live(const std::shared_ptr<CommState>& s) {
  if (s == nullptr) [[unlikely]]
    throw_freed();
  return s;
}

// What a collective call looks like, for COLLX_CHECK's cross-rank comparison and for the
// COLLX_DEBUG line.
struct CallSignature {
  Collective collective = Collective::allreduce;
  std::uint64_t count = 0;
  int type = -1;  // DataType, or -1 where the collective has none
  int op = -1;    // ReduceOp, or -1
  int root = -1;
  std::uint64_t hash() const;
  std::string describe() const;
};

// Wraps an algorithm's task: with COLLX_CHECK=1 the ranks first compare call signatures and
// all fail together on a mismatch; with COLLX_DEBUG=INFO the call is logged on stderr.
Task prepare(Operation& op, const CallSignature& signature, Task body);
Request start_nonblocking(std::shared_ptr<Operation> op, Task task);

// Runs the task that `make(op)` builds, blocking or nonblocking (the operation keeps `state`
// alive). `path`: how bytes move where they are not host memory. Point-to-point (no `signature`)
// runs on the point-to-point transport.
template <class MakeTask>
Request launch(const std::shared_ptr<CommState>& state, const OpInfo& info,
               const CallSignature* signature, bool blocking, MakeTask&& make,
               std::unique_ptr<DataPath> path = nullptr) {
  Transport& transport = signature != nullptr ? *state->transport : *state->p2p_transport;
  if (blocking) {
    Operation op(transport, info, {}, std::move(path));
    Task task = make(op);
    const Config& c = config();
    if (signature != nullptr && (c.check || c.debug >= DebugLevel::info)) [[unlikely]]
      task = prepare(op, *signature, std::move(task));
    run_blocking(op, std::move(task));
    return {};
  }
  auto op = std::make_shared<Operation>(transport, info, state, std::move(path));
  Task task = make(*op);
  if (signature != nullptr) task = prepare(*op, *signature, std::move(task));
  return start_nonblocking(std::move(op), std::move(task));
}

// Every collective entry point runs through this: a revoked communicator fails at once, and a
// call that fails before it takes its sequence number (nothing was sent) tells the other ranks,
// which may be waiting for it (failure_notices.hpp).
template <class Call>
auto guarded(const std::shared_ptr<CommState>& s, Collective collective, Call&& call)
    -> decltype(call()) {
  FailureNotices& notices = *live(s)->notices;
  notices.before_call(collective);
  const std::uint64_t sequence = s->next_sequence;
  try {
    return call();
  } catch (const Error& e) {
    if (s->next_sequence == sequence) {
      notices.failed_locally(s->next_sequence++, collective,
                             std::string(to_string(e.code())) + ": " + e.detail());
    }
    throw;
  }
}

// Whether a call's result bits can depend on the algorithm: a floating-point sum, product or
// average over three or more ranks ((x0 + x1) + x2 may differ from x0 + (x1 + x2)). Two ranks'
// values are combined once, rank 0's first, by every algorithm (SimTwoRanks checks it).
inline bool order_sensitive(const CallSignature& signature, int nranks) {
  if (nranks <= 2) return false;
  if (signature.op < 0 || signature.type < 0) return false;
  const auto op = static_cast<ReduceOp>(signature.op);
  return (op == ReduceOp::sum || op == ReduceOp::prod || op == ReduceOp::avg) &&
         is_floating(static_cast<DataType>(signature.type));
}

// Whether a call has nothing to move (0 bytes on every rank: equal counts, or a reduce_scatter_v
// with only empty blocks): it is done once checked, with no sequence number taken. Not a barrier,
// nor under COLLX_CHECK, which still compares the signature across ranks.
inline bool nothing_to_move(Collective collective, std::size_t bytes) {
  return bytes == 0 && collective != Collective::barrier && !config().check;
}

// The MPI library's error `code` from a delegated call, as collx's (out of line: the delegated
// path's frame stays small).
[[noreturn, gnu::cold]] void library_collective_failed(const CommState& s, Collective collective,
                                                       int code);
// A delegated call (CommState::delegates): `call()` makes the MPI library's blocking collective
// (collx's operations in flight go on inside it) and takes a sequence number like every call.
template <class Call>
[[gnu::always_inline]] inline void run_delegated(CommState& s, Collective collective, Call&& call) {
  const int code = blocking_library_call(call);
  ++s.next_sequence;
  if (code != MPI_SUCCESS) [[unlikely]]
    library_collective_failed(s, collective, code);
}

// Whether the MPI library's own collective (Algorithm::mpi) takes a call of this signature.
inline bool library_takes(const CallSignature& signature, std::size_t bytes) {
  if (signature.op < 0 || signature.type < 0) return library_takes(bytes);
  return library_takes(bytes, static_cast<DataType>(signature.type),
                       static_cast<ReduceOp>(signature.op));
}

// Resolves the algorithm (explicit, COLLX_ALGO, table; as for host memory whatever the call's,
// so ranks whose buffers differ in kind run one), numbers the operation and runs
// make(op, algorithm); `bytes` keys the table. `host_copies(staged)` points the arguments at host
// copies of device buffers where the call runs on them. `library_call()`, the call as the MPI
// library's blocking collective (null: none): a blocking host call that runs the MPI library's
// row runs it on the delegated path, as its class would once settled. `at_once(arena)` (null:
// none), the call's shared-memory row run at once without an operation (false: not done, the
// operation runs it), for a blocking host call of that row.
template <class MakeTask, class HostCopies = std::nullptr_t, class LibraryCall = std::nullptr_t,
          class AtOnce = std::nullptr_t>
Request run_collective(const std::shared_ptr<CommState>& state, Collective collective,
                       std::size_t bytes, const Options& options, const CallSignature& signature,
                       bool blocking, MakeTask&& make, std::unique_ptr<DeviceCall> device = nullptr,
                       HostCopies&& host_copies = nullptr, LibraryCall&& library_call = nullptr,
                       AtOnce&& at_once = nullptr) {
  using Clock = CallClock;  // simulated time under SMPI (base/call_clock.hpp)
  // A trial of collx's candidates is timed from here (the choice and bookkeeping are part of its
  // cost); the MPI library's from its start, as once chosen it skips this bookkeeping.
  // A caller in front of collx (the drop-in) may have marked its own entry: its work is the call's
  // too.
  Clock::time_point entered{};
  if (blocking && state->trials_running()) {
    entered = state->caller_entry();
    if (entered == Clock::time_point{}) entered = Clock::now();
  }
  const bool arena = state->arena_for(bytes);
  const CommState::CallChoice choice =
      state->choose(collective, options.algorithm, bytes, arena, blocking,
                    order_sensitive(signature, state->size));
  Algorithm algorithm = choice.algorithm;
  const AlgorithmRow* row = find_row(collective, algorithm);
  bool library = row != nullptr && row->mpi_library;
  // The MPI library cannot take a 16-bit float or avg reduction, or a count beyond its int.
  if (library && !library_takes(signature, bytes)) [[unlikely]] {
    if (options.algorithm == algorithm) {
      throw Error(ErrorCode::unsupported, to_string(collective), state->rank,
                  "algorithm mpi: the MPI library has no such reduction, or the count exceeds "
                  "its int");
    }
    algorithm = state->table_choice(collective, bytes);
    library = false;
  }
  // Hands a timed call's duration from `started` to its tuner.
  const auto timed = [&](Clock::time_point started) {
    if (choice.tuner == nullptr) return;
    state->after_timed_call(collective, bytes, *choice.tuner,
                            std::chrono::duration<double>(Clock::now() - started).count());
  };
  if constexpr (!std::is_same_v<std::decay_t<LibraryCall>, std::nullptr_t>) {
    if (library && blocking && device == nullptr && CommState::may_delegate(options)) {
      if (choice.meet) [[unlikely]]
        state->meet();
      const Clock::time_point started =
          choice.tuner != nullptr ? Clock::now() : Clock::time_point{};
      run_delegated(*state, collective, library_call);
      timed(started);
      return {};
    }
  }
  std::unique_ptr<DataPath> path;
  const StagedCall* inputs_in_flight = nullptr;  // a nonblocking call on host copies
  if (device != nullptr) [[unlikely]] {
    if constexpr (!std::is_same_v<std::decay_t<HostCopies>, std::nullptr_t>) {
      if (needs_host_copy(collective, algorithm, arena, bytes, blocking, *device)) {
        auto staged = std::make_unique<StagedCall>(*state->transport, std::move(device));
        host_copies(*staged);
        if (blocking) {
          staged->inputs_ready();
        } else {
          inputs_in_flight = staged.get();
        }
        path = std::move(staged);
      }
    }
    if (path == nullptr) path = std::move(device);
  }
  if (choice.meet) [[unlikely]]
    state->meet();
  const Clock::time_point started = choice.tuner == nullptr ? Clock::time_point{}
                                    : entered != Clock::time_point{} && !choice.meet && !library
                                        ? entered
                                        : Clock::now();
  if constexpr (!std::is_same_v<std::decay_t<AtOnce>, std::nullptr_t>) {
    // What the operation's construction, frames and turn would cost a small call, skipped where
    // the row's one wait ends at once; the call still takes its sequence number.
    if (algorithm == Algorithm::shared_memory && blocking && path == nullptr && arena &&
        options.stream == nullptr && options.pipeline_depth >= 0 &&
        !CommState::needs_collx_path(config()) && state->notices->quiet()) {
      if (at_once(*state->transport->shared_arena())) {
        ++state->next_sequence;
        timed(started);
        return {};
      }
    }
  }
  OpInfo info = state->next_op(collective, algorithm, options);
  if (choice.segment_bytes != 0 && options.segment_bytes == 0)
    info.segment_bytes = choice.segment_bytes;
  info.shared_arena = arena;
  info.blocking = blocking;
  Request done = launch(
      state, info, &signature, blocking,
      [&](Operation& op) {
        if (inputs_in_flight != nullptr) [[unlikely]]
          return after_inputs_landed(op, *inputs_in_flight, make(op, algorithm));
        return make(op, algorithm);
      },
      std::move(path));
  timed(started);
  return done;
}

}  // namespace collx::detail
