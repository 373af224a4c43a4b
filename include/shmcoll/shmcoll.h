/* shmcoll C API: mirrors the C++ API in shmcoll.hpp. Every call returns a shmcoll_errc (0 on
 * success); shmcoll_last_error() gives the message of this thread's last failed call. */
#ifndef SHMCOLL_SHMCOLL_H
#define SHMCOLL_SHMCOLL_H

#include <stddef.h>
#include <stdint.h>

#include "shmcoll/export.h"

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
  SHMCOLL_ERR_MISMATCHED_CALL = 7,
  SHMCOLL_ERR_OUT_OF_MEMORY = 8,
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
  SHMCOLL_DOUBLE,
  SHMCOLL_FLOAT16, /* IEEE binary16 bits (_Float16); reduced in float, rounded once */
  SHMCOLL_BFLOAT16,
  SHMCOLL_LONG_DOUBLE,
  SHMCOLL_C_FLOAT_COMPLEX,
  SHMCOLL_C_DOUBLE_COMPLEX,
  SHMCOLL_C_BOOL,
  SHMCOLL_CHAR,
  SHMCOLL_WCHAR,
  SHMCOLL_BYTE,
  SHMCOLL_FLOAT_INT, /* the MAXLOC/MINLOC pairs, laid out as MPI's */
  SHMCOLL_DOUBLE_INT,
  SHMCOLL_LONG_INT,
  SHMCOLL_2INT,
  SHMCOLL_SHORT_INT,
  SHMCOLL_LONG_DOUBLE_INT,
  SHMCOLL_FLOAT_FLOAT,  /* MPI_2REAL */
  SHMCOLL_DOUBLE_DOUBLE /* MPI_2DOUBLE_PRECISION */
} shmcoll_dtype;

/* An operation: one of the predefined ones below, or a handle from shmcoll_op_create. */
typedef int shmcoll_op;
enum {
  SHMCOLL_SUM,
  SHMCOLL_PROD,
  SHMCOLL_MIN,
  SHMCOLL_MAX,
  SHMCOLL_LAND,
  SHMCOLL_LOR,
  SHMCOLL_LXOR,
  SHMCOLL_BAND,
  SHMCOLL_BOR,
  SHMCOLL_BXOR,
  SHMCOLL_MAXLOC,
  SHMCOLL_MINLOC,
  SHMCOLL_REPLACE,
  SHMCOLL_NO_OP
};

/* MPI_User_function's shape: inoutvec[i] = invec[i] op inoutvec[i] for i < *len, where invec
 * holds the operand from the lower rank. */
typedef void shmcoll_user_function(void* invec, void* inoutvec, int* len, shmcoll_dtype* dtype);

typedef enum shmcoll_binding { SHMCOLL_BIND_NONE, SHMCOLL_BIND_CORE } shmcoll_binding;

/* Same value as shmcoll::in_place. */
#define SHMCOLL_IN_PLACE ((void*)1)

typedef struct shmcoll_team shmcoll_team;

SHMCOLL_API const char* shmcoll_last_error(void);
/* The version of the library loaded at run time, e.g. "0.1.0". */
SHMCOLL_API const char* shmcoll_version(void);
SHMCOLL_API const char* shmcoll_errc_name(int code);

/* Fork API: runs fn(team, arg) on n ranks (rank 0 in the caller); fn returns 0 on success. */
SHMCOLL_API int shmcoll_run(int n, size_t slot_bytes, shmcoll_binding bind,
                            int (*fn)(shmcoll_team* team, void* arg), void* arg);
/* Inside a program started by shmcoll-run. */
SHMCOLL_API int shmcoll_attach(shmcoll_team** team);
/* Processes not forked together; `name` from shmcoll_unique_segment_name on one of them. */
SHMCOLL_API int shmcoll_unique_segment_name(char* name, size_t capacity);
SHMCOLL_API int shmcoll_join(const char* name, int rank, int size, size_t slot_bytes,
                             shmcoll_team** team);
SHMCOLL_API int shmcoll_team_free(shmcoll_team* team);
/* As MPI_Comm_split (collective on `team`): members passing the same color (>= 0) form a new
 * team, ranked by key, then by rank in `team`; SHMCOLL_NO_COLOR joins none (*new_team = NULL).
 * Free the new team with shmcoll_team_free. */
#define SHMCOLL_NO_COLOR (-1)
SHMCOLL_API int shmcoll_split(shmcoll_team* team, int color, int key, shmcoll_team** new_team);

SHMCOLL_API int shmcoll_rank(const shmcoll_team* team);
SHMCOLL_API int shmcoll_size(const shmcoll_team* team);

SHMCOLL_API int shmcoll_barrier(shmcoll_team* team);
SHMCOLL_API int shmcoll_bcast(shmcoll_team* team, void* buffer, int64_t count, shmcoll_dtype dtype,
                              int root);
