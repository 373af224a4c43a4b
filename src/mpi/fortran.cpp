// Fortran's entry points. Open MPI's Fortran bindings (mpif.h, `use mpi`, and `use mpi_f08`
// through its ompi_*_f functions) call PMPI_* directly, so the C entry points never see a Fortran
// program: here each collective, and each call whose effects the layer tracks, has the symbols
// gfortran and the other common compilers emit (mpi_allreduce_, mpi_allreduce__, mpi_allreduce,
// MPI_ALLREDUCE) and Open MPI's ompi_allreduce_f, and goes on to the C entry point with the
// handles converted and Fortran's MPI_IN_PLACE and MPI_BOTTOM recognised (they are addresses of
// the MPI's own variables there). MPICH's mpif.h and `use mpi` bindings call the C entry points
// already, as do its `use mpi_f08` routines with buffers; its other mpi_f08 routines call PMPI_*,
// and are taken here by their mpi_*_f08_ symbols.
#include "mpi/fortran.hpp"

#include <dlfcn.h>

using namespace shmcoll::mpi;

namespace {

// The MPI's own definition of a Fortran symbol this library also defines (the next one in the
// search order); called for what the layer only watches (set-up, tear-down, creating ops).
template <typename Function>
Function* next_definition(const char* name) {
  return reinterpret_cast<Function*>(dlsym(RTLD_NEXT, name));
}

// Creates the op with the MPI's Fortran routine `name`, and remembers its function.
void create_op(const char* name, MPI_User_function* function, MPI_Fint* commute, MPI_Fint* op,
               MPI_Fint* ierror) {
  MPI_Fint result = MPI_SUCCESS;
  next_definition<void(MPI_User_function*, MPI_Fint*, MPI_Fint*, MPI_Fint*)>(name)(
      function, commute, op, &result);
  set_error(ierror, result);
  if (result == MPI_SUCCESS) remember_fortran_user_op(MPI_Op_f2c(*op), function, *commute != 0);
}

// Through the C entry point, which forgets the cached handle first.
void free_op(MPI_Fint* op, MPI_Fint* ierror) {
  MPI_Op c_op = MPI_Op_f2c(*op);
  set_error(ierror, MPI_Op_free(&c_op));
  *op = MPI_Op_c2f(c_op);
}

}  // namespace

#if defined(OPEN_MPI)

namespace shmcoll::mpi {

const FortranSentinels& fortran_sentinels() {
  static const char no_such_sentinel = 0;
  auto address_of = [](const char* name) -> const void* {
    const void* found = dlsym(RTLD_DEFAULT, name);
    return found ? found : &no_such_sentinel;
  };
  static const FortranSentinels found{
      address_of("mpi_fortran_in_place_"), address_of("mpi_fortran_bottom_"),
      address_of("mpi_fortran_status_ignore_"), address_of("mpi_fortran_statuses_ignore_")};
  return found;
}

}  // namespace shmcoll::mpi

using F = MPI_Fint;

SHMCOLL_FORTRAN(init, INIT, (F * ierror), (ierror)) {
  refuse_the_wrong_mpi();
  next_definition<void(F*)>("ompi_init_f")(ierror);
  start_layer();
}

SHMCOLL_FORTRAN(init_thread, INIT_THREAD, (F * required, F* provided, F* ierror),
                (required, provided, ierror)) {
  refuse_the_wrong_mpi();
  next_definition<void(F*, F*, F*)>("ompi_init_thread_f")(required, provided, ierror);
  start_layer();
}

SHMCOLL_FORTRAN(finalize, FINALIZE, (F * ierror), (ierror)) {
  finalize_layer();
  next_definition<void(F*)>("ompi_finalize_f")(ierror);
}

SHMCOLL_FORTRAN(op_create, OP_CREATE, (MPI_User_function * function, F* commute, F* op, F* ierror),
                (function, commute, op, ierror)) {
  create_op("ompi_op_create_f", function, commute, op, ierror);
}

SHMCOLL_FORTRAN(op_free, OP_FREE, (F * op, F* ierror), (op, ierror)) {
  free_op(op, ierror);
}

SHMCOLL_FORTRAN(barrier, BARRIER, (F * comm, F* ierror), (comm, ierror)) {
  set_error(ierror, MPI_Barrier(comm_of(comm)));
}

