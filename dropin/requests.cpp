// Nonblocking collectives on collx as MPI requests: a generalized request per collx request,
// completed by the intercepted MPI_Wait/MPI_Test family, which drive collx's progress, and by a
// callback in the MPI library's own progress engine: while the program blocks in any other MPI
// call (a receive, a collective the drop-in passes through) collx's operations go on, as MPI's
// own nonblocking operations would, so a peer waiting in collx for this rank's part is never
// stuck. Where the MPI library offers no such callback, nonblocking collectives pass through
// (interpose.hpp, progress_hook_available).
#include <dlfcn.h>

#include <exception>
#include <unordered_map>
#include <vector>

#include "interpose.hpp"

namespace collx_mpi {

namespace {

struct Pending {
  collx::Request request;
  MPI_Comm comm;  // MPI_COMM_NULL once the program freed it
  std::unique_ptr<CallBuffers> buffers;
  std::exception_ptr failure;  // found by the progress callback, raised by the program's wait
  int error = MPI_SUCCESS;     // what MPI reports for the request (the query function's)
};

// The collx requests not complete yet, by their MPI handle. Under the thread levels collx
// takes (not MPI_THREAD_MULTIPLE) one thread calls MPI at a time.
std::unordered_map<MPI_Request, Pending*> pending;

// Set while the drop-in runs collx's code (an intercepted call, a wait): the MPI library's
// progress may call back into us from inside it, and collx's engine is not re-entrant.
int inside_collx = 0;
struct InsideCollx {
  InsideCollx() { ++inside_collx; }
  ~InsideCollx() { --inside_collx; }
  InsideCollx(const InsideCollx&) = delete;
  InsideCollx& operator=(const InsideCollx&) = delete;
};

int query(void* state, MPI_Status* status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return static_cast<Pending*>(state)->error;
}

int free_pending(void* state) {
  delete static_cast<Pending*>(state);
  return MPI_SUCCESS;
}

int cancel(void*, int) {
  return MPI_SUCCESS;
}  // a collective cannot be cancelled (MPI-3 5.12)

// Completes MPI's request behind a finished collx request (its outputs unpacked first).
int complete(std::unordered_map<MPI_Request, Pending*>::iterator found) {
  const MPI_Request request = found->first;
  Pending& state = *found->second;
  state.buffers.reset();
  pending.erase(found);
  PMPI_Grequest_complete(request);
  return state.error;
}

// Drives the collx request behind `request` (none: nothing to do); when it is complete, its
// outputs are unpacked and MPI's request is completed too. Returns collx's error as an MPI
// code (after the communicator's error handler saw it), or MPI_SUCCESS.
int progress(MPI_Request request, bool block) {
  const auto found = pending.find(request);
  if (found == pending.end()) return MPI_SUCCESS;
  Pending& state = *found->second;
  const InsideCollx inside;
  try {
    if (state.failure) std::rethrow_exception(state.failure);
    if (block)
      state.request.wait();
    else if (!state.request.test())
      return MPI_SUCCESS;
    state.buffers->finish();
  } catch (...) {
    state.error = raise_error(state.comm);
  }
  return complete(found);
}

// progress() over a list of requests; the first error.
int progress_all(int count, const MPI_Request requests[], bool block) {
  int first_error = MPI_SUCCESS;
  if (pending.empty() || !requests) return first_error;
  for (int i = 0; i < count; ++i) {
    const int error = progress(requests[i], block);
    if (first_error == MPI_SUCCESS) first_error = error;
  }
  return first_error;
}

bool any_pending(int count, const MPI_Request requests[]) {
  if (pending.empty() || !requests) return false;
  for (int i = 0; i < count; ++i)
    if (pending.count(requests[i])) return true;
  return false;
}

int first_of(int error, int mpi_result) {
  return error != MPI_SUCCESS ? error : mpi_result;
}

// The MPI library's progress callback: drives every collx request once and completes those
// that finished. A failure is kept for the program's own wait on that request, which raises it
// on the request's communicator (no error handler runs inside the MPI library's progress).
int progress_callback() {
  if (inside_collx > 0 || pending.empty()) return 0;
  const InsideCollx inside;
  std::vector<MPI_Request> finished;
  for (auto& [handle, state] : pending) {
    if (state->failure) continue;
    try {
      if (!state->request.test()) continue;
      state->buffers->finish();
      finished.push_back(handle);
    } catch (...) {
      state->failure = std::current_exception();
    }
  }
  for (MPI_Request handle : finished)
    complete(pending.find(handle));
  return static_cast<int>(finished.size());
}

// Open MPI's opal_progress_register, found at run time (libcollx_mpi does not link against
// Open MPI's internals); null elsewhere.
using ProgressCallback = int (*)();
using RegisterProgress = int (*)(ProgressCallback);
RegisterProgress find_register(const char* name) {
  return reinterpret_cast<RegisterProgress>(dlsym(RTLD_DEFAULT, name));
}
bool hook_registered = false;

}  // namespace

bool progress_hook_available() {
  return find_register("opal_progress_register") != nullptr;
}

void install_progress_hook() {
  if (hook_registered) return;
  if (const RegisterProgress add = find_register("opal_progress_register")) {
    hook_registered = add(progress_callback) == 0;
  }
}

void remove_progress_hook() {
  if (!hook_registered) return;
  if (const RegisterProgress remove = find_register("opal_progress_unregister"))
    remove(progress_callback);
  hook_registered = false;
}

MPI_Request start_request(collx::Request request, MPI_Comm comm,
                          std::unique_ptr<CallBuffers> buffers) {
  auto* state = new Pending{std::move(request), comm, std::move(buffers), nullptr};
  MPI_Request handle = MPI_REQUEST_NULL;
  PMPI_Grequest_start(query, free_pending, cancel, state, &handle);
  pending.emplace(handle, state);
  return handle;
}

void forget_communicator(MPI_Comm comm) {
  for (auto& [handle, state] : pending)
    if (state->comm == comm) state->comm = MPI_COMM_NULL;
}

CollxScope::CollxScope() {
  ++inside_collx;
}
CollxScope::~CollxScope() {
  --inside_collx;
}

}  // namespace collx_mpi

