// The MPI_Requests of the layer's nonblocking and persistent collectives, and the MPI's
// completion calls, which see them first. A nonblocking call's request is a generalized request
// (PMPI_Grequest_start) that the layer completes once its call has completed on this rank; a
// persistent one's is a stand-in, a persistent barrier on MPI_COMM_SELF that the layer starts
// (and the MPI then completes at once) once the call it stands for has completed. Until then the
// MPI sees the one as incomplete and the other as inactive, so a completion call the layer did not
// take first could never report either early. The layer completes them from the program's own
// thread, inside its completion calls, as the MPI allows at any thread level; the calls
// themselves run on the team's worker (progress.hpp) or on the waiting thread.
#include <sched.h>

#include <atomic>
#include <memory>
#include <vector>

#include "mpi/layer.hpp"
#include "shm/rounds.hpp"

namespace shmcoll::mpi {

namespace {

struct LayerRequest {
  Request call;                   // the call in flight
  bool in_flight = false;         // started, not yet completed at the MPI
  MPI_Comm comm = MPI_COMM_NULL;  // whose error handler reports a failure
  // Persistent: issues the call again (MPI_Start); null for a nonblocking call.
  std::function<Request()> restart;
};

// Under the SharedTables lock: the requests in use, and entries kept for reuse (a call's
// bookkeeping allocates nothing once a few have been made). An entry stays where it is while it
// is in use (only the thread that completes or frees its request removes it: two threads may not
// complete one request at once).
struct Table {
  std::vector<std::pair<MPI_Request, LayerRequest*>> in_use;
  std::vector<LayerRequest*> kept;
  std::vector<std::unique_ptr<LayerRequest>> all;  // owns every entry
};
Table& table() {
  static Table requests;
  return requests;
}
// The number in use, read without the lock: while it is 0 every completion call is the MPI's own.
std::atomic<int> held{0};

bool none_held() {
  return held.load(std::memory_order_acquire) == 0;
}

LayerRequest* find(MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return nullptr;
  const SharedTables lock;
  for (const auto& [handle, entry] : table().in_use) {
    if (handle == request) return entry;
  }
  return nullptr;
}

void forget(MPI_Request request) {
  const SharedTables lock;
  auto& in_use = table().in_use;
  for (auto at = in_use.begin(); at != in_use.end(); ++at) {
    if (at->first != request) continue;
    *at->second = LayerRequest{};
    table().kept.push_back(at->second);
    *at = in_use.back();
    in_use.pop_back();
    held.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
}

void remember(MPI_Request request, LayerRequest entry) {
  const SharedTables lock;
  Table& requests = table();
  if (requests.kept.empty()) {
    requests.all.push_back(std::make_unique<LayerRequest>());
    requests.kept.push_back(requests.all.back().get());
  }
  LayerRequest* slot = requests.kept.back();
  requests.kept.pop_back();
  *slot = std::move(entry);
  requests.in_use.emplace_back(request, slot);
  held.fetch_add(1, std::memory_order_acq_rel);
}

// A collective's status is undefined but for its error (MPI 4.0, 6.12): an empty one.
int empty_status(void*, MPI_Status* status) {
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  return MPI_SUCCESS;
}
int nothing_to_free(void*) {
  return MPI_SUCCESS;
}
// Cancelling a collective is erroneous (MPI 4.0, 3.8.4): nothing is cancelled.
int cannot_cancel(void*, int) {
  return MPI_SUCCESS;
}

enum class Progress { not_layers, pending, complete };

// Completes `request` at the MPI once the layer's call behind it has completed (`wait`: waits
// for that first). A failed call's error goes through its communicator's handler into *error.
Progress settle(MPI_Request request, bool wait, int* error) {
  if (none_held()) return Progress::not_layers;
  LayerRequest* entry = find(request);
  if (!entry || !entry->in_flight) return Progress::not_layers;
  if (!wait && !entry->call.test()) return Progress::pending;
  try {
    entry->call.wait();
  } catch (const Error& failure) {
    *error = raise_error(entry->comm, failure);
  }
  entry->in_flight = false;
  if (entry->restart) {
    MPI_Request stand_in = request;
    PMPI_Start(&stand_in);
  } else {
    forget(request);
    PMPI_Grequest_complete(request);
  }
  return Progress::complete;
}

// Settles every request of the layer's in `requests` that has completed; true when one is
// still in flight.
bool settle_all(int count, const MPI_Request* requests, int* error) {
  bool pending = false;
  for (int i = 0; i < count; ++i) pending |= settle(requests[i], false, error) == Progress::pending;
  return pending;
}

// A completion call that found a call of the layer's still in flight returns to a program that
// may poll again at once: the MPI progresses, and this thread gives its CPU to the team's worker,
// which where it shares the CPU (at the lowest priority) would otherwise wait for a time slice.
void let_calls_progress() {
  drive_mpi_progress();
  sched_yield();
}

// Waits a little for the first call of the layer's in flight in `requests` (the worker runs it
// meanwhile), then lets the MPI progress: the step of a completion call that must return as soon
// as any one request completes, the MPI's or the layer's.
void wait_a_little(int count, const MPI_Request* requests) {
  for (int i = 0; i < count; ++i) {
    LayerRequest* entry = find(requests[i]);
    if (entry && entry->in_flight) {
      entry->call.wait_for(std::chrono::microseconds(50));
      break;
    }
  }
  drive_mpi_progress();
}

int first_error(int error, int result) {
  return error != MPI_SUCCESS ? error : result;
}

}  // namespace

void drive_mpi_progress() {
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

void start_nonblocking(MPI_Comm comm, Request call, MPI_Request* request) {
  PMPI_Grequest_start(empty_status, nothing_to_free, cannot_cancel, nullptr, request);
  remember(*request, {std::move(call), true, comm, nullptr});
}

void make_persistent(MPI_Comm comm, std::function<Request()> issue, MPI_Request* request) {
#if MPI_VERSION >= 4
  // A persistent barrier on MPI_COMM_SELF, not a persistent send to MPI_PROC_NULL: under MPICH
  // 4.0.2 across nodes, the MPI's next persistent collective that reuses a freed persistent
  // send's request never completes (tests/mpi/mpi_layer_check.c, round-robin; without the layer
  // too). Only MPI 4 has persistent collectives, so only it reaches this.
  PMPI_Barrier_init(MPI_COMM_SELF, MPI_INFO_NULL, request);
#else
  PMPI_Send_init(nullptr, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_SELF, request);
#endif
  remember(*request, {Request(), false, comm, std::move(issue)});
}

}  // namespace shmcoll::mpi

using namespace shmcoll::mpi;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (none_held()) return PMPI_Wait(request, status);
  shmcoll::shm::set_wait_idle_hook(&drive_mpi_progress);
  int error = MPI_SUCCESS;
  settle(*request, true, &error);
  return first_error(error, PMPI_Wait(request, status));
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  int error = MPI_SUCCESS;
  if (settle(*request, false, &error) == Progress::pending) {
    *flag = 0;
    let_calls_progress();
    return MPI_SUCCESS;
  }
  return first_error(error, PMPI_Test(request, flag, status));
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  int error = MPI_SUCCESS;
  if (settle(request, false, &error) == Progress::pending) {
    *flag = 0;
    let_calls_progress();
    return MPI_SUCCESS;
  }
  return first_error(error, PMPI_Request_get_status(request, flag, status));
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (none_held()) return PMPI_Waitall(count, requests, statuses);
  shmcoll::shm::set_wait_idle_hook(&drive_mpi_progress);
  int error = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) settle(requests[i], true, &error);
  return first_error(error, PMPI_Waitall(count, requests, statuses));
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  int error = MPI_SUCCESS;
  if (settle_all(count, requests, &error)) {
    *flag = 0;
    let_calls_progress();
    return error;
  }
  return first_error(error, PMPI_Testall(count, requests, flag, statuses));
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (none_held()) return PMPI_Waitany(count, requests, index, status);
  for (;;) {
    int error = MPI_SUCCESS;
    if (!settle_all(count, requests, &error)) {
      return first_error(error, PMPI_Waitany(count, requests, index, status));
    }
    int flag = 0;
    const int result = PMPI_Testany(count, requests, index, &flag, status);
    if (result != MPI_SUCCESS || error != MPI_SUCCESS) return first_error(error, result);
    if (flag && *index != MPI_UNDEFINED) return MPI_SUCCESS;
    wait_a_little(count, requests);
  }
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  int error = MPI_SUCCESS;
  const bool pending = settle_all(count, requests, &error);
  const int result = PMPI_Testany(count, requests, index, flag, status);
  // The MPI says "no active request" (flag, MPI_UNDEFINED) when only the layer's are in flight.
  if (pending && *flag && *index == MPI_UNDEFINED) *flag = 0;
  if (pending && !*flag) let_calls_progress();
  return first_error(error, result);
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (none_held()) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  for (;;) {
    int error = MPI_SUCCESS;
    if (!settle_all(incount, requests, &error)) {
      return first_error(error, PMPI_Waitsome(incount, requests, outcount, indices, statuses));
    }
    const int result = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (result != MPI_SUCCESS || error != MPI_SUCCESS) return first_error(error, result);
    if (*outcount != MPI_UNDEFINED && *outcount > 0) return MPI_SUCCESS;
    wait_a_little(incount, requests);
  }
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  int error = MPI_SUCCESS;
  const bool pending = settle_all(incount, requests, &error);
  const int result = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  if (pending && *outcount == MPI_UNDEFINED) *outcount = 0;
  if (pending && *outcount == 0) let_calls_progress();
  return first_error(error, result);
}

// Freeing a nonblocking collective's request is erroneous (MPI 4.0, 3.7.3); the layer waits for
// the call rather than let it write a buffer the program may reuse. A persistent request is
// freed when inactive, as the standard requires, and its plan with it.
int MPI_Request_free(MPI_Request* request) {
  int error = MPI_SUCCESS;
  settle(*request, true, &error);
  if (!none_held()) forget(*request);
  return first_error(error, PMPI_Request_free(request));
}

int MPI_Start(MPI_Request* request) {
  LayerRequest* entry = none_held() ? nullptr : find(*request);
  if (!entry || !entry->restart) return PMPI_Start(request);
  try {
    entry->call = entry->restart();
  } catch (const shmcoll::Error& error) {  // its team ended (a mismatch, a dead peer)
    return raise_error(entry->comm, error);
  }
  entry->in_flight = true;
  return MPI_SUCCESS;
}

int MPI_Startall(int count, MPI_Request requests[]) {
  for (int i = 0; i < count; ++i) {
    const int result = MPI_Start(&requests[i]);
    if (result != MPI_SUCCESS) return result;
  }
  return MPI_SUCCESS;
}

}  // extern "C"
