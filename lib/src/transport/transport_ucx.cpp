#include "transport_ucx.hpp"

#include <sched.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>

#include "collx/error.hpp"
#include "config.hpp"
#include "failure_notices.hpp"
#include "transport_mpi.hpp"

namespace collx::detail {

namespace {

[[noreturn]] void throw_ucx_error(ucs_status_t status, const std::string& what, int rank) {
  throw Error(
      ErrorCode::transport, "", rank,
      what + " failed: " + ucs_status_string(status) + " (UCX " + ucp_get_version_string() + ")");
}

void check_ucx(ucs_status_t status, const char* what, int rank = -1) {
  if (status != UCS_OK) [[unlikely]]
    throw_ucx_error(status, what, rank);
}

constexpr ucp_tag_t kFullTagMask = ~ucp_tag_t{0};

using ContextPtr = std::unique_ptr<ucp_context, void (*)(ucp_context_h)>;

// A UCP context for tag messages; `estimated_peers` (> 0) is a hint for UCX's transport choice.
ContextPtr make_context(int estimated_peers) {
  ucp_config_t* config = nullptr;
  check_ucx(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read");
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | (estimated_peers > 0 ? UCP_PARAM_FIELD_ESTIMATED_NUM_EPS : 0);
  params.features = UCP_FEATURE_TAG;
  params.estimated_num_eps = static_cast<std::size_t>(estimated_peers);
  ucp_context_h context = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  check_ucx(status, "ucp_init");
  return ContextPtr(context, ucp_cleanup);
}

// "ucp_tag_recv_nbx of 4096 B from rank 3", for error messages.
std::string describe_message(const Transfer& t) {
  return "ucp_tag_" + describe(t).insert(4, "_nbx");
}

// A message above the fragment size: its fragments' requests (null once complete).
using Fragments = std::vector<void*>;

// Process-wide, never reset: every communicator gets an id above those of all earlier ones.
std::atomic<std::uint64_t> next_context_id{1};

// All ranks take the maximum of their next free ids: unused by every rank, and the same on all.
std::uint64_t agree_context_id(MPI_Comm comm, int rank) {
  std::uint64_t next = next_context_id.load();
  std::uint64_t agreed = 0;
  // PMPI_ in this file: libcollx_mpi's MPI_Allreduce would come back into collx.
  check_mpi(PMPI_Allreduce(&next, &agreed, 1, MPI_UINT64_T, MPI_MAX, comm),
            "MPI_Allreduce (UCX context id)", rank);
  if (agreed >= (std::uint64_t{1} << kUcxContextBits)) {
    throw Error(ErrorCode::transport, "", rank,
                "UCX transport: this process has created " + std::to_string(agreed) +
                    " communicators, the most its UCX tag layout can tell apart");
  }
  while (next <= agreed && !next_context_id.compare_exchange_weak(next, agreed + 1)) {
  }
  return agreed;
}

// Every rank's worker address, by rank (each sent padded to the longest: one MPI_Allgather).
std::vector<std::string> exchange_addresses(MPI_Comm comm, int rank, int size,
                                            const std::string& mine) {
  const int my_length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  check_mpi(PMPI_Allgather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm),
            "MPI_Allgather (UCX address lengths)", rank);
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * static_cast<std::size_t>(size), '\0');
  check_mpi(PMPI_Allgather(padded.data(), static_cast<int>(longest), MPI_BYTE, all.data(),
                           static_cast<int>(longest), MPI_BYTE, comm),
            "MPI_Allgather (UCX addresses)", rank);
  std::vector<std::string> addresses;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    addresses.push_back(all.substr(r * longest, static_cast<std::size_t>(lengths[r])));
  return addresses;
}

}  // namespace

// The process's UCP context and worker, and one endpoint per peer process (keyed by its worker
// address), shared by every communicator on UCX; the last communicator to go releases it.
class UcxRuntime {
 public:
  // The runtime in use, or (with `make`) a new one; `estimated_peers` is a hint for UCX's
  // transport choice.
  static std::shared_ptr<UcxRuntime> acquire(int estimated_peers, bool make = true) {
    std::lock_guard lock(instance_mutex_);
    std::shared_ptr<UcxRuntime> runtime = instance_.lock();
    if (runtime == nullptr && make)
      instance_ = runtime = std::make_shared<UcxRuntime>(estimated_peers);
    return runtime;
  }

  // A failure on the way releases what was made (the members' deleters).
  explicit UcxRuntime(int estimated_peers)
      : context_(make_context(estimated_peers)), memory_types_(query_memory_types(context_.get())) {
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    ucp_worker_h worker = nullptr;
    check_ucx(ucp_worker_create(context_.get(), &worker_params, &worker), "ucp_worker_create");
    worker_.reset(worker);
    ucp_address_t* address = nullptr;
    std::size_t length = 0;
    check_ucx(ucp_worker_get_address(worker, &address, &length), "ucp_worker_get_address");
    address_.assign(reinterpret_cast<const char*>(address), length);
    ucp_worker_release_address(worker, address);
  }

