// The intercepted data-movement collectives, on communicators whose members share the node, and
// node by node on one spanning nodes: the entry points of their int forms, blocking, nonblocking
// and persistent (the bodies: movement_on.hpp).
#include "mpi/movement_on.hpp"

using namespace shmcoll::mpi;
using namespace shmcoll::mpi::movement;
using shmcoll::Collective;
using shmcoll::Team;

extern "C" {

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call_now(Collective::scatter, scatter_call, PMPI_Scatter, sendbuf, sendcount, sendtype,
                  recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return call_nonblocking(Collective::scatter, scatter_call, PMPI_Iscatter, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  CallTimer timer(Collective::scatterv);
  if (const auto done = scatterv_on(RunNow{}, timer, sendbuf, sendcounts, displs, sendtype, recvbuf,
                                    recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                       comm);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::scatterv);
  if (const auto done = scatterv_on(RunLater::nonblocking(request), timer, sendbuf, sendcounts,
                                    displs, sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                        comm, request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return call_now(Collective::gather, gather_call, PMPI_Gather, sendbuf, sendcount, sendtype,
                  recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  return call_nonblocking(Collective::gather, gather_call, PMPI_Igather, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  CallTimer timer(Collective::gatherv);
  if (const auto done = gatherv_on(RunNow{}, timer, sendbuf, sendcount, sendtype, recvbuf,
                                   recvcounts, displs, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                      comm);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::gatherv);
  if (const auto done = gatherv_on(RunLater::nonblocking(request), timer, sendbuf, sendcount,
                                   sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                       comm, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call_now(Collective::allgather, allgather_call, PMPI_Allgather, sendbuf, sendcount,
                  sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::allgather, allgather_call, PMPI_Iallgather, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  CallTimer timer(Collective::allgatherv);
  if (const auto done = allgatherv_on(RunNow{}, timer, sendbuf, sendcount, sendtype, recvbuf,
                                      recvcounts, displs, recvtype, comm)) {
    return *done;
  }
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::allgatherv);
  if (const auto done = allgatherv_on(RunLater::nonblocking(request), timer, sendbuf, sendcount,
                                      sendtype, recvbuf, recvcounts, displs, recvtype, comm)) {
    return *done;
  }
  return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                          request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call_now(Collective::alltoall, alltoall_call, PMPI_Alltoall, sendbuf, sendcount, sendtype,
                  recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return call_nonblocking(Collective::alltoall, alltoall_call, PMPI_Ialltoall, request, sendbuf,
                          sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int rdispls[],
                  MPI_Datatype recvtype, MPI_Comm comm) {
  CallTimer timer(Collective::alltoallv);
  if (const auto done = alltoallv_on(RunNow{}, timer, sendbuf, sendcounts, sdispls, sendtype,
                                     recvbuf, recvcounts, rdispls, recvtype, comm)) {
    return *done;
  }
  return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, comm);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  CallTimer timer(Collective::alltoallv);
  if (const auto done =
          alltoallv_on(RunLater::nonblocking(request), timer, sendbuf, sendcounts, sdispls,
                       sendtype, recvbuf, recvcounts, rdispls, recvtype, comm)) {
    return *done;
  }
  return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm, request);
}

int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return call_now(Collective::alltoallw, alltoallw_call, PMPI_Alltoallw, sendbuf, sendcounts,
                  sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  return call_nonblocking(Collective::alltoallw, alltoallw_call, PMPI_Ialltoallw, request, sendbuf,
                          sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes,
                          comm);
}

#if MPI_VERSION >= 4
// MPI 4's persistent collectives (MPICH 4), as in reductions.cpp.

int MPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request* request) {
  return call_persistent(Collective::scatter, scatter_call, PMPI_Scatter_init, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[],
                      MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                      int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::scatterv);
  if (const auto done = scatterv_on(RunLater::persistent(request), timer, sendbuf, sendcounts,
                                    displs, sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Scatterv_init(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                            root, comm, info, request);
}

int MPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  return call_persistent(Collective::gather, gather_call, PMPI_Gather_init, info, request, sendbuf,
                         sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::gatherv);
  if (const auto done = gatherv_on(RunLater::persistent(request), timer, sendbuf, sendcount,
                                   sendtype, recvbuf, recvcounts, displs, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Gatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           root, comm, info, request);
}

int MPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  return call_persistent(Collective::allgather, allgather_call, PMPI_Allgather_init, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::allgatherv);
  if (const auto done = allgatherv_on(RunLater::persistent(request), timer, sendbuf, sendcount,
                                      sendtype, recvbuf, recvcounts, displs, recvtype, comm)) {
    return *done;
  }
  return PMPI_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                              comm, info, request);
}

int MPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                      MPI_Request* request) {
  return call_persistent(Collective::alltoall, alltoall_call, PMPI_Alltoall_init, info, request,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                       MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                       const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  CallTimer timer(Collective::alltoallv);
  if (const auto done =
          alltoallv_on(RunLater::persistent(request), timer, sendbuf, sendcounts, sdispls, sendtype,
                       recvbuf, recvcounts, rdispls, recvtype, comm)) {
    return *done;
  }
  return PMPI_Alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                             recvtype, comm, info, request);
}

int MPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                       const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                       const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                       MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::alltoallw, alltoallw_call, PMPI_Alltoallw_init, info, request,
                         sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                         recvtypes, comm);
}
#endif  // MPI_VERSION >= 4

}  // extern "C"
