// The C API: each call converts exceptions into an error code and a thread-local message.
#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "shmcoll/shmcoll.h"
#include "shmcoll/shmcoll.hpp"

struct shmcoll_request {
  shmcoll::Request request;
};

struct shmcoll_team {
  shmcoll::Team team;
};

namespace {

thread_local std::string last_error;

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return SHMCOLL_OK;
  } catch (const shmcoll::Error& error) {
    last_error = error.what();
    return static_cast<int>(error.code());
  } catch (const std::exception& error) {
    last_error = error.what();
    return SHMCOLL_ERR_UNKNOWN;
  } catch (...) {
    last_error = "unknown exception";
    return SHMCOLL_ERR_UNKNOWN;
  }
}

static_assert(SHMCOLL_ERR_TIMEOUT == static_cast<int>(shmcoll::Errc::timeout) &&
                  SHMCOLL_ERR_MISMATCHED_CALL == static_cast<int>(shmcoll::Errc::mismatched_call) &&
                  SHMCOLL_ERR_OUT_OF_MEMORY == static_cast<int>(shmcoll::Errc::out_of_memory),
              "shmcoll.h's error codes follow shmcoll::Errc");
static_assert(SHMCOLL_LONG_DOUBLE_INT == static_cast<int>(shmcoll::Dtype::long_double_int) &&
                  SHMCOLL_DOUBLE_DOUBLE == static_cast<int>(shmcoll::Dtype::double_double) &&
                  SHMCOLL_BYTE == static_cast<int>(shmcoll::Dtype::byte),
              "shmcoll_dtype and shmcoll::Dtype must keep the same numbers");
static_assert(SHMCOLL_NO_OP == static_cast<int>(shmcoll::Op::no_op) &&
                  SHMCOLL_MAXLOC == static_cast<int>(shmcoll::Op::maxloc),
              "the predefined shmcoll_op values and shmcoll::Op::Kind must keep the same numbers");

// Handles of user operations: SHMCOLL_NO_OP + 1 + index into this process's table.
constexpr int kFirstUserOp = SHMCOLL_NO_OP + 1;
std::mutex user_ops_mutex;
std::vector<std::optional<shmcoll::Op>> user_ops;

shmcoll::Op op_of(shmcoll_op handle) {
  if (handle < kFirstUserOp) return shmcoll::Op(static_cast<shmcoll::Op::Kind>(handle));
  std::lock_guard lock(user_ops_mutex);
  const auto index = static_cast<std::size_t>(handle - kFirstUserOp);
  if (index >= user_ops.size() || !user_ops[index]) {
    throw shmcoll::Error(shmcoll::Errc::invalid_argument,
                         "op " + std::to_string(handle) + " is not a live shmcoll_op");
  }
  return *user_ops[index];
}

shmcoll::Team& team_of(shmcoll_team* team) {
  if (!team) throw shmcoll::Error(shmcoll::Errc::invalid_argument, "team is null");
  return team->team;
}

shmcoll::Dtype dtype_of(shmcoll_dtype dtype) {
  return static_cast<shmcoll::Dtype>(dtype);
}

// A per-rank array: NULL becomes an empty span, which the collective rejects by name where the
// array is significant.
std::span<const std::int64_t> per_rank(const shmcoll::Team& team, const int64_t* values) {
  if (values == nullptr) return {};
  return {values, static_cast<std::size_t>(team.size())};
}

std::span<const shmcoll::Datatype> datatypes_of(const shmcoll::Team& team,
                                                const shmcoll_dtype* dtypes,
                                                std::vector<shmcoll::Datatype>& out) {
  out.clear();
  if (dtypes == nullptr) return {};
  for (int rank = 0; rank < team.size(); ++rank) out.emplace_back(dtype_of(dtypes[rank]));
  return out;
}

// Runs `issue` (a Team::i* call) and hands its Request to the caller as a C handle.
template <typename Issue>
int issued(shmcoll_request** request, Issue&& issue) {
  return guarded([&] {
    if (!request) throw shmcoll::Error(shmcoll::Errc::invalid_argument, "request is null");
    *request = nullptr;
    *request = new shmcoll_request{issue()};
  });
}

}  // namespace