  // Endpoints are closed in flush mode (what was sent still arrives), or by force where a send
  // was abandoned (its peer may never take it, and a flush would wait for ever); then the
  // members destroy the worker and the context.
  ~UcxRuntime() {
    std::vector<void*> closing;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = abandoned_sends_.load() ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    for (auto& [address, endpoint] : endpoints_) {
      const ucs_status_ptr_t request = ucp_ep_close_nbx(endpoint, &param);
      if (UCS_PTR_IS_PTR(request)) closing.push_back(request);
    }
    while (!closing.empty()) {
      ucp_worker_progress(worker());
      std::erase_if(closing, [](void* request) {
        if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
        ucp_request_free(request);
        return true;
      });
    }
  }

  ucp_worker_h worker() const { return worker_.get(); }
  const std::string& address() const { return address_; }
  // UCS_BIT(ucs_memory_type_t) of every memory type this context handles.
  std::uint64_t memory_types() const { return memory_types_; }

  static std::uint64_t query_memory_types(ucp_context_h context) {
    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    check_ucx(ucp_context_query(context, &attr), "ucp_context_query");
    return attr.memory_types;
  }

  // A send released before it completed (UcxTransport::abandon): see ~UcxRuntime.
  void note_abandoned_send() { abandoned_sends_.store(true); }

  // The endpoint to the worker at `peer_address`, created on first use.
  ucp_ep_h endpoint(const std::string& peer_address, int rank) {
    std::lock_guard lock(endpoints_mutex_);
    const auto found = endpoints_.find(peer_address);
    if (found != endpoints_.end()) return found->second;
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ucp_ep_h endpoint = nullptr;
    check_ucx(ucp_ep_create(worker(), &params, &endpoint), "ucp_ep_create", rank);
    endpoints_.emplace(peer_address, endpoint);
    return endpoint;
  }

 private:
  // The runtime in use (constant-initialised: no order of static construction to mind).
  static inline std::mutex instance_mutex_;
  static inline std::weak_ptr<UcxRuntime> instance_;

  ContextPtr context_;
  std::uint64_t memory_types_;
  std::unique_ptr<ucp_worker, void (*)(ucp_worker_h)> worker_{nullptr, ucp_worker_destroy};
  std::string address_;
  std::mutex endpoints_mutex_;
  std::unordered_map<std::string, ucp_ep_h> endpoints_;
  std::atomic<bool> abandoned_sends_{false};
};

UcxTransport::UcxTransport(MPI_Comm comm, std::size_t max_fragment_bytes)
    : Transport(comm), max_fragment_bytes_(max_fragment_bytes) {
  if (size() > (1 << kUcxRankBits)) {
    throw Error(ErrorCode::transport, "", rank(),
                "UCX transport: a communicator of " + std::to_string(size()) +
                    " ranks exceeds the UCX tag layout (at most " +
                    std::to_string(1 << kUcxRankBits) + " ranks)");
  }
  if (max_fragment_bytes_ == 0) {
    throw Error(ErrorCode::internal, "", rank(), "UCX transport: a fragment size of 0 bytes");
  }
  runtime_ = UcxRuntime::acquire(size());
  worker_ = runtime_->worker();
  context_id_ = agree_context_id(comm, rank());
  for (const std::string& address : exchange_addresses(comm, rank(), size(), runtime_->address()))
    endpoints_.push_back(runtime_->endpoint(address, rank()));
  // Connecting attaches to the peer's worker, so no rank may release its runtime (as it could
  // once this communicator is gone) before every rank has connected.
  check_mpi(PMPI_Barrier(comm), "MPI_Barrier (UCX endpoints)", rank());
}

void UcxTransport::post(Transfer& t, void* buf, int tag, bool device) {
  // Not pending until posted: a post that fails leaves nothing to wait for or to release.
  t.state = Transfer::State::idle;
  t.handle = 0;
  if (t.peer < 0 || t.peer >= size() || tag < 0 || tag >= (1 << kUcxTagBits)) [[unlikely]] {
    throw Error(ErrorCode::internal, "", rank(),
                "UCX transport: peer " + std::to_string(t.peer) + " or tag " + std::to_string(tag) +
                    " out of range");
  }
  const ucp_tag_t ucx_tag =
      make_ucx_tag(context_id_, static_cast<std::uint64_t>(t.is_send ? rank() : t.peer),
                   static_cast<std::uint64_t>(tag));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  // Where the buffer lives: UCX's hint, else it looks it up.
  param.memory_type = device ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
  // No callback: completion is polled with ucp_request_check_status in test_all/wait_all.
  auto post_fragment = [&](std::byte* fragment, std::size_t length) -> void* {
    const ucs_status_ptr_t request =
        t.is_send ? ucp_tag_send_nbx(endpoints_[static_cast<std::size_t>(t.peer)], fragment, length,
                                     ucx_tag, &param)
                  : ucp_tag_recv_nbx(worker_, fragment, length, ucx_tag, kFullTagMask, &param);
    if (UCS_PTR_IS_ERR(request)) [[unlikely]] {
      throw_ucx_error(UCS_PTR_STATUS(request), describe_message(t), rank());
    }
    return request;  // null: completed at once
  };
  auto* data = static_cast<std::byte*>(buf);
  if (t.bytes <= max_fragment_bytes_) {
    t.handle = reinterpret_cast<std::uintptr_t>(post_fragment(data, t.bytes));
    t.state = t.handle == 0 ? Transfer::State::done : Transfer::State::pending;
    return;
  }
  // Above the fragment size (told apart by t.bytes): every fragment in flight at once, pending
  // until a test has seen them all complete.
  auto fragments = std::make_unique<Fragments>();
  fragments->reserve((t.bytes + max_fragment_bytes_ - 1) / max_fragment_bytes_);
  try {
    for (std::size_t offset = 0; offset < t.bytes; offset += max_fragment_bytes_)
      fragments->push_back(
          post_fragment(data + offset, std::min(max_fragment_bytes_, t.bytes - offset)));
  } catch (...) {
    // The fragments already posted go on inside UCX; their requests are no longer ours.
    for (void* request : *fragments)
      if (request != nullptr) ucp_request_free(request);
    throw;
  }
  t.handle = reinterpret_cast<std::uintptr_t>(fragments.release());
  t.state = Transfer::State::pending;
}

