// The intercepted barrier, broadcast and reductions. Each takes the shmcoll path when the
// communicator has a route and every handle maps; the decision depends only on arguments MPI
// requires to match across ranks, so all members take the same path. Barrier, bcast, reduce,
// allreduce, scan and exscan also run node by node on a communicator spanning nodes. Anything
// else is a plain PMPI call.
#include <numeric>

#include "mpi/hierarchy.hpp"
#include "mpi/modes.hpp"

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
// a rank's prefix is then every earlier node's total, then its own node's prefix).
using Prefix = void (Team::*)(const void*, void*, std::int64_t, shmcoll::Dtype, const shmcoll::Op&);
using NodePrefix = void (NodeHierarchy::*)(const void*, void*, int, MPI_Datatype, MPI_Op,
                                           const Reduction&);
template <typename Mode>
std::optional<int> prefix_on(const Mode& mode, Prefix on_team, NodePrefix on_nodes,
                             CallTimer& timer, const void* sendbuf, void* recvbuf, int count,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction) return std::nullopt;
  if (route.nodes && !route.nodes->rank_ordered()) {
    note_pmpi_reason(PmpiReason::order_across_nodes);
    return std::nullopt;
  }
  Arguments arguments("a prefix reduction", route.size());
  if (!arguments.count("count", count).valid()) return arguments.raise(comm, timer);
  return mode.serve(route, comm, timer, reduction->bytes(count), [=] {
    if (route.team) {
      (route.team->*on_team)(send_of(sendbuf), recvbuf, count, reduction->dtype, reduction->op);
    } else {
      (route.nodes->*on_nodes)(sendbuf, recvbuf, count, type, op, *reduction);
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
  if (!shm_type) return std::nullopt;
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

// bcast as a callable over the mode, for the entry points of its int and MPI_Count forms
// (call_now, modes.hpp).
constexpr auto bcast_call = [](const auto& mode, CallTimer& timer, auto... arguments) {
  return bcast_on(mode, timer, arguments...);
};

template <typename Mode>
std::optional<int> reduce_on(const Mode& mode, CallTimer& timer, const void* sendbuf, void* recvbuf,
                             std::int64_t count, MPI_Datatype type, MPI_Op op, int root,
                             MPI_Comm comm) {
  const Route route = mode.route(comm);
  if (!fits_node_by_node(route, count)) return std::nullopt;
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
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

template <typename Mode>
std::optional<int> reduce_scatter_on(const Mode& mode, CallTimer& timer, const void* sendbuf,
                                     void* recvbuf, const int recvcounts[], MPI_Datatype type,
                                     MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  Arguments arguments("MPI_Reduce_scatter", route.size());
  if (!arguments.counts("recvcounts", recvcounts).valid()) return arguments.raise(comm, timer);
  const auto counts = mode.keep(widen(recvcounts, route.size(), 0));
  if (!fits_node_by_node(route, std::accumulate(counts.begin(), counts.end(), std::int64_t{0}))) {
    return std::nullopt;
  }
  const int own = recvcounts ? recvcounts[route.rank()] : 0;
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
                                           void* recvbuf, int recvcount, MPI_Datatype type,
                                           MPI_Op op, MPI_Comm comm) {
  const Route route = mode.route(comm);
  const auto reduction = route.size() > 0 ? reduction_of(type, op) : std::nullopt;
  if (!reduction || !serves_across_nodes(route, *reduction)) return std::nullopt;
  Arguments arguments("MPI_Reduce_scatter_block", route.size());
  if (!arguments.count("recvcount", recvcount).valid()) return arguments.raise(comm, timer);
  if (!fits_node_by_node(route, std::int64_t{recvcount} * route.size())) return std::nullopt;
  return mode.serve(route, comm, timer, reduction->bytes(recvcount), [=] {
    if (route.team) {
      route.team->reduce_scatter_block(send_of(sendbuf), recvbuf, recvcount, reduction->dtype,
                                       reduction->op);
    } else {
      route.nodes->reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, *reduction);
    }
  });
}

}  // namespace

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  CallTimer timer(Collective::barrier);
  if (const auto done = barrier_on(RunNow{}, timer, comm)) return *done;
  return PMPI_Barrier(comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::barrier);
  if (const auto done = barrier_on(RunLater::nonblocking(request), timer, comm)) {
    return *done;
  }
  return PMPI_Ibarrier(comm, request);
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
  CallTimer timer(Collective::reduce);
  if (const auto done = reduce_on(RunNow{}, timer, sendbuf, recvbuf, count, type, op, root, comm)) {
    return *done;
  }
  return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::reduce);
  if (const auto done = reduce_on(RunLater::nonblocking(request), timer, sendbuf, recvbuf, count,
                                  type, op, root, comm)) {
    return *done;
  }
  return PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  CallTimer timer(Collective::allreduce);
  if (const auto done = allreduce_on(RunNow{}, timer, sendbuf, recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::allreduce);
  if (const auto done = allreduce_on(RunLater::nonblocking(request), timer, sendbuf, recvbuf, count,
                                     type, op, comm)) {
    return *done;
  }
  return PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  CallTimer timer(Collective::reduce_scatter);
  if (const auto done =
          reduce_scatter_on(RunNow{}, timer, sendbuf, recvbuf, recvcounts, type, op, comm)) {
    return *done;
  }
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::reduce_scatter);
  if (const auto done = reduce_scatter_on(RunLater::nonblocking(request), timer, sendbuf, recvbuf,
                                          recvcounts, type, op, comm)) {
    return *done;
  }
  return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  CallTimer timer(Collective::reduce_scatter_block);
  if (const auto done =
          reduce_scatter_block_on(RunNow{}, timer, sendbuf, recvbuf, recvcount, type, op, comm)) {
    return *done;
  }
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type,
                              MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::reduce_scatter_block);
  if (const auto done = reduce_scatter_block_on(RunLater::nonblocking(request), timer, sendbuf,
                                                recvbuf, recvcount, type, op, comm)) {
    return *done;
  }
  return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  CallTimer timer(Collective::scan);
  if (const auto done = prefix_on(RunNow{}, &Team::scan, &NodeHierarchy::scan, timer, sendbuf,
                                  recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::scan);
  if (const auto done = prefix_on(RunLater::nonblocking(request), &Team::scan, &NodeHierarchy::scan,
                                  timer, sendbuf, recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  CallTimer timer(Collective::exscan);
  if (const auto done = prefix_on(RunNow{}, &Team::exscan, &NodeHierarchy::exscan, timer, sendbuf,
                                  recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::exscan);
  if (const auto done =
          prefix_on(RunLater::nonblocking(request), &Team::exscan, &NodeHierarchy::exscan, timer,
                    sendbuf, recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request);
}

#if MPI_VERSION >= 4
// MPI 4's persistent collectives (MPICH 4): planned on the communicator's team when it has one,
// issued at every MPI_Start (requests.cpp).

int MPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::barrier);
  if (const auto done = barrier_on(RunLater::persistent(request), timer, comm)) return *done;
  return PMPI_Barrier_init(comm, info, request);
}

int MPI_Bcast_init(void* buffer, int count, MPI_Datatype type, int root, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  return call_persistent(Collective::bcast, bcast_call, PMPI_Bcast_init, info, request, buffer,
                         count, type, root, comm);
}

int MPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::reduce);
  if (const auto done = reduce_on(RunLater::persistent(request), timer, sendbuf, recvbuf, count,
                                  type, op, root, comm)) {
    return *done;
  }
  return PMPI_Reduce_init(sendbuf, recvbuf, count, type, op, root, comm, info, request);
}

int MPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::allreduce);
  if (const auto done = allreduce_on(RunLater::persistent(request), timer, sendbuf, recvbuf, count,
                                     type, op, comm)) {
    return *done;
  }
  return PMPI_Allreduce_init(sendbuf, recvbuf, count, type, op, comm, info, request);
}

int MPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[],
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                            MPI_Request* request) {
  CallTimer timer(Collective::reduce_scatter);
  if (const auto done = reduce_scatter_on(RunLater::persistent(request), timer, sendbuf, recvbuf,
                                          recvcounts, type, op, comm)) {
    return *done;
  }
  return PMPI_Reduce_scatter_init(sendbuf, recvbuf, recvcounts, type, op, comm, info, request);
}

int MPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount,
                                  MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  MPI_Request* request) {
  CallTimer timer(Collective::reduce_scatter_block);
  if (const auto done = reduce_scatter_block_on(RunLater::persistent(request), timer, sendbuf,
                                                recvbuf, recvcount, type, op, comm)) {
    return *done;
  }
  return PMPI_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, type, op, comm, info, request);
}

int MPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::scan);
  if (const auto done = prefix_on(RunLater::persistent(request), &Team::scan, &NodeHierarchy::scan,
                                  timer, sendbuf, recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Scan_init(sendbuf, recvbuf, count, type, op, comm, info, request);
}

int MPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::exscan);
  if (const auto done =
          prefix_on(RunLater::persistent(request), &Team::exscan, &NodeHierarchy::exscan, timer,
                    sendbuf, recvbuf, count, type, op, comm)) {
    return *done;
  }
  return PMPI_Exscan_init(sendbuf, recvbuf, count, type, op, comm, info, request);
}
#endif  // MPI_VERSION >= 4

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

#if MPI_VERSION >= 4
// MPI-4's large-count forms (MPI_Count counts), served as the int ones; node by node, where the
// leaders' PMPI calls take int counts, past INT_MAX they go to PMPI (fits_node_by_node).

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
  CallTimer timer(Collective::reduce);
  const auto done = reduce_on(RunNow{}, timer, sendbuf, recvbuf, count, type, op, root, comm);
  return done ? *done : PMPI_Reduce_c(sendbuf, recvbuf, count, type, op, root, comm);
}

int MPI_Ireduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op,
                  int root, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::reduce);
  const auto done = reduce_on(RunLater::nonblocking(request), timer, sendbuf, recvbuf, count, type,
                              op, root, comm);
  return done ? *done : PMPI_Ireduce_c(sendbuf, recvbuf, count, type, op, root, comm, request);
}

int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm) {
  CallTimer timer(Collective::allreduce);
  const auto done = allreduce_on(RunNow{}, timer, sendbuf, recvbuf, count, type, op, comm);
  return done ? *done : PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
}

int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                     MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  CallTimer timer(Collective::allreduce);
  const auto done =
      allreduce_on(RunLater::nonblocking(request), timer, sendbuf, recvbuf, count, type, op, comm);
  return done ? *done : PMPI_Iallreduce_c(sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Allreduce_init_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type,
                         MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  CallTimer timer(Collective::allreduce);
  const auto done =
      allreduce_on(RunLater::persistent(request), timer, sendbuf, recvbuf, count, type, op, comm);
  return done ? *done
              : PMPI_Allreduce_init_c(sendbuf, recvbuf, count, type, op, comm, info, request);
}
#endif  // MPI_VERSION >= 4

}  // extern "C"
