// The intercepted MPI entry points: set-up and tear-down, user ops, and the collectives. Each
// collective takes the shmcoll path when the communicator has a team and every handle maps; the
// decision depends only on arguments MPI requires to match across ranks, so all members take the
// same path. Anything else is a plain PMPI call.
#include "mpi/layer.hpp"

using shmcoll::Dtype;
using shmcoll::Error;
using shmcoll::Team;
using namespace shmcoll::mpi;

namespace {

const void* send_of(const void* buffer) {
  return buffer == MPI_IN_PLACE ? shmcoll::in_place : buffer;
}

std::size_t bytes_of(int count, Dtype dtype) {
  return count > 0 ? static_cast<std::size_t>(count) * shmcoll::dtype_size(dtype) : 0;
}

// Runs `call` on the shmcoll path: success is recorded as `bytes` through shmcoll, a shmcoll
// error is raised through the communicator's error handler.
template <typename Call>
int through_shmcoll(MPI_Comm comm, CallTimer& timer, std::size_t bytes, Call&& call) {
  try {
    call();
    timer.through_shmcoll(bytes);
    return MPI_SUCCESS;
  } catch (const Error& error) {
    return raise_error(comm, error);
  }
}

}  // namespace

extern "C" {

// Lets a program (and its tests) see that the layer is loaded, and which version.
__attribute__((visibility("default"))) const char* shmcoll_mpi_layer_version(void) {
  return SHMCOLL_VERSION_TEXT;
}

int MPI_Init(int* argc, char*** argv) {
  const int result = PMPI_Init(argc, argv);
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  set_thread_level(provided);
  return result;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int result = PMPI_Init_thread(argc, argv, required, provided);
  set_thread_level(*provided);
  return result;
}

int MPI_Finalize(void) {
  print_statistics();
  release_world_teams();
  return PMPI_Finalize();
}

int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
  const int result = PMPI_Op_create(function, commute, op);
  if (result == MPI_SUCCESS) remember_user_op(*op, function, commute != 0);
  return result;
}

int MPI_Op_free(MPI_Op* op) {
  forget_user_op(*op);
  return PMPI_Op_free(op);
}

int MPI_Barrier(MPI_Comm comm) {
  CallTimer timer(Collective::barrier);
  if (Team* team = team_of(comm)) {
    return through_shmcoll(comm, timer, 0, [&] { team->barrier(); });
  }
  return PMPI_Barrier(comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  CallTimer timer(Collective::bcast);
  const auto dtype = dtype_of(type);
  if (Team* team = dtype ? team_of(comm) : nullptr) {
    return through_shmcoll(comm, timer, bytes_of(count, *dtype),
                           [&] { team->bcast(buffer, count, *dtype, root); });
  }
  return PMPI_Bcast(buffer, count, type, root, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  CallTimer timer(Collective::reduce);
  const auto dtype = dtype_of(type);
  const auto shm_op = dtype ? op_of(op, type, *dtype) : std::nullopt;
  if (Team* team = shm_op ? team_of(comm) : nullptr) {
    // recvbuf is significant only at the root; elsewhere it may be anything.
    return through_shmcoll(comm, timer, bytes_of(count, *dtype), [&] {
      team->reduce(send_of(sendbuf), team->rank() == root ? recvbuf : nullptr, count, *dtype,
                   *shm_op, root);
    });
  }
  return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  CallTimer timer(Collective::allreduce);
  const auto dtype = dtype_of(type);
  const auto shm_op = dtype ? op_of(op, type, *dtype) : std::nullopt;
  if (Team* team = shm_op ? team_of(comm) : nullptr) {
    return through_shmcoll(comm, timer, bytes_of(count, *dtype), [&] {
      team->allreduce(send_of(sendbuf), recvbuf, count, *dtype, *shm_op);
    });
  }
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
  CallTimer timer(Collective::reduce_local);
  const auto dtype = layer_disabled() ? std::nullopt : dtype_of(type);
  const auto shm_op = dtype ? op_of(op, type, *dtype) : std::nullopt;
  if (shm_op) {
    return through_shmcoll(MPI_COMM_SELF, timer, bytes_of(count, *dtype),
                           [&] { shmcoll::reduce_local(inbuf, inoutbuf, count, *dtype, *shm_op); });
  }
  return PMPI_Reduce_local(inbuf, inoutbuf, count, type, op);
}

}  // extern "C"
