/* The C API from C: a forked team runs each collective; exit 0 when all results are right. */
#include <shmcoll/shmcoll.h>
#include <stdio.h>
#include <string.h>

static void keep_left(void* invec, void* inoutvec, int* len, shmcoll_dtype* dtype) {
  if (*dtype == SHMCOLL_INT32) memcpy(inoutvec, invec, (size_t)*len * sizeof(int32_t));
}

/* The collectives beyond the first four, with 4 ranks: each checked against what the inputs
 * say it must produce. */
static int check_other_collectives(shmcoll_team* team) {
  const int rank = shmcoll_rank(team), size = shmcoll_size(team);
  int32_t all[4], got[4], one;
  int64_t counts[4], displs[4], byte_displs[4];
  shmcoll_dtype types[4];
  for (int i = 0; i < size; ++i) {
    all[i] = rank * 10 + i; /* my value for rank i */
    counts[i] = 1, displs[i] = size - 1 - i, byte_displs[i] = displs[i] * 4;
    types[i] = SHMCOLL_INT32;
  }
  if (shmcoll_reduce_scatter_block(team, all, &one, 1, SHMCOLL_INT32, SHMCOLL_SUM) != SHMCOLL_OK)
    return 20;
  if (one != 10 * (0 + 1 + 2 + 3) + size * rank) return 21;
  if (shmcoll_reduce_scatter(team, all, &one, counts, SHMCOLL_INT32, SHMCOLL_MAX) != SHMCOLL_OK)
    return 22;
  if (one != 10 * (size - 1) + rank) return 23;
  if (shmcoll_scan(team, &all[0], &one, 1, SHMCOLL_INT32, SHMCOLL_SUM) != SHMCOLL_OK) return 24;
  if (one != 10 * rank * (rank + 1) / 2) return 25;
  one = -1;
  if (shmcoll_exscan(team, &all[0], &one, 1, SHMCOLL_INT32, SHMCOLL_SUM) != SHMCOLL_OK) return 26;
  if (one != (rank == 0 ? -1 : 10 * rank * (rank - 1) / 2)) return 27;
  if (shmcoll_scatter(team, all, 1, SHMCOLL_INT32, &one, 1, SHMCOLL_INT32, 2) != SHMCOLL_OK)
    return 28;
  if (one != 20 + rank) return 29;
  if (shmcoll_scatterv(team, all, counts, displs, SHMCOLL_INT32, &one, 1, SHMCOLL_INT32, 1) !=
      SHMCOLL_OK)
    return 30;
  if (one != 10 + size - 1 - rank) return 31;
  if (shmcoll_gather(team, &all[0], 1, SHMCOLL_INT32, got, 1, SHMCOLL_INT32, 3) != SHMCOLL_OK)
    return 32;
  if (rank == 3 && (got[0] != 0 || got[3] != 30)) return 33;
  if (shmcoll_gatherv(team, &all[0], 1, SHMCOLL_INT32, rank == 0 ? got : NULL,
                      rank == 0 ? counts : NULL, rank == 0 ? displs : NULL, SHMCOLL_INT32,
                      0) != SHMCOLL_OK)
    return 34;
  if (rank == 0 && (got[0] != 30 || got[3] != 0)) return 35;
  if (shmcoll_allgather(team, &all[1], 1, SHMCOLL_INT32, got, 1, SHMCOLL_INT32) != SHMCOLL_OK)
    return 36;
  if (got[2] != 21) return 37;
  if (shmcoll_allgatherv(team, &all[1], 1, SHMCOLL_INT32, got, counts, displs, SHMCOLL_INT32) !=
      SHMCOLL_OK)
    return 38;
  if (got[size - 1] != 1) return 39;
  if (shmcoll_alltoall(team, all, 1, SHMCOLL_INT32, got, 1, SHMCOLL_INT32) != SHMCOLL_OK) return 40;
  if (got[1] != 10 + rank) return 41;
  if (shmcoll_alltoallv(team, all, counts, displs, SHMCOLL_INT32, got, counts, displs,
                        SHMCOLL_INT32) != SHMCOLL_OK)
    return 42;
  /* Rank i's block for me sits at displs[me]: it holds all[size - 1 - me] of rank i. */
  if (got[displs[1]] != 10 + size - 1 - rank) return 43;
  /* In place, blocks in reverse order (byte displacements): rank i sent what it held at
   * displs[me] and it lands at displs[i]. */
  if (shmcoll_alltoallw(team, SHMCOLL_IN_PLACE, NULL, NULL, NULL, all, counts, byte_displs,
                        types) != SHMCOLL_OK)
    return 44;
  if (all[displs[2]] != 20 + size - 1 - rank) return 45;
  if (shmcoll_alltoallv(team, all, NULL, displs, SHMCOLL_INT32, got, counts, displs,
                        SHMCOLL_INT32) != SHMCOLL_ERR_INVALID_ARGUMENT)
    return 46;
  if (strstr(shmcoll_last_error(), "sendcounts") == NULL) return 47;
  return shmcoll_barrier(team) == SHMCOLL_OK ? 0 : 11;
}

