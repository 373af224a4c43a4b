// MPI-4's large-count forms of the data-movement collectives (MPI_Count counts, MPI_Aint
// displacements), where the MPI has them (MPICH 4; Open MPI 4.1 says MPI 3.1): served as the int
// forms (movement.cpp), through the same bodies (movement_on.hpp).
#include "mpi/movement_on.hpp"

using namespace shmcoll::mpi;
using namespace shmcoll::mpi::movement;
using shmcoll::Collective;

extern "C" {

#if MPI_VERSION >= 4
// MPI 4's large-count forms (MPI_Count counts, MPI_Aint displacements), served as the int ones;
// node by node, past INT_MAX they go to PMPI (fits_node_by_node).

int MPI_Scatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call_now(Collective::scatter, scatter_call, PMPI_Scatter_c, sendbuf, sendcount, sendtype,
                  recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                   MPI_Request* request) {
  return call_nonblocking(Collective::scatter, scatter_call, PMPI_Iscatter_c, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatter_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                       void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::scatter, scatter_call, PMPI_Scatter_init_c, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call_now(Collective::gather, gather_call, PMPI_Gather_c, sendbuf, sendcount, sendtype,
                  recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Igather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request* request) {
  return call_nonblocking(Collective::gather, gather_call, PMPI_Igather_c, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gather_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                      void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                      MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::gather, gather_call, PMPI_Gather_init_c, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                    MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call_now(Collective::allgather, allgather_call, PMPI_Allgather_c, sendbuf, sendcount,
                  sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request) {
  return call_nonblocking(Collective::allgather, allgather_call, PMPI_Iallgather_c, request,
                          sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgather_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                         void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::allgather, allgather_call, PMPI_Allgather_init_c, info,
                         request, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call_now(Collective::alltoall, alltoall_call, PMPI_Alltoall_c, sendbuf, sendcount,
                  sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                    MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request) {
  return call_nonblocking(Collective::alltoall, alltoall_call, PMPI_Ialltoall_c, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                        void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::alltoall, alltoall_call, PMPI_Alltoall_init_c, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Scatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                   MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                   int root, MPI_Comm comm) {
  return call_now(Collective::scatterv, scatterv_call, PMPI_Scatterv_c, sendbuf, sendcounts, displs,
                  sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                    MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::scatterv, scatterv_call, PMPI_Iscatterv_c, request, sendbuf,
                          sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatterv_init_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[],
                        MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                        MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                        MPI_Request* request) {
  return call_persistent(Collective::scatterv, scatterv_call, PMPI_Scatterv_init_c, info, request,
                         sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                         comm);
}

int MPI_Gatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                  int root, MPI_Comm comm) {
  return call_now(Collective::gatherv, gatherv_call, PMPI_Gatherv_c, sendbuf, sendcount, sendtype,
                  recvbuf, recvcounts, displs, recvtype, root, comm);
}

int MPI_Igatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                   int root, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::gatherv, gatherv_call, PMPI_Igatherv_c, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm);
}

int MPI_Gatherv_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                       void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[],
                       MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return call_persistent(Collective::gatherv, gatherv_call, PMPI_Gatherv_init_c, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                         comm);
}

int MPI_Allgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype,
                     MPI_Comm comm) {
  return call_now(Collective::allgatherv, allgatherv_call, PMPI_Allgatherv_c, sendbuf, sendcount,
                  sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Iallgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                      void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[],
                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::allgatherv, allgatherv_call, PMPI_Iallgatherv_c, request,
                          sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          comm);
}

int MPI_Allgatherv_init_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                          void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[],
                          MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                          MPI_Request* request) {
  return call_persistent(Collective::allgatherv, allgatherv_call, PMPI_Allgatherv_init_c, info,
                         request, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                         recvtype, comm);
}

int MPI_Ialltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                     const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request) {
  return call_nonblocking(Collective::alltoallv, alltoallv_call, PMPI_Ialltoallv_c, request,
                          sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm);
}

int MPI_Alltoallv_init_c(const void* sendbuf, const MPI_Count sendcounts[],
                         const MPI_Aint sdispls[], MPI_Datatype sendtype, void* recvbuf,
                         const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                         MPI_Request* request) {
  return call_persistent(Collective::alltoallv, alltoallv_call, PMPI_Alltoallv_init_c, info,
                         request, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                         rdispls, recvtype, comm);
}

int MPI_Alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return call_now(Collective::alltoallv, alltoallv_call, PMPI_Alltoallv_c, sendbuf, sendcounts,
                  sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
}

int MPI_Alltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return call_now(Collective::alltoallw, alltoallw_call, PMPI_Alltoallw_c, sendbuf, sendcounts,
                  sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ialltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                     const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                     MPI_Request* request) {
  return call_nonblocking(Collective::alltoallw, alltoallw_call, PMPI_Ialltoallw_c, request,
                          sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                          recvtypes, comm);
}

int MPI_Alltoallw_init_c(const void* sendbuf, const MPI_Count sendcounts[],
                         const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void* recvbuf,
                         const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                         const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info,
                         MPI_Request* request) {
  return call_persistent(Collective::alltoallw, alltoallw_call, PMPI_Alltoallw_init_c, info,
                         request, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                         rdispls, recvtypes, comm);
}

#endif  // MPI_VERSION >= 4

}  // extern "C"
