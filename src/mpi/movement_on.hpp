// The data-movement collectives, each written once as a template over the mode (modes.hpp), for
// the entry points of their int forms (movement.cpp) and MPI-4's MPI_Count forms
// (movement_large_count.cpp). Each returns nullopt where the call goes to PMPI. Arguments the
// standard makes insignificant on a rank (the send side of scatter off the root, the send side of
// an in-place call) are never mapped, so whatever handle the program passes there cannot change
// the path. Statistics count the bytes this rank receives.
#pragma once

#include <numeric>
#include <utility>

#include "mpi/hierarchy.hpp"
#include "mpi/modes.hpp"

namespace shmcoll::mpi::movement {

using shmcoll::Datatype;
using shmcoll::Team;

inline const Datatype* type_if(bool significant, MPI_Datatype type) {
  return significant ? datatype_of(type) : &unused_type();
}

inline std::size_t total_bytes(std::span<const std::int64_t> counts, const Datatype& type) {
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
                                  std::int64_t sendcount, MPI_Datatype sendtype, void* recvbuf,
                                  std::int64_t recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const auto send_type = mode.keep(type_if(sendbuf != MPI_IN_PLACE, sendtype));
  const auto recv_type = mode.keep(datatype_of(recvtype));
  if (!send_type || !recv_type) return std::nullopt;
  Arguments arguments(name, route.size());
  if (sendbuf != MPI_IN_PLACE) arguments.count("sendcount", sendcount);
  if (!arguments.count("recvcount", recvcount).valid()) return arguments.raise(comm, timer);
  const std::size_t block = bytes_of(recvcount, *recv_type);
  const std::size_t bytes = block * route.size();
  if (!fits_node_by_node(route, static_cast<std::int64_t>(bytes))) return std::nullopt;
  return mode.serve(route, comm, timer, bytes, [=] {
    run_on(route, on_team, on_nodes, send_of(sendbuf), sendcount, *send_type, recvbuf, recvcount,
           *recv_type);
  });
}

// Each collective once, over the mode (modes.hpp); nullopt: the call goes to PMPI.
template <typename Mode>
std::optional<int> scatter_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                              std::int64_t sendcount, MPI_Datatype sendtype, void* recvbuf,
                              std::int64_t recvcount, MPI_Datatype recvtype, int root,
                              MPI_Comm comm) {
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

// Counts and displacements as int, or as MPI-4's MPI_Count and MPI_Aint (the _c forms).
template <typename Mode, typename Count, typename Displacement>
std::optional<int> scatterv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                               const Count sendcounts[], const Displacement displs[],
                               MPI_Datatype sendtype, void* recvbuf, std::int64_t recvcount,
                               MPI_Datatype recvtype, int root, MPI_Comm comm) {
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
std::optional<int> gather_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                             std::int64_t sendcount, MPI_Datatype sendtype, void* recvbuf,
                             std::int64_t recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
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

template <typename Mode, typename Count, typename Displacement>
std::optional<int> gatherv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                              std::int64_t sendcount, MPI_Datatype sendtype, void* recvbuf,
                              const Count recvcounts[], const Displacement displs[],
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
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

template <typename Mode, typename Count, typename Displacement>
std::optional<int> allgatherv_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                 std::int64_t sendcount, MPI_Datatype sendtype, void* recvbuf,
                                 const Count recvcounts[], const Displacement displs[],
                                 MPI_Datatype recvtype, MPI_Comm comm) {
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

template <typename Mode, typename Count, typename Displacement>
std::optional<int> alltoallw_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                const Count sendcounts[], const Displacement sdispls[],
                                const MPI_Datatype sendtypes[], void* recvbuf,
                                const Count recvcounts[], const Displacement rdispls[],
                                const MPI_Datatype recvtypes[], MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  const int size = route.size();
  const bool sends = sendbuf != MPI_IN_PLACE;
  Arguments arguments("MPI_Alltoallw", size);
  arguments.counts("sendcounts", sends ? sendcounts : nullptr).counts("recvcounts", recvcounts);
  if (!arguments.valid()) return arguments.raise(comm, timer);
  // Displacements here are in bytes, as MPI has them for alltoallw.
  const auto send_counts = mode.keep(widen(sends ? sendcounts : nullptr, size, 0));
  const auto send_offsets = mode.keep(widen(sends ? sdispls : nullptr, size, 1));
  const auto recv_counts = mode.keep(widen(recvcounts, size, 2));
  const auto recv_offsets = mode.keep(widen(rdispls, size, 3));
  const auto send_types =
      mode.keep(datatypes_of(sends ? sendtypes : nullptr, send_counts, size, 0));
  const auto recv_types = mode.keep(datatypes_of(recvtypes, recv_counts, size, 1));
  if (!send_types || !recv_types) return std::nullopt;
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

// The collectives as callables over the mode, for the entry points of their int and MPI_Count
// forms (call_now and the others, modes.hpp).
inline constexpr auto alltoallw_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return alltoallw_on(mode, timer, arguments...);
};
inline constexpr auto scatter_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return scatter_on(mode, timer, arguments...);
};
inline constexpr auto gather_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return gather_on(mode, timer, arguments...);
};
inline constexpr auto scatterv_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return scatterv_on(mode, timer, arguments...);
};
inline constexpr auto gatherv_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return gatherv_on(mode, timer, arguments...);
};
inline constexpr auto allgatherv_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return allgatherv_on(mode, timer, arguments...);
};
inline constexpr auto alltoallv_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return alltoallv_on(mode, timer, arguments...);
};
inline constexpr auto allgather_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return block_per_rank(mode, &Team::allgather, &NodeHierarchy::allgather, "MPI_Allgather", timer,
                        arguments...);
};
inline constexpr auto alltoall_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return block_per_rank(mode, &Team::alltoall, &NodeHierarchy::alltoall, "MPI_Alltoall", timer,
                        arguments...);
};

}  // namespace shmcoll::mpi::movement