/* Two nonblocking calls outstanding, completed by test and by wait. */
static int check_nonblocking(shmcoll_team* team) {
  const int rank = shmcoll_rank(team), size = shmcoll_size(team);
  double value = rank + 1.0, sum = 0.0;
  int32_t data[2] = {rank, rank};
  shmcoll_request *summed = NULL, *broadcast = NULL;
  if (shmcoll_iallreduce(team, &value, &sum, 1, SHMCOLL_DOUBLE, SHMCOLL_SUM, &summed) != SHMCOLL_OK)
    return 50;
  if (shmcoll_ibcast(team, data, 2, SHMCOLL_INT32, size - 1, &broadcast) != SHMCOLL_OK) return 51;
  int done = 0;
  while (!done) {
    if (shmcoll_test(&summed, &done) != SHMCOLL_OK) return 52;
  }
  if (summed != NULL || sum != size * (size + 1) / 2.0) return 53;
  if (shmcoll_wait(&broadcast) != SHMCOLL_OK || broadcast != NULL) return 54;
  if (data[0] != size - 1 || data[1] != size - 1) return 55;
  if (shmcoll_ibcast(team, data, 1, SHMCOLL_INT32, size, &broadcast) !=
      SHMCOLL_ERR_INVALID_ARGUMENT)
    return 56;
  return 0;
}

/* Pairs (0, 1) and (2, 3) ranked in reverse, and a rank without a color. */
static int check_split(shmcoll_team* team) {
  const int rank = shmcoll_rank(team);
  shmcoll_team* pair = NULL;
  if (shmcoll_split(team, rank / 2, -rank, &pair) != SHMCOLL_OK || pair == NULL) return 40;
  if (shmcoll_size(pair) != 2 || shmcoll_rank(pair) != 1 - rank % 2) return 41;
  int32_t mine = rank, sum = 0;
  if (shmcoll_allreduce(pair, &mine, &sum, 1, SHMCOLL_INT32, SHMCOLL_SUM) != SHMCOLL_OK) return 42;
  if (sum != 4 * (rank / 2) + 1) return 43;
  shmcoll_team_free(pair);
  shmcoll_team* none = team;
  if (shmcoll_split(team, rank == 0 ? SHMCOLL_NO_COLOR : 0, 0, &none) != SHMCOLL_OK) return 44;
  if ((rank == 0) != (none == NULL) || (none && shmcoll_size(none) != 3)) return 45;
  shmcoll_team_free(none);
  if (shmcoll_split(team, -7, 0, &none) != SHMCOLL_ERR_INVALID_ARGUMENT) return 46;
  if (strstr(shmcoll_last_error(), "color -7") == NULL) return 47;
  return 0;
}

static int check_team(shmcoll_team* team, void* arg) {
  (void)arg;
  const int rank = shmcoll_rank(team), size = shmcoll_size(team);
  double value = rank + 1.0, sum = 0.0;
  if (shmcoll_allreduce(team, &value, &sum, 1, SHMCOLL_DOUBLE, SHMCOLL_SUM) != SHMCOLL_OK) return 1;
  if (sum != size * (size + 1) / 2.0) return 2;
  int32_t data[3] = {0, 0, 0};
  if (rank == 1) data[0] = 7, data[1] = 8, data[2] = 9;
  if (shmcoll_bcast(team, data, 3, SHMCOLL_INT32, 1) != SHMCOLL_OK) return 3;
  if (data[0] != 7 || data[2] != 9) return 4;
  int64_t mine = rank, max = -1;
  if (shmcoll_reduce(team, &mine, &max, 1, SHMCOLL_INT64, SHMCOLL_MAX, 0) != SHMCOLL_OK) return 5;
  if (rank == 0 && max != size - 1) return 6;
  if (shmcoll_allreduce(team, SHMCOLL_IN_PLACE, &value, 1, SHMCOLL_DOUBLE, SHMCOLL_MIN) !=
      SHMCOLL_OK)
    return 7;
  if (value != 1.0) return 8;
  /* A bad argument is an error code with a message naming it, and the team stays usable. */
  if (shmcoll_allreduce(team, &value, &sum, -3, SHMCOLL_DOUBLE, SHMCOLL_SUM) !=
      SHMCOLL_ERR_INVALID_ARGUMENT)
    return 9;
  if (strstr(shmcoll_last_error(), "count") == NULL) return 10;
  /* MAXLOC on MPI's double_int layout: the highest rank holds the maximum. */
  struct {
    double value;
    int index;
  } pair = {rank * 1.5, rank}, best;
  if (shmcoll_allreduce(team, &pair, &best, 1, SHMCOLL_DOUBLE_INT, SHMCOLL_MAXLOC) != SHMCOLL_OK)
    return 12;
  if (best.index != size - 1 || best.value != (size - 1) * 1.5) return 13;
  /* A user operation that is not commutative: "keep the left operand" gives rank 0's value. */
  shmcoll_op left;
  if (shmcoll_op_create(keep_left, 0, &left) != SHMCOLL_OK) return 14;
  int32_t mine32 = 100 + rank, first = -1;
  if (shmcoll_allreduce(team, &mine32, &first, 1, SHMCOLL_INT32, left) != SHMCOLL_OK) return 15;
  if (first != 100 || shmcoll_op_free(&left) != SHMCOLL_OK || left != -1) return 16;
  /* An operation MPI does not define on a type is refused with both named. */
  if (shmcoll_allreduce(team, &value, &sum, 1, SHMCOLL_DOUBLE, SHMCOLL_BXOR) !=
      SHMCOLL_ERR_INVALID_ARGUMENT)
    return 17;
  if (strstr(shmcoll_last_error(), "bxor is not defined on dtype f64") == NULL) return 18;
  const int other = check_other_collectives(team);
  const int split = other ? other : check_split(team);
  return split ? split : check_nonblocking(team);
}

int main(void) {
  const int code = shmcoll_run(4, 0, SHMCOLL_BIND_NONE, check_team, NULL);
  if (code != SHMCOLL_OK) {
    fprintf(stderr, "shmcoll_run failed: %s (%s)\n", shmcoll_errc_name(code), shmcoll_last_error());
    return 1;
  }
  printf("c_api_test: 1 passed, 0 failed\n");
  return 0;
}
