// The barrier, broadcast and reductions, each written once as a template over the mode
// (modes.hpp), for the entry points of their int forms (reductions.cpp) and MPI-4's MPI_Count
// forms (reductions_large_count.cpp). Each takes the shmcoll path when the communicator has a
// route and every handle maps; the decision depends only on arguments MPI requires to match
// across ranks, so all members take the same path. Barrier, bcast, reduce, allreduce, scan and
// exscan also run node by node on a communicator spanning nodes, where the leaders' PMPI calls
// take int counts (past INT_MAX such a call goes to PMPI: fits_node_by_node). Each returns
// nullopt where the call goes to PMPI.
#pragma once

#include <numeric>

#include "mpi/hierarchy.hpp"
#include "mpi/modes.hpp"

namespace shmcoll::mpi::reductions {

using shmcoll::Collective;
using shmcoll::Team;

// Node by node, a reduction keeps rank order only where nodes hold ascending rank ranges.
inline bool serves_across_nodes(const Route& route, const Reduction& reduction) {
  if (!route.nodes || reduction.op.commutative() || route.nodes->rank_ordered()) return true;
  note_pmpi_reason(PmpiReason::order_across_nodes);
  return false;
}

// Scan and exscan, on one node's team or node by node (where nodes hold ascending rank ranges:
// a rank's prefix is then every earlier node's total, then its own node's prefix).
using Prefix = void (Team::*)(const void*, void*, std::int64_t, shmcoll::Dtype, const shmcoll::Op&);
using NodePrefix = void (NodeHierarchy::*)(const void*, void*, int, MPI_Datatype, MPI_Op,
                                           const Reduction&);
template <typename Mode>
std::optional<int> prefix_on(const Mode& mode, Prefix on_team, NodePrefix on_nodes,
                             CallTimer& timer, const void* sendbuf, void* recvbuf,
                             std::int64_t count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (!fits_node_by_node(route, count)) return std::nullopt;
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction) return std::nullopt;
  if (route.nodes && !route.nodes->rank_ordered()) {
    note_pmpi_reason(PmpiReason::order_across_nodes);
    return std::nullopt;
  }
  if (!mode.handles_outlive_call(route, type, op)) return std::nullopt;
  Arguments arguments("a prefix reduction", route.size());
  if (!arguments.count("count", count).valid()) return arguments.raise(comm, timer);
  return mode.serve(route, comm, timer, reduction->bytes(count), [=] {
    if (route.team) {
      (route.team->*on_team)(send_of(sendbuf), recvbuf, count, reduction->dtype, reduction->op);
    } else {
      (route.nodes->*on_nodes)(sendbuf, recvbuf, static_cast<int>(count), type, op, *reduction);
    }
  });
}

// Each collective once, over the mode (modes.hpp); nullopt: the call goes to PMPI.
template <typename Mode>
std::optional<int> barrier_on(const Mode& mode, CallTimer& timer, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (route.size() == 0) return std::nullopt;
  return mode.serve(route, comm, timer, 0, [=] {
    if (route.team) {
      route.team->barrier();
    } else {
      route.nodes->barrier();
    }
  });
}

template <typename Mode>
std::optional<int> bcast_on(const Mode& mode, CallTimer& timer, void* buffer, std::int64_t count,
                            MPI_Datatype type, int root, MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (!fits_node_by_node(route, count)) return std::nullopt;
  const auto shm_type = mode.keep(route.size() > 0 ? datatype_of(type) : nullptr);
  // (A type the layer could not map goes to the MPI before the handle is asked anything.)
  if (!shm_type || !mode.handles_outlive_call(route, type)) return std::nullopt;
  Arguments arguments("MPI_Bcast", route.size());
  if (!arguments.root(root).count("count", count).valid()) return arguments.raise(comm, timer);
  return mode.serve(route, comm, timer, bytes_of(count, *shm_type), [=] {
    if (route.team) {
      route.team->bcast(buffer, count, *shm_type, root);
    } else {
      route.nodes->bcast(buffer, static_cast<int>(count), type, *shm_type, root);
    }
  });
}

template <typename Mode>
std::optional<int> reduce_on(const Mode& mode, CallTimer& timer, const void* sendbuf, void* recvbuf,
                             std::int64_t count, MPI_Datatype type, MPI_Op op, int root,
                             MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (!fits_node_by_node(route, count)) return std::nullopt;
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  if (!mode.handles_outlive_call(route, type, op)) return std::nullopt;
  Arguments arguments("MPI_Reduce", route.size());
  if (!arguments.root(root).count("count", count).valid()) return arguments.raise(comm, timer);
  // recvbuf is significant only at the root; elsewhere it may be anything.
  void* result = route.rank() == root ? recvbuf : nullptr;
  return mode.serve(route, comm, timer, reduction->bytes(count), [=] {
    if (route.team) {
      route.team->reduce(send_of(sendbuf), result, count, reduction->dtype, reduction->op, root);
    } else {
      route.nodes->reduce(sendbuf, recvbuf, static_cast<int>(count), type, op, *reduction, root);
    }
  });
}

