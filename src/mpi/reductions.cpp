// The intercepted barrier, broadcast and reductions, int forms: each serves the call through its
// body in reductions_on.hpp, else passes it to PMPI with the same arguments.
#include "mpi/reductions_on.hpp"

using namespace shmcoll::mpi;
using namespace shmcoll::mpi::reductions;

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  return call_now(Collective::barrier, barrier_call, PMPI_Barrier, comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::barrier, barrier_call, PMPI_Ibarrier, request, comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return call_now(Collective::bcast, bcast_call, PMPI_Bcast, buffer, count, type, root, comm);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request* request) {
  return call_nonblocking(Collective::bcast, bcast_call, PMPI_Ibcast, request, buffer, count, type,
                          root, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  return call_now(Collective::reduce, reduce_call, PMPI_Reduce, sendbuf, recvbuf, count, type, op,
                  root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce, reduce_call, PMPI_Ireduce, request, sendbuf, recvbuf,
                          count, type, op, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  return call_now(Collective::allreduce, allreduce_call, PMPI_Allreduce, sendbuf, recvbuf, count,
                  type, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::allreduce, allreduce_call, PMPI_Iallreduce, request, sendbuf,
                          recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return call_now(Collective::reduce_scatter, reduce_scatter_call, PMPI_Reduce_scatter, sendbuf,
                  recvbuf, recvcounts, type, op, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce_scatter, reduce_scatter_call, PMPI_Ireduce_scatter,
                          request, sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  return call_now(Collective::reduce_scatter_block, reduce_scatter_block_call,
                  PMPI_Reduce_scatter_block, sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce_scatter_block, reduce_scatter_block_call,
                          PMPI_Ireduce_scatter_block, request, sendbuf, recvbuf, recvcount, type,
                          op, comm);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  return call_now(Collective::scan, scan_call, PMPI_Scan, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::scan, scan_call, PMPI_Iscan, request, sendbuf, recvbuf, count,
                          type, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  return call_now(Collective::exscan, exscan_call, PMPI_Exscan, sendbuf, recvbuf, count, type, op,
                  comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::exscan, exscan_call, PMPI_Iexscan, request, sendbuf, recvbuf,
                          count, type, op, comm);
}

#if MPI_VERSION >= 4
// MPI 4's persistent collectives (MPICH 4): planned on the communicator's team when it has one,
// issued at every MPI_Start (requests.cpp).

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::barrier, barrier_call, PMPI_Barrier_init, info, request, comm);
}

int MPI_Bcast_init(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::bcast, bcast_call, PMPI_Bcast_init, info, request, buffer,
                         count, type, root, comm);
}

int MPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::reduce, reduce_call, PMPI_Reduce_init, info, request, sendbuf,
                         recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::allreduce, allreduce_call, PMPI_Allreduce_init, info, request,
                         sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[],
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                            MPI_Request* request) {
  return call_persistent(Collective::reduce_scatter, reduce_scatter_call, PMPI_Reduce_scatter_init,
                         info, request, sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount,
                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  return call_persistent(Collective::reduce_scatter_block, reduce_scatter_block_call,
                         PMPI_Reduce_scatter_block_init, info, request, sendbuf, recvbuf, recvcount,
                         type, op, comm);
}

int MPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::scan, scan_call, PMPI_Scan_init, info, request, sendbuf,
                         recvbuf, count, type, op, comm);
}

int MPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::exscan, exscan_call, PMPI_Exscan_init, info, request, sendbuf,
                         recvbuf, count, type, op, comm);
}
#endif  // MPI_VERSION >= 4

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
  return reduce_local(inbuf, inoutbuf, count, type, op, PMPI_Reduce_local);
}

}  // extern "C"