extern "C" {

const char* shmcoll_last_error(void) {
  return last_error.c_str();
}

const char* shmcoll_errc_name(int code) {
  return code == SHMCOLL_ERR_UNKNOWN ? "unknown"
                                     : shmcoll::errc_name(static_cast<shmcoll::Errc>(code));
}

int shmcoll_run(int n, size_t slot_bytes, shmcoll_binding bind,
                int (*fn)(shmcoll_team* team, void* arg), void* arg) {
  return guarded([&] {
    if (!fn) throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_run: fn is null");
    shmcoll::Options options;
    options.slot_bytes = slot_bytes;
    options.bind = bind == SHMCOLL_BIND_CORE ? shmcoll::Binding::core : shmcoll::Binding::none;
    shmcoll::run(n, options, [&](shmcoll::Team& team) {
      // Borrow the team for the callback without taking ownership of it.
      auto* handle = reinterpret_cast<shmcoll_team*>(&team);
      static_assert(sizeof(shmcoll_team) == sizeof(shmcoll::Team));
      const int status = fn(handle, arg);
      if (status != 0) {
        throw shmcoll::Error(shmcoll::Errc::rank_failed, "shmcoll_run: fn returned " +
                                                             std::to_string(status) + " on rank " +
                                                             std::to_string(team.rank()));
      }
    });
  });
}

int shmcoll_attach(shmcoll_team** team) {
  return guarded([&] {
    if (!team)
      throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_attach: team is null");
    *team = new shmcoll_team{shmcoll::Team::attach()};
  });
}

int shmcoll_unique_segment_name(char* name, size_t capacity) {
  return guarded([&] {
    const std::string unique = shmcoll::Team::unique_segment_name();
    if (!name || capacity <= unique.size()) {
      throw shmcoll::Error(
          shmcoll::Errc::invalid_argument,
          "shmcoll_unique_segment_name: capacity must exceed " + std::to_string(unique.size()));
    }
    std::memcpy(name, unique.c_str(), unique.size() + 1);
  });
}

int shmcoll_join(const char* name, int rank, int size, size_t slot_bytes, shmcoll_team** team) {
  return guarded([&] {
    if (!name || !team) {
      throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_join: name or team is null");
    }
    shmcoll::Options options;
    options.slot_bytes = slot_bytes;
    *team = new shmcoll_team{shmcoll::Team::join(name, rank, size, options)};
  });
}

int shmcoll_split(shmcoll_team* team, int color, int key, shmcoll_team** new_team) {
  static_assert(SHMCOLL_NO_COLOR == shmcoll::Team::kNoColor);
  return guarded([&] {
    if (!new_team)
      throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_split: new_team is null");
    *new_team = nullptr;
    std::optional<shmcoll::Team> made = team_of(team).split(color, key);
    if (made) *new_team = new shmcoll_team{std::move(*made)};
  });
}

int shmcoll_team_free(shmcoll_team* team) {
  delete team;
  return SHMCOLL_OK;
}

int shmcoll_rank(const shmcoll_team* team) {
  return team ? team->team.rank() : -1;
}
int shmcoll_size(const shmcoll_team* team) {
  return team ? team->team.size() : -1;
}

int shmcoll_barrier(shmcoll_team* team) {
  return guarded([&] { team_of(team).barrier(); });
}

int shmcoll_bcast(shmcoll_team* team, void* buffer, int64_t count, shmcoll_dtype dtype, int root) {
  return guarded([&] { team_of(team).bcast(buffer, count, dtype_of(dtype), root); });
}

int shmcoll_reduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                   shmcoll_dtype dtype, shmcoll_op op, int root) {
  return guarded(
      [&] { team_of(team).reduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), root); });
}

int shmcoll_allreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                      shmcoll_dtype dtype, shmcoll_op op) {
  return guarded(
      [&] { team_of(team).allreduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op)); });
}

int shmcoll_ibarrier(shmcoll_team* team, shmcoll_request** request) {
  return issued(request, [&] { return team_of(team).ibarrier(); });
}

