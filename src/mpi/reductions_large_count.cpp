// MPI-4's large-count forms of bcast and the reductions (MPI_Count counts), where the MPI has
// them (MPICH 4; Open MPI 4.1 says MPI 3.1): served as the int forms (reductions.cpp), through the
// same bodies (reductions_on.hpp).
#include "mpi/reductions_on.hpp"

using namespace shmcoll::mpi;
using namespace shmcoll::mpi::reductions;

extern "C" {

#if MPI_VERSION >= 4

int MPI_Bcast_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm) {
  return call_now(Collective::bcast, bcast_call, PMPI_Bcast_c, buffer, count, type, root, comm);
}

int MPI_Ibcast_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return call_nonblocking(Collective::bcast, bcast_call, PMPI_Ibcast_c, request, buffer, count,
                          type, root, comm);
}

int MPI_Reduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                 int root, MPI_Comm comm) {
  return call_now(Collective::reduce, reduce_call, PMPI_Reduce_c, sendbuf, recvbuf, count, type, op,
                  root, comm);
}

int MPI_Ireduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                  int root, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce, reduce_call, PMPI_Ireduce_c, request, sendbuf,
                          recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm) {
  return call_now(Collective::allreduce, allreduce_call, PMPI_Allreduce_c, sendbuf, recvbuf, count,
                  type, op, comm);
}

int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                     MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::allreduce, allreduce_call, PMPI_Iallreduce_c, request,
                          sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[],
                         MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return call_now(Collective::reduce_scatter, reduce_scatter_call, PMPI_Reduce_scatter_c, sendbuf,
                  recvbuf, recvcounts, type, op, comm);
}

int MPI_Ireduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[],
                          MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce_scatter, reduce_scatter_call, PMPI_Ireduce_scatter_c,
                          request, sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Reduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                               MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return call_now(Collective::reduce_scatter_block, reduce_scatter_block_call,
                  PMPI_Reduce_scatter_block_c, sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Ireduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::reduce_scatter_block, reduce_scatter_block_call,
                          PMPI_Ireduce_scatter_block_c, request, sendbuf, recvbuf, recvcount, type,
                          op, comm);
}

int MPI_Scan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  return call_now(Collective::scan, scan_call, PMPI_Scan_c, sendbuf, recvbuf, count, type, op,
                  comm);
}

int MPI_Iscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::scan, scan_call, PMPI_Iscan_c, request, sendbuf, recvbuf,
                          count, type, op, comm);
}

int MPI_Exscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                 MPI_Comm comm) {
  return call_now(Collective::exscan, exscan_call, PMPI_Exscan_c, sendbuf, recvbuf, count, type, op,
                  comm);
}

int MPI_Iexscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::exscan, exscan_call, PMPI_Iexscan_c, request, sendbuf,
                          recvbuf, count, type, op, comm);
}

int MPI_Bcast_init_c(void* buffer, MPI_Count count, MPI_Datatype type, int root, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::bcast, bcast_call, PMPI_Bcast_init_c, info, request, buffer,
                         count, type, root, comm);
}

int MPI_Reduce_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                      MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::reduce, reduce_call, PMPI_Reduce_init_c, info, request,
                         sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                         MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::allreduce, allreduce_call, PMPI_Allreduce_init_c, info,
                         request, sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter_init_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[],
                              MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                              MPI_Request* request) {
  return call_persistent(Collective::reduce_scatter, reduce_scatter_call,
                         PMPI_Reduce_scatter_init_c, info, request, sendbuf, recvbuf, recvcounts,
                         type, op, comm);
}

int MPI_Reduce_scatter_block_init_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                    MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                    MPI_Request* request) {
  return call_persistent(Collective::reduce_scatter_block, reduce_scatter_block_call,
                         PMPI_Reduce_scatter_block_init_c, info, request, sendbuf, recvbuf,
                         recvcount, type, op, comm);
}

int MPI_Scan_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::scan, scan_call, PMPI_Scan_init_c, info, request, sendbuf,
                         recvbuf, count, type, op, comm);
}

int MPI_Exscan_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                      MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::exscan, exscan_call, PMPI_Exscan_init_c, info, request,
                         sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_local_c(const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype type,
                       MPI_Op op) {
  return reduce_local(inbuf, inoutbuf, count, type, op, PMPI_Reduce_local_c);
}

#endif  // MPI_VERSION >= 4

}  // extern "C"
