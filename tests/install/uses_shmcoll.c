/* Built against an installed shmcoll with pkg-config: the C API, an allreduce on 3 ranks. */
#include <shmcoll/shmcoll.h>
#include <stdio.h>

static int rank_main(shmcoll_team* team, void* arg) {
  (void)arg;
  long value = shmcoll_rank(team) + 1;
  int status = shmcoll_allreduce(team, SHMCOLL_IN_PLACE, &value, 1, SHMCOLL_INT64, SHMCOLL_SUM);
  return status != SHMCOLL_OK || value != 6;
}

int main(void) {
  int status = shmcoll_run(3, 0, SHMCOLL_BIND_NONE, rank_main, NULL);
  if (status != SHMCOLL_OK) {
    fprintf(stderr, "uses_shmcoll_c: %s\n", shmcoll_last_error());
    return 1;
  }
  printf("uses_shmcoll_c: shmcoll %s, allreduce on 3 ranks ok\n", shmcoll_version());
  return 0;
}