bool UcxTransport::settle(Transfer& t, bool abandoning) {
  ucs_status_t failure = UCS_OK;
  bool in_progress = false;
  // Its one request (`one`), or its fragments' (told apart by t.bytes); none where not posted.
  void* one = reinterpret_cast<void*>(t.handle);
  std::span<void*> requests(&one, one != nullptr ? 1 : 0);
  if (one != nullptr && t.bytes > max_fragment_bytes_) requests = *static_cast<Fragments*>(one);
  for (void*& request : requests) {
    if (request == nullptr) continue;
    if (abandoning && !t.is_send) {
      ucp_request_cancel(worker_, request);
      while (ucp_request_check_status(request) == UCS_INPROGRESS)
        ucp_worker_progress(worker_);
    }
    const ucs_status_t status = ucp_request_check_status(request);
    if (status == UCS_INPROGRESS && !abandoning) {
      in_progress = true;
      continue;
    }
    if (status == UCS_INPROGRESS) runtime_->note_abandoned_send();  // it finishes inside UCX
    ucp_request_free(request);
    request = nullptr;
    if (status != UCS_OK && status != UCS_INPROGRESS && failure == UCS_OK) failure = status;
  }
  if (failure == UCS_OK && in_progress) return false;
  // After a failure the other fragments' requests are no longer ours either.
  for (void* request : requests)
    if (request != nullptr) ucp_request_free(request);
  if (t.bytes > max_fragment_bytes_) delete reinterpret_cast<Fragments*>(t.handle);
  t.handle = 0;
  t.state = Transfer::State::done;
  if (failure != UCS_OK && !abandoning) throw_ucx_error(failure, describe_message(t), rank());
  return true;
}

void UcxTransport::progress() {
  // Oversubscribed, a rank spinning here takes the processor from the peer it waits for.
  if (ucp_worker_progress(worker_) == 0 && yield_when_idle()) sched_yield();
  // The communicator's failure notices travel on MPI (failure_notices.hpp).
  if (FailureNotices* notices = failure_notices()) notices->poll();
}

bool UcxTransport::message_arrived(int tag) {
  const ucp_tag_t source_bits = ((ucp_tag_t{1} << kUcxRankBits) - 1) << kUcxTagBits;
  const ucp_tag_t wanted = make_ucx_tag(context_id_, 0, static_cast<std::uint64_t>(tag));
  ucp_tag_recv_info_t info{};
  return ucp_tag_probe_nb(worker_, wanted, ~source_bits, 0, &info) != nullptr;
}

bool UcxTransport::test_or_wait_all(std::span<Transfer* const> ts, bool wait) {
  if (!wait) progress();
  for (unsigned spins = 1;; ++spins) {
    bool all_done = true;
    for (Transfer* t : ts)
      if (t->pending() && !settle(*t)) all_done = false;
    if (all_done || !wait) return all_done;
    if (ucp_worker_progress(worker_) == 0 && yield_when_idle()) sched_yield();
    // The notices (an MPI_Test) now and then: MPI's progress costs more than UCX's.
    if ((spins & 255) == 0) {
      if (FailureNotices* notices = failure_notices()) notices->poll();
    }
  }
}

bool UcxTransport::supports_device_memory() const {
  if (const auto forced = config().cuda_aware) return *forced;
  return (runtime_->memory_types() & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

const char* ucx_version() {
  return ucp_get_version_string();
}

std::vector<std::string> ucx_memory_types() {
  const auto runtime = UcxRuntime::acquire(0, /*make=*/false);
  const std::uint64_t types = runtime != nullptr
                                  ? runtime->memory_types()
                                  : UcxRuntime::query_memory_types(make_context(0).get());
  std::vector<std::string> names;
  for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t) {
    if (types & UCS_BIT(t)) names.emplace_back(ucs_memory_type_names[t]);
  }
  return names;
}

}  // namespace collx::detail
