#include <string>
#include <vector>

#include "collx/build_config.hpp"
#include "collx/communicator.hpp"
#include "collx/error.hpp"
#include "comm_state.hpp"
#include "config.hpp"
#include "cost_model.hpp"
#include "cuda_aware.hpp"
#include "device_api.hpp"
#include "device_engine.hpp"
#include "registry.hpp"
#include "shm_arena.hpp"
#include "transport_mpi.hpp"
#include "tuning.hpp"
#if COLLX_HAVE_UCX
#include "transport_ucx.hpp"
#endif

namespace collx::detail {

namespace {
// The pipeline depth where neither the environment nor a tuning file sets it.
constexpr int kDefaultPipelineDepth = 4;

// The transport `choice` names: mpi or ucx (the caller resolves automatic).
std::unique_ptr<Transport> make_transport(MPI_Comm comm, [[maybe_unused]] int rank,
                                          TransportChoice choice) {
  if (choice == TransportChoice::mpi) return std::make_unique<MpiTransport>(comm);
#if COLLX_HAVE_UCX
  return std::make_unique<UcxTransport>(comm);
#else
  throw Error(ErrorCode::config, "communicator", rank,
              "the UCX transport (COLLX_TRANSPORT=ucx or TransportChoice::ucx), but this "
              "build of collx has no UCX support (configure with -DCOLLX_UCX=ON where "
              "libucx-dev is installed)");
#endif
}
// Which ranks of `comm` share a node (collective): every rank's key, the rank of its node's
// lowest rank in `comm` (or COLLX_NODE_LAYOUT's node of its MPI_COMM_WORLD rank), gathered.
std::shared_ptr<const patterns::NodeLayout> discover_node_layout(MPI_Comm comm, int rank, int size,
                                                                 bool& emulated) {
  const std::vector<int>& emulation = config().node_layout;
  emulated = !emulation.empty();
  int key = 0;
  if (emulated) {
    int world_rank = 0;
    int world_size = 0;
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size), "MPI_Comm_size");
    long described = 0;
    for (std::size_t node = 0; node < emulation.size(); ++node) {
      described += emulation[node];
      if (world_rank >= described) key = static_cast<int>(node) + 1;
    }
    if (described != world_size) {
      throw Error(ErrorCode::config, "communicator", rank,
                  "COLLX_NODE_LAYOUT describes " + std::to_string(described) +
                      " ranks, but MPI_COMM_WORLD has " + std::to_string(world_size));
    }
  } else {
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
              "MPI_Comm_split_type");
    // PMPI_ (here and below): collx's own collectives never reach a profiling layer
    // (libcollx_mpi would make a Communicator of `comm` for it, which discovers its layout here
    // again, without end). The key: the node's lowest rank in `comm`.
    const int rc = PMPI_Allreduce(&rank, &key, 1, MPI_INT, MPI_MIN, node);
    MPI_Comm_free(&node);
    check_mpi(rc, "PMPI_Allreduce");
  }
  std::vector<int> keys(static_cast<std::size_t>(size));
  check_mpi(PMPI_Allgather(&key, 1, MPI_INT, keys.data(), 1, MPI_INT, comm), "PMPI_Allgather");
  return std::make_shared<const patterns::NodeLayout>(patterns::NodeLayout::from_keys(keys));
}
}  // namespace

