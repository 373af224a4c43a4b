// The intercepted data-movement collectives, on communicators whose members share the node, and
// node by node on one spanning nodes. Arguments
// the standard makes insignificant on a rank (the send side of scatter off the root, the send
// side of an in-place call) are never mapped, so whatever handle the program passes there cannot
// change the path. Statistics count the bytes this rank receives.
#include <numeric>
#include <utility>

#include "mpi/hierarchy.hpp"
#include "mpi/modes.hpp"

using namespace shmcoll::mpi;
using shmcoll::Collective;
using shmcoll::Datatype;
using shmcoll::Team;

namespace {

const Datatype* type_if(bool significant, MPI_Datatype type) {
  return significant ? datatype_of(type) : &unused_type();
}

std::size_t total_bytes(std::span<const std::int64_t> counts, const Datatype& type) {
  const std::int64_t elements = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  return elements > 0 ? static_cast<std::size_t>(elements) * type.size() : 0;
}

// Runs a collective on the route's team, or node by node (the two take the same arguments).
template <typename OnTeam, typename OnNodes, typename... Arguments>
void run_on(const Route& route, OnTeam on_team, OnNodes on_nodes, Arguments&&... arguments) {
  if (route.team) {
    (route.team->*on_team)(std::forward<Arguments>(arguments)...);
  } else {
    (route.nodes->*on_nodes)(std::forward<Arguments>(arguments)...);
  }
}

// Allgather and alltoall: one block of recvcount elements from every rank, in place from the
// receive buffer, on one node's team or node by node.
using BlockPerRank = void (Team::*)(const void*, std::int64_t, const Datatype&, void*, std::int64_t,
                                    const Datatype&);
using NodeBlockPerRank = void (NodeHierarchy::*)(const void*, std::int64_t, const Datatype&, void*,
                                                 std::int64_t, const Datatype&);
template <typename Mode>
std::optional<int> block_per_rank(const Mode& mode, BlockPerRank on_team, NodeBlockPerRank on_nodes,
                                  const char* name, CallTimer& timer, const void* sendbuf,
                                  int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const auto send_type = mode.keep(type_if(sendbuf != MPI_IN_PLACE, sendtype));
  const auto recv_type = mode.keep(datatype_of(recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments(name, route.size());
  if (sendbuf != MPI_IN_PLACE) arguments.count("sendcount", sendcount);
  if (!arguments.count("recvcount", recvcount).valid()) return arguments.raise(comm, timer);
  const std::size_t bytes = bytes_of(recvcount, *recv_type) * route.size();
  if (!fits_node_by_node(route, static_cast<std::int64_t>(bytes))) return std::nullopt;
  return mode.serve(route, comm, timer, bytes, [=] {
    run_on(route, on_team, on_nodes, send_of(sendbuf), sendcount, *send_type, recvbuf, recvcount,
           *recv_type);
  });
}

// Each collective once, over the mode (modes.hpp); nullopt: the call goes to PMPI.
template <typename Mode>
std::optional<int> scatter_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                              int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const bool at_root = route.rank() == root;
  const bool keeps_own = at_root && recvbuf == MPI_IN_PLACE;
  const auto send_type = mode.keep(type_if(at_root, sendtype));
  const auto recv_type = mode.keep(type_if(!keeps_own, recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Scatter", route.size());
  arguments.root(root);
  if (at_root) arguments.count("sendcount", sendcount);
  if (!keeps_own) arguments.count("recvcount", recvcount);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const std::size_t block =
      at_root ? bytes_of(sendcount, *send_type) : bytes_of(recvcount, *recv_type);
  if (!fits_node_by_node(route, static_cast<std::int64_t>(block) * route.size())) {
    return std::nullopt;
  }
  return mode.serve(route, comm, timer, keeps_own ? 0 : bytes_of(recvcount, *recv_type), [=] {
    run_on(route, &Team::scatter, &NodeHierarchy::scatter, sendbuf, sendcount, *send_type,
           recv_of(recvbuf), recvcount, *recv_type, root);
  });
}

template <typename Mode>
std::optional<int> scatterv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                               const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                               void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                               MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const bool at_root = route.rank() == root;
  const bool keeps_own = at_root && recvbuf == MPI_IN_PLACE;
  const auto send_type = mode.keep(type_if(at_root, sendtype));
  const auto recv_type = mode.keep(type_if(!keeps_own, recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Scatterv", route.size());
  arguments.root(root).counts("sendcounts", at_root ? sendcounts : nullptr);
  if (!keeps_own) arguments.count("recvcount", recvcount);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const auto counts = mode.keep(widen(at_root ? sendcounts : nullptr, route.size(), 0));
  const auto offsets = mode.keep(widen(at_root ? displs : nullptr, route.size(), 1));
  return mode.serve(route, comm, timer, keeps_own ? 0 : bytes_of(recvcount, *recv_type), [=] {
    run_on(route, &Team::scatterv, &NodeHierarchy::scatterv, sendbuf, counts, offsets, *send_type,
           recv_of(recvbuf), recvcount, *recv_type, root);
  });
}

template <typename Mode>
std::optional<int> gather_on(const Mode& mode, CallTimer& timer, const void* sendbuf, int sendcount,
                             MPI_Datatype sendtype, void* recvbuf, int recvcount,
                             MPI_Datatype recvtype, int root, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const bool at_root = route.rank() == root;
  const auto send_type = mode.keep(type_if(sendbuf != MPI_IN_PLACE, sendtype));
  const auto recv_type = mode.keep(type_if(at_root, recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Gather", route.size());
  arguments.root(root);
  if (sendbuf != MPI_IN_PLACE) arguments.count("sendcount", sendcount);
  if (at_root) arguments.count("recvcount", recvcount);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const std::size_t block =
      at_root ? bytes_of(recvcount, *recv_type) : bytes_of(sendcount, *send_type);
  if (!fits_node_by_node(route, static_cast<std::int64_t>(block) * route.size())) {
    return std::nullopt;
  }
  return mode.serve(route, comm, timer, at_root ? block * route.size() : 0, [=] {
    run_on(route, &Team::gather, &NodeHierarchy::gather, send_of(sendbuf), sendcount, *send_type,
           recvbuf, recvcount, *recv_type, root);
  });
}

template <typename Mode>
std::optional<int> gatherv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                              int sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                              int root, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const bool at_root = route.rank() == root;
  const auto send_type = mode.keep(type_if(sendbuf != MPI_IN_PLACE, sendtype));
  const auto recv_type = mode.keep(type_if(at_root, recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Gatherv", route.size());
  arguments.root(root).counts("recvcounts", at_root ? recvcounts : nullptr);
  if (sendbuf != MPI_IN_PLACE) arguments.count("sendcount", sendcount);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const auto counts = mode.keep(widen(at_root ? recvcounts : nullptr, route.size(), 2));
  const auto offsets = mode.keep(widen(at_root ? displs : nullptr, route.size(), 3));
  return mode.serve(route, comm, timer, total_bytes(counts, *recv_type), [=] {
    run_on(route, &Team::gatherv, &NodeHierarchy::gatherv, send_of(sendbuf), sendcount, *send_type,
           recvbuf, counts, offsets, *recv_type, root);
  });
}

template <typename Mode>
std::optional<int> allgatherv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                 int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                                 MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const auto send_type = mode.keep(type_if(sendbuf != MPI_IN_PLACE, sendtype));
  const auto recv_type = mode.keep(datatype_of(recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Allgatherv", route.size());
  arguments.counts("recvcounts", recvcounts);
  if (sendbuf != MPI_IN_PLACE) arguments.count("sendcount", sendcount);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const auto counts = mode.keep(widen(recvcounts, route.size(), 2));
  const auto offsets = mode.keep(widen(displs, route.size(), 3));
  const std::size_t bytes = total_bytes(counts, *recv_type);
  if (!fits_node_by_node(route, static_cast<std::int64_t>(bytes))) return std::nullopt;
  return mode.serve(route, comm, timer, bytes, [=] {
    run_on(route, &Team::allgatherv, &NodeHierarchy::allgatherv, send_of(sendbuf), sendcount,
           *send_type, recvbuf, counts, offsets, *recv_type);
  });
}

// Counts and displacements as int, or as MPI-4's MPI_Count and MPI_Aint (the _c form).
template <typename Mode, typename Count, typename Displacement>
std::optional<int> alltoallv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                const Count sendcounts[], const Displacement sdispls[],
                                MPI_Datatype sendtype, void* recvbuf, const Count recvcounts[],
                                const Displacement rdispls[], MPI_Datatype recvtype,
                                MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const bool sends = sendbuf != MPI_IN_PLACE;
  const auto send_type = mode.keep(type_if(sends, sendtype));
  const auto recv_type = mode.keep(datatype_of(recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments("MPI_Alltoallv", route.size());
  arguments.counts("sendcounts", sends ? sendcounts : nullptr).counts("recvcounts", recvcounts);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const int size = route.size();
  const auto send_counts = mode.keep(widen(sends ? sendcounts : nullptr, size, 0));
  const auto send_offsets = mode.keep(widen(sends ? sdispls : nullptr, size, 1));
  const auto recv_counts = mode.keep(widen(recvcounts, size, 2));
  const auto recv_offsets = mode.keep(widen(rdispls, size, 3));
  return mode.serve(route, comm, timer, total_bytes(recv_counts, *recv_type), [=] {
    run_on(route, &Team::alltoallv, &NodeHierarchy::alltoallv, send_of(sendbuf), send_counts,
           send_offsets, *send_type, recvbuf, recv_counts, recv_offsets, *recv_type);
  });
}

template <typename Mode>
std::optional<int> alltoallw_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                const int sendcounts[], const int sdispls[],
                                const MPI_Datatype sendtypes[], void* recvbuf,
                                const int recvcounts[], const int rdispls[],
                                const MPI_Datatype recvtypes[], MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const int size = route.size();
  const bool sends = sendbuf != MPI_IN_PLACE;
  Arguments arguments("MPI_Alltoallw", size);
  arguments.counts("sendcounts", sends ? sendcounts : nullptr).counts("recvcounts", recvcounts);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  const auto send_types = mode.keep(datatypes_of(sends ? sendtypes : nullptr, sendcounts, size, 0));
  const auto recv_types = mode.keep(datatypes_of(recvtypes, recvcounts, size, 1));
  if (!send_types || !recv_types) return std::nullopt;
  // Displacements here are in bytes, as MPI has them for alltoallw.
  const auto send_counts = mode.keep(widen(sends ? sendcounts : nullptr, size, 0));
  const auto send_offsets = mode.keep(widen(sends ? sdispls : nullptr, size, 1));
  const auto recv_counts = mode.keep(widen(recvcounts, size, 2));
  const auto recv_offsets = mode.keep(widen(rdispls, size, 3));
  std::size_t bytes = 0;
  for (int i = 0; i < static_cast<int>(recv_types->size()); ++i) {
    bytes += bytes_of(recvcounts[i], (*recv_types)[i]);
  }
  return mode.serve(route, comm, timer, bytes, [=] {
    run_on(route, &Team::alltoallw, &NodeHierarchy::alltoallw, send_of(sendbuf), send_counts,
           send_offsets, std::span<const Datatype>(*send_types), recvbuf, recv_counts, recv_offsets,
           std::span<const Datatype>(*recv_types));
  });
}

}  // namespace

extern "C" {

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  CallTimer timer(Collective::scatter);
  if (const auto done = scatter_on(RunNow{}, timer, sendbuf, sendcount, sendtype, recvbuf,
                                   recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  CallTimer timer(Collective::scatter);
  if (const auto done = scatter_on(RunLater::nonblocking(request), timer, sendbuf, sendcount,
                                   sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                       request);
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
  CallTimer timer(Collective::gather);
  if (const auto done = gather_on(RunNow{}, timer, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                  recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  CallTimer timer(Collective::gather);
  if (const auto done = gather_on(RunLater::nonblocking(request), timer, sendbuf, sendcount,
                                  sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                      request);
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
  CallTimer timer(Collective::allgather);
  if (const auto done =
          block_per_rank(RunNow{}, &Team::allgather, &NodeHierarchy::allgather, "MPI_Allgather",
                         timer, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::allgather);
  if (const auto done = block_per_rank(RunLater::nonblocking(request), &Team::allgather,
                                       &NodeHierarchy::allgather, "MPI_Iallgather", timer, sendbuf,
                                       sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
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
  CallTimer timer(Collective::alltoall);
  if (const auto done =
          block_per_rank(RunNow{}, &Team::alltoall, &NodeHierarchy::alltoall, "MPI_Alltoall", timer,
                         sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::alltoall);
  if (const auto done = block_per_rank(RunLater::nonblocking(request), &Team::alltoall,
                                       &NodeHierarchy::alltoall, "MPI_Ialltoall", timer, sendbuf,
                                       sendcount, sendtype, recvbuf, recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
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
  CallTimer timer(Collective::alltoallw);
  if (const auto done = alltoallw_on(RunNow{}, timer, sendbuf, sendcounts, sdispls, sendtypes,
                                     recvbuf, recvcounts, rdispls, recvtypes, comm)) {
    return *done;
  }
  return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                        recvtypes, comm);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  CallTimer timer(Collective::alltoallw);
  if (const auto done =
          alltoallw_on(RunLater::nonblocking(request), timer, sendbuf, sendcounts, sdispls,
                       sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm)) {
    return *done;
  }
  return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                         recvtypes, comm, request);
}

#if MPI_VERSION >= 4
// MPI 4's persistent collectives (MPICH 4), as in reductions.cpp.

int MPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request* request) {
  CallTimer timer(Collective::scatter);
  if (const auto done = scatter_on(RunLater::persistent(request), timer, sendbuf, sendcount,
                                   sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Scatter_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                           info, request);
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
  CallTimer timer(Collective::gather);
  if (const auto done = gather_on(RunLater::persistent(request), timer, sendbuf, sendcount,
                                  sendtype, recvbuf, recvcount, recvtype, root, comm)) {
    return *done;
  }
  return PMPI_Gather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                          info, request);
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
  CallTimer timer(Collective::allgather);
  if (const auto done =
          block_per_rank(RunLater::persistent(request), &Team::allgather, &NodeHierarchy::allgather,
                         "MPI_Allgather_init", timer, sendbuf, sendcount, sendtype, recvbuf,
                         recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                             request);
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
  CallTimer timer(Collective::alltoall);
  if (const auto done =
          block_per_rank(RunLater::persistent(request), &Team::alltoall, &NodeHierarchy::alltoall,
                         "MPI_Alltoall_init", timer, sendbuf, sendcount, sendtype, recvbuf,
                         recvcount, recvtype, comm)) {
    return *done;
  }
  return PMPI_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, info,
                            request);
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
  CallTimer timer(Collective::alltoallw);
  if (const auto done =
          alltoallw_on(RunLater::persistent(request), timer, sendbuf, sendcounts, sdispls,
                       sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm)) {
    return *done;
  }
  return PMPI_Alltoallw_init(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                             recvtypes, comm, info, request);
}
#endif  // MPI_VERSION >= 4

#if MPI_VERSION >= 4
int MPI_Alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    MPI_Datatype sendtype, void* recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  CallTimer timer(Collective::alltoallv);
  const auto done = alltoallv_on(RunNow{}, timer, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                 recvcounts, rdispls, recvtype, comm);
  return done ? *done
              : PMPI_Alltoallv_c(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                 rdispls, recvtype, comm);
}
#endif  // MPI_VERSION >= 4

}  // extern "C"
