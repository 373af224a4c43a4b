// Fortran's nonblocking collectives and completion calls. The layer's requests must be seen by
// every completion call before the MPI's (requests.cpp): Open MPI's Fortran bindings call its own
// nonblocking collectives and completion calls through PMPI_*, so here both have their Fortran
// names (fortran.hpp) and go on to the C entry points with the handles and statuses converted, as
// Open MPI's own bindings convert them. MPICH's mpif.h and `use mpi` bindings reach the C entry
// points already, as do its mpi_f08 collectives; its mpi_f08 completion calls are taken here.
#include <dlfcn.h>

#include <vector>

#include "mpi/fortran.hpp"

using namespace shmcoll::mpi;

#if defined(OPEN_MPI)

namespace {

using F = MPI_Fint;

// A nonblocking call's request for Fortran (the call failed: MPI_REQUEST_NULL).
void set_request(F* request, MPI_Request c_request) {
  *request = MPI_Request_c2f(c_request);
}

// Issues a nonblocking call (`call` fills in the C request) and hands Fortran its request and
// result.
template <typename Call>
void issue(F* request, F* ierror, Call&& call) {
  MPI_Request c_request = MPI_REQUEST_NULL;
  set_error(ierror, call(&c_request));
  set_request(request, c_request);
}

// The reductions of `count` elements to every rank or in parts (allreduce, reduce_scatter_block,
// scan, exscan), which take the same arguments.
using CountReduction = int (*)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm,
                               MPI_Request*);
void reduction(CountReduction call, void* send, void* recv, F* count, F* type, F* op, F* comm,
               F* request, F* ierror) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return call(send_buffer(send), recv_buffer(recv), *count, type_of(type), op_of(op),
                comm_of(comm), c_request);
  });
}

// A Fortran status and its C counterpart, converted back on destruction.
class Status {
 public:
  explicit Status(F* status) : status_(status) {}
  ~Status() {
    if (!ignored()) PMPI_Status_c2f(&c_status_, status_);
  }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;
  MPI_Status* c() { return ignored() ? MPI_STATUS_IGNORE : &c_status_; }

 private:
  bool ignored() const { return status_ == fortran_sentinels().status_ignore; }
  F* status_;
  MPI_Status c_status_{};
};

// An array of Fortran requests (and their statuses) as C ones, converted back on destruction.
// The arrays are the thread's own, reused from call to call.
class Requests {
 public:
  Requests(int count, F* requests, F* statuses = nullptr)
      : count_(count > 0 ? count : 0), requests_(requests), statuses_(statuses) {
    thread_local std::vector<MPI_Request> c_requests;
    thread_local std::vector<MPI_Status> c_statuses;
    c_requests.resize(static_cast<std::size_t>(count_));
    c_statuses.resize(static_cast<std::size_t>(count_));
    c_requests_ = c_requests.data();
    c_statuses_ = c_statuses.data();
    for (int i = 0; i < count_; ++i) c_requests_[i] = MPI_Request_f2c(requests_[i]);
  }
  ~Requests() {
    for (int i = 0; i < count_; ++i) requests_[i] = MPI_Request_c2f(c_requests_[i]);
  }
  Requests(const Requests&) = delete;
  Requests& operator=(const Requests&) = delete;
  MPI_Request* c() { return c_requests_; }
  MPI_Status* c_statuses() {
    return statuses_ == fortran_sentinels().statuses_ignore ? MPI_STATUSES_IGNORE : c_statuses_;
  }
  // The first `n` statuses back to Fortran (all of them, or those of the requests completed,
  // in the order of their indices).
  void return_statuses(int n) {
    if (statuses_ == nullptr || statuses_ == fortran_sentinels().statuses_ignore) return;
    constexpr int kFortranStatusInts = sizeof(MPI_Status) / sizeof(F);
    for (int i = 0; i < n; ++i)
      PMPI_Status_c2f(&c_statuses_[i], statuses_ + i * kFortranStatusInts);
  }

 private:
  int count_;
  F* requests_;
  F* statuses_;
  MPI_Request* c_requests_;
  MPI_Status* c_statuses_;
};

// C's index, 0-based or MPI_UNDEFINED, as Fortran's.
void to_fortran_index(F* index) {
  if (*index != MPI_UNDEFINED) ++*index;
}

}  // namespace

SHMCOLL_FORTRAN(ibarrier, IBARRIER, (F * comm, F* request, F* ierror), (comm, request, ierror)) {
  issue(request, ierror,
        [&](MPI_Request* c_request) { return MPI_Ibarrier(comm_of(comm), c_request); });
}