CommState::CommState(MPI_Comm dup, TransportChoice choice) : comm(dup) {
  try {
    check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    check_mpi(MPI_Comm_dup(comm, &p2p_comm), "MPI_Comm_dup");
    // Whether MPI takes device memory is asked once, here, at the first communicator.
    (void)cuda_awareness();
    // A tuning file that cannot be read fails here, once, on every rank alike.
    (void)active_tuning();
    // The transport asked for, else COLLX_TRANSPORT (alike on every rank, as every COLLX_*).
    const TransportChoice kind = choice == TransportChoice::automatic ? config().transport : choice;
    transport = make_transport(comm, rank, kind);
    transport->set_library_comm(comm);
    p2p_transport = make_transport(p2p_comm, rank, kind);
    // The notices take a tag above the user's point-to-point tags where MPI_TAG_UB allows.
    int* tag_ub = nullptr;
    int has_tag_ub = 0;
    check_mpi(MPI_Comm_get_attr(comm, MPI_TAG_UB, &tag_ub, &has_tag_ub), "MPI_Comm_get_attr");
    const bool spare_tag = has_tag_ub && *tag_ub > Communicator::kMaxTag;
    if (!spare_tag) check_mpi(MPI_Comm_dup(comm, &notice_comm), "MPI_Comm_dup");
    notices = std::make_unique<FailureNotices>(spare_tag ? p2p_comm : notice_comm,
                                               spare_tag ? Communicator::kMaxTag + 1 : 0, rank,
                                               size, next_sequence);
    transport->set_failure_notices(notices.get());
    // Collective like the rest of this constructor: every rank of `comm` takes part.
    node_layout = discover_node_layout(comm, rank, size, emulated_layout);
    transport->set_node_layout(node_layout);
    // Point-to-point waits yield on a node as the collectives' do (Transport::yield_when_idle).
    p2p_transport->set_node_layout(node_layout);
    // No arena across nodes (real or emulated); each node of several ranks gets its own.
    if (node_layout->nodes() == 1) {
      transport->set_shared_arena(SharedArena::create(comm));
      // Collective: every rank of `comm` comes here or none does (the arena, the device API alike).
      DeviceApi* api = transport->shared_arena() != nullptr ? device_api() : nullptr;
      if (api != nullptr) {
        device_direct_everywhere = on_every_rank(
            transport->supports_device_memory() && api->device_count() > 0, comm, rank);
      }
    } else if (node_layout->hierarchical() && config().shared_memory) {
      // Made collectively on the node's communicator (local-rank order).
      MPI_Comm node_comm = MPI_COMM_NULL;
      check_mpi(MPI_Comm_split(comm, node_layout->node_of(rank), node_layout->local_rank(rank),
                               &node_comm),
                "MPI_Comm_split");
      const std::unique_ptr<MPI_Comm, int (*)(MPI_Comm*)> freed(&node_comm, MPI_Comm_free);
      transport->set_node_arena(SharedArena::create(node_comm));
    }
  } catch (...) {
    // No destructor runs for a constructor that throws: the duplicates are freed here.
    release(true);
    throw;
  }
}

CommState::~CommState() {
  device_engines.clear();
  // A revoked communicator's MPI communicators are not freed: sends released while its failure
  // unwound may still sit in a peer's queue, and could match a later communicator's receives.
  // Nor are they where notices may still arrive (a call every rank rejected, whose answers this
  // rank has not all taken): MPI reuses a freed communicator's context, and a notice unmatched in
  // it would reach a later communicator (for collx's own, a revoke of a communicator nothing failed
  // on).
  release(!mpi_finalized() && !(notices && (notices->revoked() || notices->awaiting())));
}

void CommState::release(bool free_comms) {
  transport.reset();
  p2p_transport.reset();
  notices.reset();
  if (!free_comms) return;
  for (MPI_Comm* c : {&notice_comm, &p2p_comm, &comm})
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
}

void CommState::refresh_op_defaults(Collective collective, const Options& options) {
  if (options.pipeline_depth < 0) {
    throw Error(ErrorCode::invalid_argument, to_string(collective), rank,
                "options.pipeline_depth: " + std::to_string(options.pipeline_depth) +
                    " (segments in flight: 1 or more, or 0 for the default)");
  }
  const Config& c = config();
  if (defaults_config == &c) return;
  // Per call, then COLLX_SEGMENT_BYTES / COLLX_PIPELINE_DEPTH, the tuning file, built-in.
  const TuningTable* tuned = active_tuning();
  default_segment_bytes = c.segment_bytes                 ? c.segment_bytes
                          : tuned && tuned->segment_bytes ? tuned->segment_bytes
                                                          : kDefaultSegmentBytes;
  default_pipeline_depth = c.pipeline_depth > 0             ? c.pipeline_depth
                           : tuned && tuned->pipeline_depth ? tuned->pipeline_depth
                                                            : kDefaultPipelineDepth;
  defaults_config = &c;
}

