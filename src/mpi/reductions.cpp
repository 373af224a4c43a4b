// The intercepted barrier, broadcast and reductions. Each takes the shmcoll path when the
// communicator has a route and every handle maps; the decision depends only on arguments MPI
// requires to match across ranks, so all members take the same path. Barrier, bcast, reduce,
// allreduce, scan and exscan also run node by node on a communicator spanning nodes. Anything
// else is a plain PMPI call.
#include <numeric>

#include "mpi/hierarchy.hpp"

using namespace shmcoll::mpi;
using shmcoll::Collective;
using shmcoll::Team;

namespace {

// Node by node, a reduction keeps rank order only where nodes hold ascending rank ranges.
bool serves_across_nodes(const Route& route, const Reduction& reduction) {
  if (!route.nodes || reduction.op.commutative() || route.nodes->rank_ordered()) return true;
  note_pmpi_reason(PmpiReason::order_across_nodes);
  return false;
}

// Scan and exscan, on one node's team or node by node (where nodes hold ascending rank ranges:
// a rank's prefix is then every earlier node's total, then its own node's prefix). Returns the
// call's result, or nullopt when it goes to PMPI.
using Prefix = void (Team::*)(const void*, void*, std::int64_t, shmcoll::Dtype, const shmcoll::Op&);
using NodePrefix = void (NodeHierarchy::*)(const void*, void*, int, MPI_Datatype, MPI_Op,
                                           const Reduction&);
std::optional<int> prefix(Prefix on_team, NodePrefix on_nodes, CallTimer& timer,
                          const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                          MPI_Op op, MPI_Comm comm) {
  const Route route = route_of(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction) return std::nullopt;
  if (route.nodes && !route.nodes->rank_ordered()) {
    note_pmpi_reason(PmpiReason::order_across_nodes);
    return std::nullopt;
  }
  Arguments arguments("a prefix reduction", route.size());
  if (!arguments.count("count", count).valid()) return arguments.raise(comm, timer);
  return through_shmcoll(comm, timer, reduction->bytes(count), [&] {
    if (route.team) {
      (route.team->*on_team)(send_of(sendbuf), recvbuf, count, reduction->dtype, reduction->op);
    } else {
      (route.nodes->*on_nodes)(sendbuf, recvbuf, count, type, op, *reduction);
    }
  });
}

}  // namespace

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  CallTimer timer(Collective::barrier);
  const Route route = route_of(comm);
  if (route.team) return through_shmcoll(comm, timer, 0, [&] { route.team->barrier(); });
  if (route.nodes) return through_shmcoll(comm, timer, 0, [&] { route.nodes->barrier(); });
  return PMPI_Barrier(comm);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  CallTimer timer(Collective::bcast);
  const Route route = route_of(comm);
  const shmcoll::Datatype* shm_type = route.size() > 0 ? datatype_of(type) : nullptr;
  if (shm_type) {
    Arguments arguments("MPI_Bcast", route.size());
    if (!arguments.root(root).count("count", count).valid()) return arguments.raise(comm, timer);
  }
  if (shm_type && route.team) {
    return through_shmcoll(comm, timer, bytes_of(count, *shm_type),
                           [&] { route.team->bcast(buffer, count, *shm_type, root); });
  }
  if (shm_type && route.nodes) {
    return through_shmcoll(comm, timer, bytes_of(count, *shm_type),
                           [&] { route.nodes->bcast(buffer, count, type, *shm_type, root); });
  }
  return PMPI_Bcast(buffer, count, type, root, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
  CallTimer timer(Collective::reduce);
  const Route route = route_of(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (reduction) {
    Arguments arguments("MPI_Reduce", route.size());
    if (!arguments.root(root).count("count", count).valid()) return arguments.raise(comm, timer);
  }
  if (reduction && route.team) {
    // recvbuf is significant only at the root; elsewhere it may be anything.
    Team& team = *route.team;
    return through_shmcoll(comm, timer, reduction->bytes(count), [&] {
      team.reduce(send_of(sendbuf), team.rank() == root ? recvbuf : nullptr, count,
                  reduction->dtype, reduction->op, root);
    });
  }
  if (reduction && route.nodes && serves_across_nodes(route, *reduction)) {
    return through_shmcoll(comm, timer, reduction->bytes(count), [&] {
      route.nodes->reduce(sendbuf, recvbuf, count, type, op, *reduction, root);
    });
  }
  return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  CallTimer timer(Collective::allreduce);
  const Route route = route_of(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (reduction) {
    Arguments arguments("MPI_Allreduce", route.size());
    if (!arguments.count("count", count).valid()) return arguments.raise(comm, timer);
  }
  if (reduction && route.team) {
    return through_shmcoll(comm, timer, reduction->bytes(count), [&] {
      route.team->allreduce(send_of(sendbuf), recvbuf, count, reduction->dtype, reduction->op);
    });
  }
  if (reduction && route.nodes && serves_across_nodes(route, *reduction)) {
    return through_shmcoll(comm, timer, reduction->bytes(count), [&] {
      route.nodes->allreduce(sendbuf, recvbuf, count, type, op, *reduction);
    });
  }
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  CallTimer timer(Collective::reduce_scatter);
  const Route route = route_of(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (reduction && serves_across_nodes(route, *reduction)) {
    Arguments arguments("MPI_Reduce_scatter", route.size());
    if (!arguments.counts("recvcounts", recvcounts).valid()) return arguments.raise(comm, timer);
    const auto counts = widen(recvcounts, route.size(), 0);
    if (fits_node_by_node(route, std::accumulate(counts.begin(), counts.end(), std::int64_t{0}))) {
      const int own = recvcounts ? recvcounts[route.rank()] : 0;
      return through_shmcoll(comm, timer, reduction->bytes(own), [&] {
        if (route.team) {
          route.team->reduce_scatter(send_of(sendbuf), recvbuf, counts, reduction->dtype,
                                     reduction->op);
        } else {
          route.nodes->reduce_scatter(sendbuf, recvbuf, counts, type, op, *reduction);
        }
      });
    }
  }
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  CallTimer timer(Collective::reduce_scatter_block);
  const Route route = route_of(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (reduction && serves_across_nodes(route, *reduction)) {
    Arguments arguments("MPI_Reduce_scatter_block", route.size());
    if (!arguments.count("recvcount", recvcount).valid()) return arguments.raise(comm, timer);
    if (fits_node_by_node(route, std::int64_t{recvcount} * route.size())) {
      return through_shmcoll(comm, timer, reduction->bytes(recvcount), [&] {
        if (route.team) {
          route.team->reduce_scatter_block(send_of(sendbuf), recvbuf, recvcount, reduction->dtype,
                                           reduction->op);
        } else {
          route.nodes->reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, *reduction);
        }
      });
    }
  }
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  CallTimer timer(Collective::scan);
  if (const auto done = prefix(&Team::scan, &NodeHierarchy::scan, timer, sendbuf, recvbuf, count,
                               type, op, comm)) {
    return *done;
  }
  return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  CallTimer timer(Collective::exscan);
  if (const auto done = prefix(&Team::exscan, &NodeHierarchy::exscan, timer, sendbuf, recvbuf,
                               count, type, op, comm)) {
    return *done;
  }
  return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
  CallTimer timer = CallTimer::for_reduce_local();
  const auto reduction = layer_disabled() ? std::nullopt : reduction_of(type, op);
  if (reduction) {
    return through_shmcoll(MPI_COMM_SELF, timer, reduction->bytes(count), [&] {
      shmcoll::reduce_local(inbuf, inoutbuf, count, reduction->dtype, reduction->op);
    });
  }
  return PMPI_Reduce_local(inbuf, inoutbuf, count, type, op);
}

}  // extern "C"