template <typename Mode>
std::optional<int> allreduce_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                void* recvbuf, std::int64_t count, MPI_Datatype type, MPI_Op op,
                                MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (!fits_node_by_node(route, count)) return std::nullopt;
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  if (!mode.handles_outlive_call(route, type, op)) return std::nullopt;
  Arguments arguments("MPI_Allreduce", route.size());
  if (!arguments.count("count", count).valid()) return arguments.raise(comm, timer);
  return mode.serve(route, comm, timer, reduction->bytes(count), [=] {
    if (route.team) {
      route.team->allreduce(send_of(sendbuf), recvbuf, count, reduction->dtype, reduction->op);
    } else {
      route.nodes->allreduce(sendbuf, recvbuf, static_cast<int>(count), type, op, *reduction);
    }
  });
}

template <typename Mode, typename Count>
std::optional<int> reduce_scatter_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                     void* recvbuf, const Count recvcounts[], MPI_Datatype type,
                                     MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  if (!mode.handles_outlive_call(route, type, op)) return std::nullopt;
  Arguments arguments("MPI_Reduce_scatter", route.size());
  if (!arguments.counts("recvcounts", recvcounts).valid()) return arguments.raise(comm, timer);
  const auto counts = mode.keep(widen(recvcounts, route.size(), 0));
  if (!fits_node_by_node(route, std::accumulate(counts.begin(), counts.end(), std::int64_t{0}))) {
    return std::nullopt;
  }
  const std::int64_t own = recvcounts ? recvcounts[route.rank()] : 0;
  return mode.serve(route, comm, timer, reduction->bytes(own), [=] {
    if (route.team) {
      route.team->reduce_scatter(send_of(sendbuf), recvbuf, counts, reduction->dtype,
                                 reduction->op);
    } else {
      route.nodes->reduce_scatter(sendbuf, recvbuf, counts, type, op, *reduction);
    }
  });
}

template <typename Mode>
std::optional<int> reduce_scatter_block_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                           void* recvbuf, std::int64_t recvcount, MPI_Datatype type,
                                           MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  if (!mode.handles_outlive_call(route, type, op)) return std::nullopt;
  Arguments arguments("MPI_Reduce_scatter_block", route.size());
  if (!arguments.count("recvcount", recvcount).valid()) return arguments.raise(comm, timer);
  if (!fits_node_by_node(route, recvcount * route.size())) return std::nullopt;
  return mode.serve(route, comm, timer, reduction->bytes(recvcount), [=] {
    if (route.team) {
      route.team->reduce_scatter_block(send_of(sendbuf), recvbuf, recvcount, reduction->dtype,
                                       reduction->op);
    } else {
      route.nodes->reduce_scatter_block(sendbuf, recvbuf, static_cast<int>(recvcount), type, op,
                                        *reduction);
    }
  });
}

// Each collective as a callable over the mode, for the entry points of its int and MPI_Count forms
// (call_now, call_nonblocking, call_persistent: modes.hpp).
inline constexpr auto barrier_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return barrier_on(mode, timer, arguments...);
};
inline constexpr auto bcast_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return bcast_on(mode, timer, arguments...);
};
inline constexpr auto reduce_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return reduce_on(mode, timer, arguments...);
};
inline constexpr auto allreduce_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return allreduce_on(mode, timer, arguments...);
};
inline constexpr auto reduce_scatter_call = [](const auto& mode, CallTimer& timer,
                                               auto... arguments) {
  return reduce_scatter_on(mode, timer, arguments...);
};
inline constexpr auto reduce_scatter_block_call = [](const auto& mode, CallTimer& timer,
                                                     auto... arguments) {
  return reduce_scatter_block_on(mode, timer, arguments...);
};
inline constexpr auto scan_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return prefix_on(mode, &Team::scan, &NodeHierarchy::scan, timer, arguments...);
};
inline constexpr auto exscan_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return prefix_on(mode, &Team::exscan, &NodeHierarchy::exscan, timer, arguments...);
};

// MPI_Reduce_local and its MPI_Count form: the team-less reduction of one buffer into another.
template <typename Count>
int reduce_local(const void* inbuf, void* inoutbuf, Count count, MPI_Datatype type, MPI_Op op,
                 int (*pmpi)(const void*, void*, Count, MPI_Datatype, MPI_Op)) {
  CallTimer timer = CallTimer::for_reduce_local();
  const auto reduction = layer_disabled() ? std::nullopt : reduction_of(type, op);
  if (reduction) {
    return through_shmcoll(MPI_COMM_SELF, timer, reduction->bytes(count), [&] {
      shmcoll::reduce_local(inbuf, inoutbuf, count, reduction->dtype, reduction->op);
    });
  }
  return pmpi(inbuf, inoutbuf, count, type, op);
}

}  // namespace shmcoll::mpi::reductions
