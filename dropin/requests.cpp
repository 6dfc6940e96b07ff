// Nonblocking collectives on collx as MPI requests: a generalized request per collx request,
// completed by the intercepted MPI_Wait/MPI_Test family (which drive collx's progress), then
// freed by MPI as any request.
#include <unordered_map>

#include "interpose.hpp"

namespace collx_mpi {

namespace {

struct Pending {
  collx::Request request;
  MPI_Comm comm;
};

// The collx requests not complete yet, by their MPI handle. Under the thread levels collx
// takes (not MPI_THREAD_MULTIPLE) one thread calls MPI at a time.
std::unordered_map<MPI_Request, Pending*> pending;

int query(void*, MPI_Status* status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_UNDEFINED;
  status->MPI_TAG = MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int free_pending(void* state) {
  delete static_cast<Pending*>(state);
  return MPI_SUCCESS;
}

int cancel(void*, int) {
  return MPI_SUCCESS;
}  // a collective cannot be cancelled (MPI-3 5.12)

// Drives the collx request behind `request` (none: nothing to do); when it is complete, MPI's
// request is completed too. Returns collx's error as an MPI code (after the communicator's
// error handler saw it), or MPI_SUCCESS.
int progress(MPI_Request request, bool block) {
  const auto found = pending.find(request);
  if (found == pending.end()) return MPI_SUCCESS;
  Pending& state = *found->second;
  int error = MPI_SUCCESS;
  try {
    if (block)
      state.request.wait();
    else if (!state.request.test())
      return MPI_SUCCESS;
  } catch (...) {
    error = raise_error(state.comm);
  }
  pending.erase(found);
  PMPI_Grequest_complete(request);
  return error;
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

}  // namespace

MPI_Request start_request(collx::Request request, MPI_Comm comm) {
  auto* state = new Pending{std::move(request), comm};
  MPI_Request handle = MPI_REQUEST_NULL;
  PMPI_Grequest_start(query, free_pending, cancel, state, &handle);
  pending.emplace(handle, state);
  return handle;
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
// among theirs: MPI alone would wait for a generalized request nobody completes.
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