using collx_mpi::any_pending;
using collx_mpi::first_of;
using collx_mpi::progress_all;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  const int error = progress_all(1, request, true);
  return first_of(error, PMPI_Wait(request, status));
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const int error = progress_all(1, request, false);
  return first_of(error, PMPI_Test(request, flag, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  const int error = progress_all(count, requests, true);
  return first_of(error, PMPI_Waitall(count, requests, statuses));
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  const int error = progress_all(count, requests, false);
  return first_of(error, PMPI_Testall(count, requests, flag, statuses));
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  const int error = progress_all(count, requests, false);
  return first_of(error, PMPI_Testany(count, requests, index, flag, status));
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const int error = progress_all(incount, requests, false);
  return first_of(error, PMPI_Testsome(incount, requests, outcount, indices, statuses));
}

// The -any and -some waits poll (collx's progress, then MPI's test) while a collx request is
// among theirs: collx's own progress is quicker than the MPI library's callback.
int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (!any_pending(count, requests)) return PMPI_Waitany(count, requests, index, status);
  for (;;) {
    int flag = 0;
    const int error = progress_all(count, requests, false);
    const int result = PMPI_Testany(count, requests, index, &flag, status);
    if (error != MPI_SUCCESS || result != MPI_SUCCESS || flag) return first_of(error, result);
  }
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (!any_pending(incount, requests))
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  for (;;) {
    const int error = progress_all(incount, requests, false);
    const int result = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (error != MPI_SUCCESS || result != MPI_SUCCESS || *outcount != 0)
      return first_of(error, result);
  }
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  const int error = progress_all(1, &request, false);
  return first_of(error, PMPI_Request_get_status(request, flag, status));
}

}  // extern "C"