DeviceEngine& CommState::device_engine(int device) {
  std::lock_guard lock(device_mutex);
  for (const auto& engine : device_engines) {
    if (engine->device() == device) return *engine;
  }
  std::shared_ptr<DeviceApi> api = shared_device_api();
  if (!api) throw Error(ErrorCode::internal, "", rank, "device memory without a device API");
  // Direct when the transport takes device memory itself; both transports are of one kind.
  device_engines.push_back(
      std::make_unique<DeviceEngine>(std::move(api), device, transport->supports_device_memory()));
  return *device_engines.back();
}

Request start_nonblocking(std::shared_ptr<Operation> op, Task task) {
  // Started before it is visible to the progress thread.
  op->start(std::move(task));
  Engine::instance().add(op.get());
  return Request(std::move(op));
}

}  // namespace collx::detail

namespace collx {

Communicator::Communicator(MPI_Comm comm) : Communicator(comm, TransportChoice::automatic) {}

Communicator::Communicator(MPI_Comm comm, TransportChoice transport) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    throw Error(ErrorCode::invalid_argument, "communicator", -1,
                "MPI is not initialised (call MPI_Init before creating a collx::Communicator)");
  }
  if (comm == MPI_COMM_NULL) {
    throw Error(ErrorCode::invalid_argument, "communicator", -1, "comm: MPI_COMM_NULL");
  }
  MPI_Comm dup = MPI_COMM_NULL;
  detail::check_mpi(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup");
  state_ = std::make_shared<detail::CommState>(dup, transport);
}

Communicator::Communicator(Adopt, MPI_Comm owned, TransportChoice transport)
    : state_(std::make_shared<detail::CommState>(owned, transport)) {}

Communicator Communicator::dup(TransportChoice transport) const {
  return Communicator(mpi_comm(), transport);
}

std::string_view Communicator::transport_name() const {
  return detail::state_of(*this).transport->name();
}

bool Communicator::shared_memory() const {
  return detail::state_of(*this).transport->shared_arena() != nullptr;
}

bool Communicator::node_shared_memory() const {
  return detail::state_of(*this).transport->node_arena() != nullptr;
}

NodeLayoutInfo Communicator::node_layout() const {
  const detail::CommState& s = detail::state_of(*this);
  const patterns::NodeLayout& l = *s.node_layout;
  std::vector<int> ranks_per_node;
  for (int j = 0; j < l.nodes(); ++j)
    ranks_per_node.push_back(l.ranks_on(j));
  return {l.nodes(),   std::move(ranks_per_node), l.node_of(s.rank), l.local_rank(s.rank),
          l.uniform(), s.emulated_layout,         l.describe()};
}

Algorithm Communicator::auto_choice(Collective collective, std::size_t bytes, DataType type,
                                    ReduceOp op, bool* trying) {
  detail::CommState& s = detail::state_of(*this);
  const bool arena = s.arena_for(bytes);
  const bool reducing = collective == Collective::allreduce || collective == Collective::reduce ||
                        collective == Collective::reduce_scatter ||
                        collective == Collective::reduce_scatter_v;
  const detail::CallSignature signature{collective, 0, static_cast<int>(type),
                                        reducing ? static_cast<int>(op) : -1};
  const bool order_sensitive = detail::order_sensitive(signature, s.size);
  const detail::ClassTuner* tuner = s.tuner_for(collective, bytes, order_sensitive);
  // Untried, a blocking call may run the MPI library's collective instead of the table's choice
  // (CommState::kUntriedLibraryBytes); choose() counts nothing for such a call.
  const detail::CommState::CallChoice choice =
      s.choose(collective, Algorithm::automatic, bytes, arena, tuner == nullptr, order_sensitive);
  const bool in_trials = tuner != nullptr && tuner->in_trials();
  if (trying != nullptr) *trying = in_trials;
  // The candidate of the next trial, without counting it as one.
  if (in_trials) {
    detail::ClassTuner copy = *tuner;
    return copy.pick().algorithm;
  }
  return choice.algorithm;
}