SHMCOLL_FORTRAN(ibcast, IBCAST,
                (void* buffer, F* count, F* type, F* root, F* comm, F* request, F* ierror),
                (buffer, count, type, root, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ibcast(recv_buffer(buffer), *count, type_of(type), *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(ireduce, IREDUCE,
                (void* send, void* recv, F* count, F* type, F* op, F* root, F* comm, F* request,
                 F* ierror),
                (send, recv, count, type, op, root, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ireduce(send_buffer(send), recv_buffer(recv), *count, type_of(type), op_of(op),
                       *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(iallreduce, IALLREDUCE,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* request, F* ierror),
                (send, recv, count, type, op, comm, request, ierror)) {
  reduction(MPI_Iallreduce, send, recv, count, type, op, comm, request, ierror);
}

SHMCOLL_FORTRAN(ireduce_scatter, IREDUCE_SCATTER,
                (void* send, void* recv, F* counts, F* type, F* op, F* comm, F* request, F* ierror),
                (send, recv, counts, type, op, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ireduce_scatter(send_buffer(send), recv_buffer(recv), counts, type_of(type),
                               op_of(op), comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* request, F* ierror),
                (send, recv, count, type, op, comm, request, ierror)) {
  reduction(MPI_Ireduce_scatter_block, send, recv, count, type, op, comm, request, ierror);
}

SHMCOLL_FORTRAN(iscan, ISCAN,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* request, F* ierror),
                (send, recv, count, type, op, comm, request, ierror)) {
  reduction(MPI_Iscan, send, recv, count, type, op, comm, request, ierror);
}

SHMCOLL_FORTRAN(iexscan, IEXSCAN,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* request, F* ierror),
                (send, recv, count, type, op, comm, request, ierror)) {
  reduction(MPI_Iexscan, send, recv, count, type, op, comm, request, ierror);
}

SHMCOLL_FORTRAN(iscatter, ISCATTER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* root, F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
                 ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    // The receive buffer is MPI_IN_PLACE at the root of an in-place call.
    return MPI_Iscatter(send_buffer(send), *send_count, type_of(send_type),
                        const_cast<void*>(send_buffer(recv)), *recv_count, type_of(recv_type),
                        *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(iscatterv, ISCATTERV,
                (void* send, F* send_counts, F* displs, F* send_type, void* recv, F* recv_count,
                 F* recv_type, F* root, F* comm, F* request, F* ierror),
                (send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm,
                 request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Iscatterv(send_buffer(send), send_counts, displs, type_of(send_type),
                         const_cast<void*>(send_buffer(recv)), *recv_count, type_of(recv_type),
                         *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(igather, IGATHER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* root, F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
                 ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Igather(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                       *recv_count, type_of(recv_type), *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(igatherv, IGATHERV,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_counts, F* displs,
                 F* recv_type, F* root, F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm,
                 request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Igatherv(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                        recv_counts, displs, type_of(recv_type), *root, comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(iallgather, IALLGATHER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Iallgather(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                          *recv_count, type_of(recv_type), comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(iallgatherv, IALLGATHERV,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_counts, F* displs,
                 F* recv_type, F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, request,
                 ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Iallgatherv(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                           recv_counts, displs, type_of(recv_type), comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(ialltoall, IALLTOALL,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* comm, F* request, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ialltoall(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                         *recv_count, type_of(recv_type), comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(ialltoallv, IALLTOALLV,
                (void* send, F* send_counts, F* send_displs, F* send_type, void* recv,
                 F* recv_counts, F* recv_displs, F* recv_type, F* comm, F* request, F* ierror),
                (send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                 recv_type, comm, request, ierror)) {
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ialltoallv(send_buffer(send), send_counts, send_displs, type_of(send_type),
                          recv_buffer(recv), recv_counts, recv_displs, type_of(recv_type),
                          comm_of(comm), c_request);
  });
}

SHMCOLL_FORTRAN(ialltoallw, IALLTOALLW,
                (void* send, F* send_counts, F* send_displs, F* send_types, void* recv,
                 F* recv_counts, F* recv_displs, F* recv_types, F* comm, F* request, F* ierror),
                (send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                 recv_types, comm, request, ierror)) {
  const MPI_Comm c_comm = comm_of(comm);
  const void* c_send = send_buffer(send);
  const MPI_Datatype* c_send_types =
      c_send == MPI_IN_PLACE ? nullptr : types_of(send_types, c_comm, 0);
  issue(request, ierror, [&](MPI_Request* c_request) {
    return MPI_Ialltoallw(c_send, send_counts, send_displs, c_send_types, recv_buffer(recv),
                          recv_counts, recv_displs, types_of(recv_types, c_comm, 1), c_comm,
                          c_request);
  });
}

SHMCOLL_FORTRAN(wait, WAIT, (F * request, F* status, F* ierror), (request, status, ierror)) {
  MPI_Request c_request = MPI_Request_f2c(*request);
  Status c_status(status);
  set_error(ierror, MPI_Wait(&c_request, c_status.c()));
  set_request(request, c_request);
}

SHMCOLL_FORTRAN(test, TEST, (F * request, F* flag, F* status, F* ierror),
                (request, flag, status, ierror)) {
  MPI_Request c_request = MPI_Request_f2c(*request);
  Status c_status(status);
  int c_flag = 0;
  set_error(ierror, MPI_Test(&c_request, &c_flag, c_status.c()));
  set_logical(flag, c_flag);
  set_request(request, c_request);
}

SHMCOLL_FORTRAN(request_get_status, REQUEST_GET_STATUS,
                (F * request, F* flag, F* status, F* ierror), (request, flag, status, ierror)) {
  Status c_status(status);
  int c_flag = 0;
  set_error(ierror, MPI_Request_get_status(MPI_Request_f2c(*request), &c_flag, c_status.c()));
  set_logical(flag, c_flag);
}

SHMCOLL_FORTRAN(waitall, WAITALL, (F * count, F* requests, F* statuses, F* ierror),
                (count, requests, statuses, ierror)) {
  Requests c(*count, requests, statuses);
  set_error(ierror, MPI_Waitall(*count, c.c(), c.c_statuses()));
  c.return_statuses(*count);
}

SHMCOLL_FORTRAN(testall, TESTALL, (F * count, F* requests, F* flag, F* statuses, F* ierror),
                (count, requests, flag, statuses, ierror)) {
  Requests c(*count, requests, statuses);
  int c_flag = 0;
  set_error(ierror, MPI_Testall(*count, c.c(), &c_flag, c.c_statuses()));
  set_logical(flag, c_flag);
  if (c_flag) c.return_statuses(*count);
}

SHMCOLL_FORTRAN(waitany, WAITANY, (F * count, F* requests, F* index, F* status, F* ierror),
                (count, requests, index, status, ierror)) {
  Requests c(*count, requests);
  Status c_status(status);
  set_error(ierror, MPI_Waitany(*count, c.c(), index, c_status.c()));
  to_fortran_index(index);
}

SHMCOLL_FORTRAN(testany, TESTANY, (F * count, F* requests, F* index, F* flag, F* status, F* ierror),
                (count, requests, index, flag, status, ierror)) {
  Requests c(*count, requests);
  Status c_status(status);
  int c_flag = 0;
  set_error(ierror, MPI_Testany(*count, c.c(), index, &c_flag, c_status.c()));
  set_logical(flag, c_flag);
  to_fortran_index(index);
}

SHMCOLL_FORTRAN(waitsome, WAITSOME,
                (F * incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror),
                (incount, requests, outcount, indices, statuses, ierror)) {
  Requests c(*incount, requests, statuses);
  set_error(ierror, MPI_Waitsome(*incount, c.c(), outcount, indices, c.c_statuses()));
  if (*outcount == MPI_UNDEFINED) return;
  c.return_statuses(*outcount);
  for (int i = 0; i < *outcount; ++i) ++indices[i];
}

SHMCOLL_FORTRAN(testsome, TESTSOME,
                (F * incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror),
                (incount, requests, outcount, indices, statuses, ierror)) {
  Requests c(*incount, requests, statuses);
  set_error(ierror, MPI_Testsome(*incount, c.c(), outcount, indices, c.c_statuses()));
  if (*outcount == MPI_UNDEFINED) return;
  c.return_statuses(*outcount);
  for (int i = 0; i < *outcount; ++i) ++indices[i];
}

// Open MPI's mpi_f08 module tests requests through pmpi_test_ and the like (its waits go through
// the ompi_*_f names above), with the same arguments.
extern "C" {

void mpi_test_f08_(F* request, F* flag, F* status, F* ierror) {
  fortran_test(request, flag, status, ierror);
}

void mpi_testall_f08_(F* count, F* requests, F* flag, F* statuses, F* ierror) {
  fortran_testall(count, requests, flag, statuses, ierror);
}

void mpi_testany_f08_(F* count, F* requests, F* index, F* flag, F* status, F* ierror) {
  fortran_testany(count, requests, index, flag, status, ierror);
}

void mpi_testsome_f08_(F* incount, F* requests, F* outcount, F* indices, F* statuses, F* ierror) {
  fortran_testsome(incount, requests, outcount, indices, statuses, ierror);
}

void mpi_request_get_status_f08_(F* request, F* flag, F* status, F* ierror) {
  fortran_request_get_status(request, flag, status, ierror);
}

}  // extern "C"

#undef SHMCOLL_FORTRAN

#elif defined(MPICH_VERSION)

// MPICH's mpi_f08 completion calls call PMPI_* directly, and must see the layer's nonblocking and
// persistent requests first (requests.cpp): MPICH's handles are ints and its mpi_f08 status has C's
// layout, so each goes straight to the C entry point. Indices stay as C has them: MPICH 4.0.2's own
// mpi_f08 routines return them 0-based (where the standard has Fortran's 1-based), and a program
// sees the same with and without the layer.
static_assert(sizeof(MPI_Request) == sizeof(MPI_Fint) &&
              sizeof(MPI_F08_status) == sizeof(MPI_Status));

namespace {

MPI_Request* requests_of(MPI_Fint* requests) {
  return reinterpret_cast<MPI_Request*>(requests);
}
// MPICH's mpi_f08 sentinels, MPI_F08_STATUS(ES)_IGNORE, are variables of its Fortran library from
// MPICH 4.1 on (libmpifort), which a layer built against the C library alone (FindMPI's MPI::MPI_C)
// does not link, and which an MPICH built without Fortran does not have: looked up at the first
// mpi_f08 call, which only a program with that library loaded makes.
MPI_F08_status* f08_sentinel(const char* name) {
  const auto* variable = static_cast<MPI_F08_status* const*>(dlsym(RTLD_DEFAULT, name));
  return variable ? *variable : nullptr;
}
MPI_Status* status_of(MPI_F08_status* status) {
  static MPI_F08_status* const ignore = f08_sentinel("MPI_F08_STATUS_IGNORE");
  return status == ignore ? MPI_STATUS_IGNORE : reinterpret_cast<MPI_Status*>(status);
}
MPI_Status* statuses_of(MPI_F08_status* statuses) {
  static MPI_F08_status* const ignore = f08_sentinel("MPI_F08_STATUSES_IGNORE");
  return statuses == ignore ? MPI_STATUSES_IGNORE : reinterpret_cast<MPI_Status*>(statuses);
}
}  // namespace

extern "C" {

void mpi_wait_f08_(MPI_Fint* request, MPI_F08_status* status, MPI_Fint* ierror) {
  set_error(ierror, MPI_Wait(requests_of(request), status_of(status)));
}

void mpi_test_f08_(MPI_Fint* request, MPI_Fint* flag, MPI_F08_status* status, MPI_Fint* ierror) {
  int c_flag = 0;
  set_error(ierror, MPI_Test(requests_of(request), &c_flag, status_of(status)));
  set_logical(flag, c_flag);
}

void mpi_request_get_status_f08_(MPI_Fint* request, MPI_Fint* flag, MPI_F08_status* status,
                                 MPI_Fint* ierror) {
  int c_flag = 0;
  set_error(ierror, MPI_Request_get_status(*requests_of(request), &c_flag, status_of(status)));
  set_logical(flag, c_flag);
}

void mpi_waitall_f08_(MPI_Fint* count, MPI_Fint* requests, MPI_F08_status* statuses,
                      MPI_Fint* ierror) {
  set_error(ierror, MPI_Waitall(*count, requests_of(requests), statuses_of(statuses)));
}

void mpi_testall_f08_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* flag, MPI_F08_status* statuses,
                      MPI_Fint* ierror) {
  int c_flag = 0;
  set_error(ierror, MPI_Testall(*count, requests_of(requests), &c_flag, statuses_of(statuses)));
  set_logical(flag, c_flag);
}

void mpi_waitany_f08_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_F08_status* status,
                      MPI_Fint* ierror) {
  set_error(ierror, MPI_Waitany(*count, requests_of(requests), index, status_of(status)));
}

void mpi_testany_f08_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* flag,
                      MPI_F08_status* status, MPI_Fint* ierror) {
  int c_flag = 0;
  set_error(ierror, MPI_Testany(*count, requests_of(requests), index, &c_flag, status_of(status)));
  set_logical(flag, c_flag);
}

void mpi_waitsome_f08_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                       MPI_F08_status* statuses, MPI_Fint* ierror) {
  set_error(ierror, MPI_Waitsome(*incount, requests_of(requests), outcount, indices,
                                 statuses_of(statuses)));
}

void mpi_testsome_f08_(MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                       MPI_F08_status* statuses, MPI_Fint* ierror) {
  set_error(ierror, MPI_Testsome(*incount, requests_of(requests), outcount, indices,
                                 statuses_of(statuses)));
}

void mpi_request_free_f08_(MPI_Fint* request, MPI_Fint* ierror) {
  set_error(ierror, MPI_Request_free(requests_of(request)));
}

void mpi_start_f08_(MPI_Fint* request, MPI_Fint* ierror) {
  set_error(ierror, MPI_Start(requests_of(request)));
}

void mpi_startall_f08_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* ierror) {
  set_error(ierror, MPI_Startall(*count, requests_of(requests)));
}

}  // extern "C"

#endif  // OPEN_MPI, MPICH_VERSION