SHMCOLL_API int shmcoll_reduce(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                               int64_t count, shmcoll_dtype dtype, shmcoll_op op, int root);
SHMCOLL_API int shmcoll_allreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                  int64_t count, shmcoll_dtype dtype, shmcoll_op op);
/* Nonblocking forms (Team::ibarrier and the others): *request completes with shmcoll_wait (which
 * frees it and sets it to NULL, returning the call's error) or shmcoll_test (*done = 1 when
 * complete, and then as shmcoll_wait). Every rank issues the team's calls in one order; a
 * blocking call waits for the nonblocking ones issued before it. */
typedef struct shmcoll_request shmcoll_request;
SHMCOLL_API int shmcoll_ibarrier(shmcoll_team* team, shmcoll_request** request);
SHMCOLL_API int shmcoll_ibcast(shmcoll_team* team, void* buffer, int64_t count, shmcoll_dtype dtype,
                               int root, shmcoll_request** request);
SHMCOLL_API int shmcoll_ireduce(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                int64_t count, shmcoll_dtype dtype, shmcoll_op op, int root,
                                shmcoll_request** request);
SHMCOLL_API int shmcoll_iallreduce(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                   int64_t count, shmcoll_dtype dtype, shmcoll_op op,
                                   shmcoll_request** request);
SHMCOLL_API int shmcoll_wait(shmcoll_request** request);
SHMCOLL_API int shmcoll_test(shmcoll_request** request, int* done);
SHMCOLL_API int shmcoll_reduce_scatter(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                       const int64_t* recvcounts, shmcoll_dtype dtype,
                                       shmcoll_op op);
SHMCOLL_API int shmcoll_reduce_scatter_block(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                                             int64_t recvcount, shmcoll_dtype dtype, shmcoll_op op);
SHMCOLL_API int shmcoll_scan(shmcoll_team* team, const void* sendbuf, void* recvbuf, int64_t count,
                             shmcoll_dtype dtype, shmcoll_op op);
SHMCOLL_API int shmcoll_exscan(shmcoll_team* team, const void* sendbuf, void* recvbuf,
                               int64_t count, shmcoll_dtype dtype, shmcoll_op op);

/* Data movement, as MPI's. Arrays have one entry per rank; displacements are in elements, except
 * alltoallw's, which are in bytes. Arrays the standard makes insignificant may be NULL. */
SHMCOLL_API int shmcoll_scatter(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                                shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                                shmcoll_dtype recvtype, int root);
SHMCOLL_API int shmcoll_scatterv(shmcoll_team* team, const void* sendbuf, const int64_t* sendcounts,
                                 const int64_t* displs, shmcoll_dtype sendtype, void* recvbuf,
                                 int64_t recvcount, shmcoll_dtype recvtype, int root);
SHMCOLL_API int shmcoll_gather(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                               shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                               shmcoll_dtype recvtype, int root);
SHMCOLL_API int shmcoll_gatherv(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                                shmcoll_dtype sendtype, void* recvbuf, const int64_t* recvcounts,
                                const int64_t* displs, shmcoll_dtype recvtype, int root);
SHMCOLL_API int shmcoll_allgather(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                                  shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                                  shmcoll_dtype recvtype);
SHMCOLL_API int shmcoll_allgatherv(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                                   shmcoll_dtype sendtype, void* recvbuf, const int64_t* recvcounts,
                                   const int64_t* displs, shmcoll_dtype recvtype);
SHMCOLL_API int shmcoll_alltoall(shmcoll_team* team, const void* sendbuf, int64_t sendcount,
                                 shmcoll_dtype sendtype, void* recvbuf, int64_t recvcount,
                                 shmcoll_dtype recvtype);
SHMCOLL_API int shmcoll_alltoallv(shmcoll_team* team, const void* sendbuf,
                                  const int64_t* sendcounts, const int64_t* sdispls,
                                  shmcoll_dtype sendtype, void* recvbuf, const int64_t* recvcounts,
                                  const int64_t* rdispls, shmcoll_dtype recvtype);
SHMCOLL_API int shmcoll_alltoallw(shmcoll_team* team, const void* sendbuf,
                                  const int64_t* sendcounts, const int64_t* sdispls,
                                  const shmcoll_dtype* sendtypes, void* recvbuf,
                                  const int64_t* recvcounts, const int64_t* rdispls,
                                  const shmcoll_dtype* recvtypes);

/* inoutbuf = inbuf op inoutbuf, in this process (MPI_Reduce_local). */
SHMCOLL_API int shmcoll_reduce_local(const void* inbuf, void* inoutbuf, int64_t count,
                                     shmcoll_dtype dtype, shmcoll_op op);
/* User operations: every rank creates its own handle for the same function before using it. */
SHMCOLL_API int shmcoll_op_create(shmcoll_user_function* function, int commute, shmcoll_op* op);
SHMCOLL_API int shmcoll_op_free(shmcoll_op* op); /* sets *op to -1 */

#ifdef __cplusplus
}
#endif

#endif /* SHMCOLL_SHMCOLL_H */
