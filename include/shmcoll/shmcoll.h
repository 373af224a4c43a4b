/* shmcoll C API: mirrors the C++ API in shmcoll.hpp. Every call returns a shmcoll_errc (0 on
 * success); shmcoll_last_error() gives the message of this thread's last failed call. */
#ifndef SHMCOLL_SHMCOLL_H
#define SHMCOLL_SHMCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum shmcoll_errc {
  SHMCOLL_OK = 0,
  SHMCOLL_ERR_INVALID_ARGUMENT = 1,
  SHMCOLL_ERR_PEER_FAILED = 2,
  SHMCOLL_ERR_RANK_FAILED = 3,
  SHMCOLL_ERR_SEGMENT_MISMATCH = 4,
  SHMCOLL_ERR_SYSTEM = 5,
  SHMCOLL_ERR_TIMEOUT = 6,
  SHMCOLL_ERR_UNKNOWN = 99
} shmcoll_errc;

typedef enum shmcoll_dtype {
  SHMCOLL_INT8,
  SHMCOLL_INT16,
  SHMCOLL_INT32,
  SHMCOLL_INT64,
  SHMCOLL_UINT8,
  SHMCOLL_UINT16,
  SHMCOLL_UINT32,
  SHMCOLL_UINT64,
  SHMCOLL_FLOAT,
  SHMCOLL_DOUBLE
} shmcoll_dtype;

typedef enum shmcoll_op { SHMCOLL_SUM, SHMCOLL_PROD, SHMCOLL_MIN, SHMCOLL_MAX } shmcoll_op;

typedef enum shmcoll_binding { SHMCOLL_BIND_NONE, SHMCOLL_BIND_CORE } shmcoll_binding;

/* Same value as shmcoll::in_place. */
#define SHMCOLL_IN_PLACE ((const void*)1)

typedef struct shmcoll_team shmcoll_team;

const char* shmcoll_last_error(void);
const char* shmcoll_errc_name(int code);

/* Fork API: runs fn(team, arg) on n ranks (rank 0 in the caller); fn returns 0 on success. */
int shmcoll_run(int n, size_t slot_bytes, shmcoll_binding bind,
                int (*fn)(shmcoll_team* team, void* arg), void* arg);
/* Inside a program started by shmcoll-run. */
int shmcoll_attach(shmcoll_team** team);
/* Processes not forked together; `name` from shmcoll_unique_segment_name on one of them. */
int shmcoll_unique_segment_name(char* name, size_t capacity);
int shmcoll_join(const char* name, int rank, int size, size_t slot_bytes, shmcoll_team** team);
int shmcoll_team_free(shmcoll_team* team);

int shmcoll_rank(const shmcoll_team* team);
int shmcoll_size(const shmcoll_team* team);

int shmcoll_barrier(shmcoll_team* team);
int shmcoll_bcast(shmcoll_team* team, void* buffer, int64_t count, shmcoll_dtype dtype, int root);
int shmcoll_reduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                   shmcoll_dtype dtype, shmcoll_op op, int root);
int shmcoll_allreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                      shmcoll_dtype dtype, shmcoll_op op);

#ifdef __cplusplus
}
#endif

#endif /* SHMCOLL_SHMCOLL_H */