SHMCOLL_FORTRAN(bcast, BCAST, (void* buffer, F* count, F* type, F* root, F* comm, F* ierror),
                (buffer, count, type, root, comm, ierror)) {
  set_error(ierror, MPI_Bcast(recv_buffer(buffer), *count, type_of(type), *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(reduce, REDUCE,
                (void* send, void* recv, F* count, F* type, F* op, F* root, F* comm, F* ierror),
                (send, recv, count, type, op, root, comm, ierror)) {
  set_error(ierror, MPI_Reduce(send_buffer(send), recv_buffer(recv), *count, type_of(type),
                               op_of(op), *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(allreduce, ALLREDUCE,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* ierror),
                (send, recv, count, type, op, comm, ierror)) {
  set_error(ierror, MPI_Allreduce(send_buffer(send), recv_buffer(recv), *count, type_of(type),
                                  op_of(op), comm_of(comm)));
}

SHMCOLL_FORTRAN(reduce_scatter, REDUCE_SCATTER,
                (void* send, void* recv, F* counts, F* type, F* op, F* comm, F* ierror),
                (send, recv, counts, type, op, comm, ierror)) {
  set_error(ierror, MPI_Reduce_scatter(send_buffer(send), recv_buffer(recv), counts, type_of(type),
                                       op_of(op), comm_of(comm)));
}

SHMCOLL_FORTRAN(reduce_scatter_block, REDUCE_SCATTER_BLOCK,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* ierror),
                (send, recv, count, type, op, comm, ierror)) {
  set_error(ierror, MPI_Reduce_scatter_block(send_buffer(send), recv_buffer(recv), *count,
                                             type_of(type), op_of(op), comm_of(comm)));
}

SHMCOLL_FORTRAN(scan, SCAN, (void* send, void* recv, F* count, F* type, F* op, F* comm, F* ierror),
                (send, recv, count, type, op, comm, ierror)) {
  set_error(ierror, MPI_Scan(send_buffer(send), recv_buffer(recv), *count, type_of(type), op_of(op),
                             comm_of(comm)));
}

SHMCOLL_FORTRAN(exscan, EXSCAN,
                (void* send, void* recv, F* count, F* type, F* op, F* comm, F* ierror),
                (send, recv, count, type, op, comm, ierror)) {
  set_error(ierror, MPI_Exscan(send_buffer(send), recv_buffer(recv), *count, type_of(type),
                               op_of(op), comm_of(comm)));
}

SHMCOLL_FORTRAN(reduce_local, REDUCE_LOCAL,
                (void* in, void* inout, F* count, F* type, F* op, F* ierror),
                (in, inout, count, type, op, ierror)) {
  set_error(ierror, MPI_Reduce_local(in, inout, *count, type_of(type), op_of(op)));
}

SHMCOLL_FORTRAN(scatter, SCATTER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* root, F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, root, comm, ierror)) {
  set_error(ierror,
            MPI_Scatter(send_buffer(send), *send_count, type_of(send_type),
                        // The receive buffer is MPI_IN_PLACE at the root of an in-place call.
                        const_cast<void*>(send_buffer(recv)), *recv_count, type_of(recv_type),
                        *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(scatterv, SCATTERV,
                (void* send, F* send_counts, F* displs, F* send_type, void* recv, F* recv_count,
                 F* recv_type, F* root, F* comm, F* ierror),
                (send, send_counts, displs, send_type, recv, recv_count, recv_type, root, comm,
                 ierror)) {
  set_error(ierror, MPI_Scatterv(send_buffer(send), send_counts, displs, type_of(send_type),
                                 const_cast<void*>(send_buffer(recv)), *recv_count,
                                 type_of(recv_type), *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(gather, GATHER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* root, F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, root, comm, ierror)) {
  set_error(ierror,
            MPI_Gather(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                       *recv_count, type_of(recv_type), *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(gatherv, GATHERV,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_counts, F* displs,
                 F* recv_type, F* root, F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_counts, displs, recv_type, root, comm,
                 ierror)) {
  set_error(ierror,
            MPI_Gatherv(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                        recv_counts, displs, type_of(recv_type), *root, comm_of(comm)));
}

SHMCOLL_FORTRAN(allgather, ALLGATHER,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, comm, ierror)) {
  set_error(ierror,
            MPI_Allgather(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                          *recv_count, type_of(recv_type), comm_of(comm)));
}

SHMCOLL_FORTRAN(allgatherv, ALLGATHERV,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_counts, F* displs,
                 F* recv_type, F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_counts, displs, recv_type, comm, ierror)) {
  set_error(ierror,
            MPI_Allgatherv(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                           recv_counts, displs, type_of(recv_type), comm_of(comm)));
}

SHMCOLL_FORTRAN(alltoall, ALLTOALL,
                (void* send, F* send_count, F* send_type, void* recv, F* recv_count, F* recv_type,
                 F* comm, F* ierror),
                (send, send_count, send_type, recv, recv_count, recv_type, comm, ierror)) {
  set_error(ierror,
            MPI_Alltoall(send_buffer(send), *send_count, type_of(send_type), recv_buffer(recv),
                         *recv_count, type_of(recv_type), comm_of(comm)));
}

SHMCOLL_FORTRAN(alltoallv, ALLTOALLV,
                (void* send, F* send_counts, F* send_displs, F* send_type, void* recv,
                 F* recv_counts, F* recv_displs, F* recv_type, F* comm, F* ierror),
                (send, send_counts, send_displs, send_type, recv, recv_counts, recv_displs,
                 recv_type, comm, ierror)) {
  set_error(ierror, MPI_Alltoallv(send_buffer(send), send_counts, send_displs, type_of(send_type),
                                  recv_buffer(recv), recv_counts, recv_displs, type_of(recv_type),
                                  comm_of(comm)));
}

SHMCOLL_FORTRAN(alltoallw, ALLTOALLW,
                (void* send, F* send_counts, F* send_displs, F* send_types, void* recv,
                 F* recv_counts, F* recv_displs, F* recv_types, F* comm, F* ierror),
                (send, send_counts, send_displs, send_types, recv, recv_counts, recv_displs,
                 recv_types, comm, ierror)) {
  const MPI_Comm c_comm = comm_of(comm);
  // In place, the send types are insignificant (and may be absent).
  const void* c_send = send_buffer(send);
  const MPI_Datatype* c_send_types =
      c_send == MPI_IN_PLACE ? nullptr : types_of(send_types, c_comm, 0);
  set_error(ierror,
            MPI_Alltoallw(c_send, send_counts, send_displs, c_send_types, recv_buffer(recv),
                          recv_counts, recv_displs, types_of(recv_types, c_comm, 1), c_comm));
}

// Open MPI's mpi_f08 module creates ops through pmpi_op_create_, not ompi_op_create_f.
extern "C" void mpi_op_create_f08_(MPI_User_function* function, MPI_Fint* commute, MPI_Fint* op,
                                   MPI_Fint* ierror) {
  create_op("mpi_op_create_f08_", function, commute, op, ierror);
}

#elif defined(MPICH_VERSION)

// Its mpi_f08 routines without buffers call PMPI_* directly.
extern "C" {

void mpi_init_f08_(MPI_Fint* ierror) {
  refuse_the_wrong_mpi();
  next_definition<void(MPI_Fint*)>("mpi_init_f08_")(ierror);
  start_layer();
}

void mpi_init_thread_f08_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierror) {
  refuse_the_wrong_mpi();
  next_definition<void(MPI_Fint*, MPI_Fint*, MPI_Fint*)>("mpi_init_thread_f08_")(required, provided,
                                                                                 ierror);
  start_layer();
}

void mpi_finalize_f08_(MPI_Fint* ierror) {
  finalize_layer();
  next_definition<void(MPI_Fint*)>("mpi_finalize_f08_")(ierror);
}

void mpi_barrier_f08_(MPI_Fint* comm, MPI_Fint* ierror) {
  set_error(ierror, MPI_Barrier(MPI_Comm_f2c(*comm)));
}

void mpi_op_create_f08_(MPI_User_function* function, MPI_Fint* commute, MPI_Fint* op,
                        MPI_Fint* ierror) {
  create_op("mpi_op_create_f08_", function, commute, op, ierror);
}

void mpi_op_free_f08_(MPI_Fint* op, MPI_Fint* ierror) {
  free_op(op, ierror);
}

}  // extern "C"

#endif  // OPEN_MPI, MPICH_VERSION