int shmcoll_ibcast(shmcoll_team* team, void* buffer, int64_t count, shmcoll_dtype dtype, int root,
                   shmcoll_request** request) {
  return issued(request,
                [&] { return team_of(team).ibcast(buffer, count, dtype_of(dtype), root); });
}

int shmcoll_ireduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                    shmcoll_dtype dtype, shmcoll_op op, int root, shmcoll_request** request) {
  return issued(request, [&] {
    return team_of(team).ireduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op), root);
  });
}

int shmcoll_iallreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                       shmcoll_dtype dtype, shmcoll_op op, shmcoll_request** request) {
  return issued(request, [&] {
    return team_of(team).iallreduce(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op));
  });
}

int shmcoll_wait(shmcoll_request** request) {
  return guarded([&] {
    if (!request || !*request) {
      throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_wait: request is null");
    }
    const std::unique_ptr<shmcoll_request> owned(std::exchange(*request, nullptr));
    owned->request.wait();
  });
}

int shmcoll_test(shmcoll_request** request, int* done) {
  if (!request || !*request || !done) {
    return guarded([] {
      throw shmcoll::Error(shmcoll::Errc::invalid_argument,
                           "shmcoll_test: request, *request or done is null");
    });
  }
  *done = (*request)->request.test() ? 1 : 0;
  return *done ? shmcoll_wait(request) : SHMCOLL_OK;
}

int shmcoll_reduce_scatter(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                           const int64_t* recvcounts, shmcoll_dtype dtype, shmcoll_op op) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    t.reduce_scatter(sendbuf, recvbuf, per_rank(t, recvcounts), dtype_of(dtype), op_of(op));
  });
}

int shmcoll_reduce_scatter_block(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                 int64_t recvcount, shmcoll_dtype dtype, shmcoll_op op) {
  return guarded([&] {
    team_of(team).reduce_scatter_block(sendbuf, recvbuf, recvcount, dtype_of(dtype), op_of(op));
  });
}

int shmcoll_scan(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                 shmcoll_dtype dtype, shmcoll_op op) {
  return guarded([&] { team_of(team).scan(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op)); });
}

int shmcoll_exscan(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                   shmcoll_dtype dtype, shmcoll_op op) {
  return guarded(
      [&] { team_of(team).exscan(sendbuf, recvbuf, count, dtype_of(dtype), op_of(op)); });
}

int shmcoll_scatter(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                    shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                    shmcoll_dtype recvtype, int root) {
  return guarded([&] {
    team_of(team).scatter(sendbuf, sendcount, dtype_of(sendtype), recvbuf, recvcount,
                          dtype_of(recvtype), root);
  });
}

int shmcoll_scatterv(shmcoll_team* team, const void* sendbuf, const int64_t* sendcounts,
                     const int64_t* displs, shmcoll_dtype sendtype, void* recvbuf,
                     int64_t recvcount, shmcoll_dtype recvtype, int root) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    t.scatterv(sendbuf, per_rank(t, sendcounts), per_rank(t, displs), dtype_of(sendtype), recvbuf,
               recvcount, dtype_of(recvtype), root);
  });
}

int shmcoll_gather(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                   shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount, shmcoll_dtype recvtype,
                   int root) {
  return guarded([&] {
    team_of(team).gather(sendbuf, sendcount, dtype_of(sendtype), recvbuf, recvcount,
                         dtype_of(recvtype), root);
  });
}

int shmcoll_gatherv(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                    shmcoll_dtype sendtype, void* recvbuf, const int64_t* recvcounts,
                    const int64_t* displs, shmcoll_dtype recvtype, int root) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    t.gatherv(sendbuf, sendcount, dtype_of(sendtype), recvbuf, per_rank(t, recvcounts),
              per_rank(t, displs), dtype_of(recvtype), root);
  });
}

int shmcoll_allgather(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                      shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                      shmcoll_dtype recvtype) {
  return guarded([&] {
    team_of(team).allgather(sendbuf, sendcount, dtype_of(sendtype), recvbuf, recvcount,
                            dtype_of(recvtype));
  });
}

