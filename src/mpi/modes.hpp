// How an intercepted collective runs once it takes the shmcoll path: at once (MPI_Allreduce:
// RunNow), issued to the team's worker behind an MPI_Request (MPI_Iallreduce), or planned, to be
// issued at every MPI_Start (MPI_Allreduce_init): RunLater. Each collective is written once, as a
// template over the mode (reductions.cpp, movement_on.hpp): the mode picks the route, keeps the
// call's arguments as long as the call needs them, and serves the call. A blocking call's
// arguments are the program's until it returns; a nonblocking one's counts and datatypes are
// copied (the program may reuse the arrays and free the types as soon as the call is issued).
// A nonblocking call names its team by address, which stays valid until it completes whatever the
// program frees: the team lives on the heap, moves into the pool of freed communicators' teams
// by pointer, and its destructor runs every call issued to it first. A persistent request shares
// the team (shared_team), so that MPI_Start after MPI_Comm_free works as without the layer.
#pragma once

#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

struct RunNow {
  static Route route(MPI_Comm comm) { return route_of(comm); }
  template <typename T>
  static T keep(T value) {
    return value;
  }
  static bool handles_outlive_call(const Route&, MPI_Datatype, MPI_Op = MPI_OP_NULL) {
    return true;
  }
  template <typename Call>
  static int serve(const Route& route, MPI_Comm comm, CallTimer& timer, std::size_t bytes,
                   Call&& call) {
    // The leaders' MPI steps of nonblocking calls issued before this one come first, in the order
    // every leader issued them.
    if (route.nodes) route.nodes->finish_issued();
    return through_shmcoll(comm, timer, bytes, std::forward<Call>(call));
  }
};

class RunLater {
 public:
  // MPI_Ibcast and the others: issued at once, `request` standing for the call.
  static RunLater nonblocking(MPI_Request* request) { return {Kind::nonblocking, request}; }
  // MPI_Bcast_init and the others: issued at every MPI_Start of `request`.
  static RunLater persistent(MPI_Request* request) { return {Kind::persistent, request}; }

  // The communicator's route, as it is (a call that must not block never makes the members
  // agree). Node by node only for a nonblocking call where the members agreed to
  // (NodeHierarchy::serves_nonblocking: MPI_THREAD_MULTIPLE and the setting): the call runs on
  // the node team's worker, leaders' PMPI steps included, so it progresses whatever its rank does
  // meanwhile (a blocking receive, say), as the MPI's own would. A persistent request restarts
  // on a team (restart_on), never node by node.
  Route route(MPI_Comm comm) const {
    const Route route = route_without_agreeing(comm);
    if (!route.nodes) return route;
    if (kind_ == Kind::nonblocking && route.nodes->serves_nonblocking()) return route;
    note_pmpi_reason(kind_ == Kind::nonblocking ? PmpiReason::nonblocking_across_nodes
                                                : PmpiReason::persistent_across_nodes);
    return {};
  }
  // Node by node, the leaders pass `type` and `op` to the MPI when the worker runs the call,
  // which may be after the program freed them (as it may, once the call is issued): only
  // predefined ones, which live as long as the MPI does.
  static bool handles_outlive_call(const Route& route, MPI_Datatype type, MPI_Op op = MPI_OP_NULL) {
    if (!route.nodes || (is_predefined_type(type) && (op == MPI_OP_NULL || is_predefined_op(op)))) {
      return true;
    }
    note_pmpi_reason(PmpiReason::handle_across_nodes);
    return false;
  }
  static std::vector<std::int64_t> keep(std::span<const std::int64_t> values) {
    return {values.begin(), values.end()};
  }
  static std::optional<Datatype> keep(const Datatype* type) {
    return type ? std::optional<Datatype>(*type) : std::nullopt;
  }
  static std::optional<std::vector<Datatype>> keep(std::optional<std::span<const Datatype>> types) {
    if (!types) return std::nullopt;
    return std::vector<Datatype>(types->begin(), types->end());
  }

  template <typename Call>
  int serve(const Route& route, MPI_Comm comm, CallTimer& timer, std::size_t bytes,
            Call call) const {
    try {
      if (kind_ == Kind::nonblocking) {
        start_nonblocking(comm,
                          route.team ? route.team->run_nonblocking(std::move(call))
                                     : route.nodes->run_nonblocking(std::move(call)),
                          request_);
      } else {
        make_persistent(comm, restart_on(shared_team(comm), std::move(call)), request_);
      }
      timer.through_shmcoll(bytes);
      return MPI_SUCCESS;
    } catch (const Error& error) {
      timer.failed_in_shmcoll();
      return raise_error(comm, error);
    }
  }

 private:
  // Each MPI_Start issues the call anew on the team it was planned on, which the request keeps
  // alive (the program may free the communicator first); a team that ended stays ended.
  template <typename Call>
  static std::function<Request()> restart_on(std::shared_ptr<Team> team, Call call) {
    return [team = std::move(team), call = std::move(call)] {
      if (team->ended()) {
        throw Error(Errc::peer_failed,
                    "MPI_Start: the communicator's team ended after the request was made");
      }
      return team->run_nonblocking(call);
    };
  }
  enum class Kind { nonblocking, persistent };
  RunLater(Kind kind, MPI_Request* request) : kind_(kind), request_(request) {}
  Kind kind_;
  MPI_Request* request_;
};

// An entry point's body, one per mode, for the int and the MPI_Count form of a collective alike:
// `on` (the collective's template over the mode, as a callable) serves the call, else the MPI's
// `pmpi` (PMPI_Scatter or PMPI_Scatter_c ...) takes it with the same arguments.
template <typename On, typename Pmpi, typename... Arguments>
int call_now(Collective which, On on, Pmpi pmpi, Arguments... arguments) {
  CallTimer timer(which);
  const auto done = on(RunNow{}, timer, arguments...);
  return done ? *done : pmpi(arguments...);
}
template <typename On, typename Pmpi, typename... Arguments>
int call_nonblocking(Collective which, On on, Pmpi pmpi, MPI_Request* request,
                     Arguments... arguments) {
  CallTimer timer(which);
  const auto done = on(RunLater::nonblocking(request), timer, arguments...);
  return done ? *done : pmpi(arguments..., request);
}
template <typename On, typename Pmpi, typename... Arguments>
int call_persistent(Collective which, On on, Pmpi pmpi, MPI_Info info, MPI_Request* request,
                    Arguments... arguments) {
  CallTimer timer(which);
  const auto done = on(RunLater::persistent(request), timer, arguments...);
  return done ? *done : pmpi(arguments..., info, request);
}

}  // namespace shmcoll::mpi
