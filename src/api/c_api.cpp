// The C API: each call converts exceptions into an error code and a thread-local message.
#include <cstring>
#include <string>

#include "shmcoll/shmcoll.h"
#include "shmcoll/shmcoll.hpp"

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

shmcoll::Team& team_of(shmcoll_team* team) {
  if (!team) throw shmcoll::Error(shmcoll::Errc::invalid_argument, "team is null");
  return team->team;
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
  return guarded(
      [&] { team_of(team).bcast(buffer, count, static_cast<shmcoll::Dtype>(dtype), root); });
}

int shmcoll_reduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                   shmcoll_dtype dtype, shmcoll_op op, int root) {
  return guarded([&] {
    team_of(team).reduce(sendbuf, recvbuf, count, static_cast<shmcoll::Dtype>(dtype),
                         static_cast<shmcoll::Op>(op), root);
  });
}

int shmcoll_allreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                      shmcoll_dtype dtype, shmcoll_op op) {
  return guarded([&] {
    team_of(team).allreduce(sendbuf, recvbuf, count, static_cast<shmcoll::Dtype>(dtype),
                            static_cast<shmcoll::Op>(op));
  });
}

}  // extern "C"