int shmcoll_allgatherv(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                       shmcoll_dtype sendtype, void* recvbuf, const int64_t* recvcounts,
                       const int64_t* displs, shmcoll_dtype recvtype) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    t.allgatherv(sendbuf, sendcount, dtype_of(sendtype), recvbuf, per_rank(t, recvcounts),
                 per_rank(t, displs), dtype_of(recvtype));
  });
}

int shmcoll_alltoall(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                     shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                     shmcoll_dtype recvtype) {
  return guarded([&] {
    team_of(team).alltoall(sendbuf, sendcount, dtype_of(sendtype), recvbuf, recvcount,
                           dtype_of(recvtype));
  });
}

int shmcoll_alltoallv(shmcoll_team* team, const void* sendbuf, const int64_t* sendcounts,
                      const int64_t* sdispls, shmcoll_dtype sendtype, void* recvbuf,
                      const int64_t* recvcounts, const int64_t* rdispls, shmcoll_dtype recvtype) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    t.alltoallv(sendbuf, per_rank(t, sendcounts), per_rank(t, sdispls), dtype_of(sendtype), recvbuf,
                per_rank(t, recvcounts), per_rank(t, rdispls), dtype_of(recvtype));
  });
}

int shmcoll_alltoallw(shmcoll_team* team, const void* sendbuf, const int64_t* sendcounts,
                      const int64_t* sdispls, const shmcoll_dtype* sendtypes, void* recvbuf,
                      const int64_t* recvcounts, const int64_t* rdispls,
                      const shmcoll_dtype* recvtypes) {
  return guarded([&] {
    shmcoll::Team& t = team_of(team);
    // Reused across calls, so only the first call at a team size allocates.
    thread_local std::vector<shmcoll::Datatype> send_types, recv_types;
    t.alltoallw(sendbuf, per_rank(t, sendcounts), per_rank(t, sdispls),
                datatypes_of(t, sendtypes, send_types), recvbuf, per_rank(t, recvcounts),
                per_rank(t, rdispls), datatypes_of(t, recvtypes, recv_types));
  });
}

int shmcoll_reduce_local(const void* inbuf, void* inoutbuf, int64_t count, shmcoll_dtype dtype,
                         shmcoll_op op) {
  return guarded(
      [&] { shmcoll::reduce_local(inbuf, inoutbuf, count, dtype_of(dtype), op_of(op)); });
}

int shmcoll_op_create(shmcoll_user_function* function, int commute, shmcoll_op* op) {
  return guarded([&] {
    if (!function || !op) {
      throw shmcoll::Error(shmcoll::Errc::invalid_argument,
                           "shmcoll_op_create: function or op is null");
    }
    // The C function takes int lengths: call it on pieces of at most INT_MAX elements.
    auto call = [function](const void* in, void* inout, std::size_t len, shmcoll::Dtype dtype) {
      auto c_dtype = static_cast<shmcoll_dtype>(dtype);
      const std::size_t element = shmcoll::dtype_size(dtype);
      for (std::size_t done = 0; done < len;) {
        int piece = static_cast<int>(std::min<std::size_t>(len - done, INT_MAX));
        function(const_cast<char*>(static_cast<const char*>(in)) + done * element,
                 static_cast<char*>(inout) + done * element, &piece, &c_dtype);
        done += static_cast<std::size_t>(piece);
      }
    };
    std::lock_guard lock(user_ops_mutex);
    user_ops.emplace_back(shmcoll::Op::create(call, commute != 0));
    *op = kFirstUserOp + static_cast<int>(user_ops.size() - 1);
  });
}

int shmcoll_op_free(shmcoll_op* op) {
  return guarded([&] {
    if (!op) throw shmcoll::Error(shmcoll::Errc::invalid_argument, "shmcoll_op_free: op is null");
    op_of(*op);  // rejects predefined and dead handles
    if (*op < kFirstUserOp) {
      throw shmcoll::Error(shmcoll::Errc::invalid_argument,
                           "shmcoll_op_free: op " + std::to_string(*op) + " is predefined");
    }
    std::lock_guard lock(user_ops_mutex);
    user_ops[static_cast<std::size_t>(*op - kFirstUserOp)].reset();
    *op = -1;
  });
}

}  // extern "C"