std::vector<std::string> Communicator::learned_choices() const {
  std::vector<std::string> out;
  for (bool segment_classes : {false, true}) {
    for (const auto& c : detail::state_of(*this).learned(segment_classes))
      if (c.tried()) out.push_back(detail::describe_trials(c.collective, c.size_class, *c.tuner));
  }
  return out;
}

std::vector<std::string> Communicator::unsettled_classes() const {
  std::vector<std::string> out;
  for (bool segment_classes : {false, true}) {
    for (const auto& c : detail::state_of(*this).learned(segment_classes, true)) {
      if (!c.tried() && c.tuner->in_trials())
        out.push_back(detail::describe_unsettled(c.collective, c.size_class, *c.tuner));
    }
  }
  return out;
}

std::vector<TuningRule> Communicator::learned_rules() const {
  const detail::CommState& s = detail::state_of(*this);
  std::vector<TuningRule> rules;
  // Every class of a collective up to its largest learned one: the learned choice, else the
  // table's (a tuner with one candidate holds it); one row per run of classes alike.
  for (const auto& l : s.learned()) {
    const bool continues = !rules.empty() && rules.back().collective == l.collective;
    for (int k = continues ? detail::size_class_of(rules.back().max_bytes) + 1 : 0;
         k <= l.size_class; ++k) {
      const std::size_t max_bytes = detail::size_class_max_bytes(k);
      const Algorithm algorithm =
          k == l.size_class ? l.tuner->chosen() : s.table_choice(l.collective, max_bytes);
      if (!rules.empty() && rules.back().collective == l.collective &&
          rules.back().algorithm == algorithm) {
        rules.back().max_bytes = max_bytes;
      } else {
        rules.push_back({l.collective, s.size, s.size, max_bytes, algorithm});
      }
    }
  }
  return rules;
}

Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

void detail::throw_freed() {
  throw Error(ErrorCode::communicator_freed, "communicator", -1,
              "the communicator was freed (or moved from)");
}
detail::CommState& detail::CommunicatorAccess::state(const Communicator& comm) {
  return *live(comm.state_);
}

int Communicator::rank() const {
  return detail::state_of(*this).rank;
}
int Communicator::size() const {
  return detail::state_of(*this).size;
}
MPI_Comm Communicator::mpi_comm() const {
  return detail::state_of(*this).comm;
}
bool Communicator::is_freed() const noexcept {
  return state_ == nullptr;
}

void Communicator::free() {
  // Operations in flight keep the state (and the MPI communicator) alive until they finish.
  state_.reset();
}

void Communicator::check_span_sizes(const char* collective, std::size_t send,
                                    std::size_t recv) const {
  if (send != recv) {
    throw Error(ErrorCode::invalid_argument, collective, detail::state_of(*this).rank,
                "recv: span of " + std::to_string(recv) + " elements for a send span of " +
                    std::to_string(send));
  }
}

Request::Request(std::shared_ptr<detail::Operation> operation) : operation_(std::move(operation)) {}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    Request replaced(std::move(*this));  // waited for by its destructor
    operation_ = std::move(other.operation_);
  }
  return *this;
}

Request::~Request() {
  if (!operation_) return;
  try {
    wait();
  } catch (...) {
    // Destructors must not throw; the caller chose not to wait for the error.
  }
}

void Request::wait() {
  if (!operation_) return;
  const std::shared_ptr<detail::Operation> operation = std::move(operation_);
  detail::Engine::instance().wait(*operation);
}

bool Request::test() {
  if (!operation_) return true;
  if (!detail::Engine::instance().test(*operation_)) return false;
  wait();  // removes it from the engine and reports its error
  return true;
}

}  // namespace collx
