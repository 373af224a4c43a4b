/* Communicators that come and go, as libraries and solvers make them (issue 31): the MPI alone
 * against the same binary with the layer preloaded. Every result is checked.
 *   mpi_comm_churn dup N            N x (MPI_Comm_dup, one 8 B allreduce, MPI_Comm_free)
 *   mpi_comm_churn split STEPS K    STEPS x (split by parity, K 8 B allreduces, free)
 *   mpi_comm_churn group STEPS K    STEPS x (MPI_Comm_create_group of the even ranks, K 8 B
 *                                   allreduces on it, free), the odd ranks idle
 *   mpi_comm_churn kept N BUSY K [FIRST]  N communicators kept, FIRST allreduces on each (as a
 *                                   library makes when it sets one up), then K on each of the
 *                                   last BUSY
 *   mpi_comm_churn die STEPS K AT    split STEPS K, where rank 2 kills itself (SIGKILL) at step AT,
 *                                   between two calls on the step's communicator
 *   mpi_comm_churn handover K       two communicators: K allreduces on the first, K on the second,
 *                                   the first freed, K more on the second
 *   mpi_comm_churn paced K US       K allreduces on one communicator, rank 0 sleeping US
 *                                   microseconds before each (the others' calls wait that long)
 * Rank 0 prints the slowest rank's time per iteration (per busy call for kept), in us, and how many
 * file descriptors and mappings rank 0 gained from the tenth iteration to the last (a team per
 * communicator that were never given back would show there). */
#include <dirent.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0;

/* One 8 B allreduce of rank + 1 + salt, checked against the sum over the communicator. */
static void checked_allreduce(MPI_Comm comm, long salt) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  long in = rank + 1 + salt, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_LONG, MPI_SUM, comm);
  if (out != (long)size * (size + 1) / 2 + salt * size) ++failures;
}

static int count_entries(const char* directory) {
  DIR* dir = opendir(directory);
  int n = 0;
  for (struct dirent* entry; dir && (entry = readdir(dir));) n += entry->d_name[0] != '.';
  if (dir) closedir(dir);
  return n;
}

static int count_mappings(void) {
  FILE* maps = fopen("/proc/self/maps", "r");
  int n = 0;
  for (int c; maps && (c = fgetc(maps)) != EOF;) n += c == '\n';
  if (maps) fclose(maps);
  return n;
}

/* Descriptors and mappings at the tenth iteration, to compare with the end. */
static int fds_then = -1, maps_then = -1;
static void note_resources(int iteration) {
  if (iteration == 10) fds_then = count_entries("/proc/self/fd"), maps_then = count_mappings();
}

static double slowest(double seconds) {
  double max = 0;
  MPI_Reduce(&seconds, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return max;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char* mode = argc > 1 ? argv[1] : "";
  const int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
  const int c = argc > 4 ? atoi(argv[4]) : 0, d = argc > 5 ? atoi(argv[5]) : 0;
  checked_allreduce(MPI_COMM_WORLD, 0);
  MPI_Barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime(), per = 0;
  if (!strcmp(mode, "dup") && a > 0) {
    for (int i = 0; i < a; ++i) {
      MPI_Comm dup;
      MPI_Comm_dup(MPI_COMM_WORLD, &dup);
      checked_allreduce(dup, i);
      MPI_Comm_free(&dup);
      note_resources(i);
    }
    per = slowest(MPI_Wtime() - start) / a;
  } else if ((!strcmp(mode, "split") || !strcmp(mode, "die")) && a > 0 && b >= 0) {
    const int dies_at = !strcmp(mode, "die") ? c : -1;
    for (int step = 0; step < a; ++step) {
      MPI_Comm half;
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
      for (int k = 0; k < b; ++k) {
        if (step == dies_at && k == b / 2 && rank == 2) raise(SIGKILL);
        checked_allreduce(half, k);
      }
      MPI_Comm_free(&half);
      note_resources(step);
    }
    per = slowest(MPI_Wtime() - start) / a;
  } else if (!strcmp(mode, "group") && a > 0 && b >= 0) {
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Group world, evens;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(world, 1, range, &evens);
    for (int step = 0; step < a; ++step) {
      if (rank % 2 == 0) {
        MPI_Comm made;
        MPI_Comm_create_group(MPI_COMM_WORLD, evens, step, &made);
        for (int k = 0; k < b; ++k) checked_allreduce(made, k);
        MPI_Comm_free(&made);
      }
      note_resources(step);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&world);
    per = slowest(MPI_Wtime() - start) / a;
  } else if (!strcmp(mode, "kept") && a > 0 && b > 0 && b <= a && c > 0) {
    MPI_Comm* comms = malloc(sizeof(MPI_Comm) * a);
    for (int i = 0; i < a; ++i) MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]);
    for (int i = 0; i < a; ++i) {
      for (int k = 0; k < d; ++k) checked_allreduce(comms[i], k);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    start = MPI_Wtime();
    for (int k = 0; k < c; ++k) {
      for (int i = a - b; i < a; ++i) checked_allreduce(comms[i], k);
    }
    per = slowest(MPI_Wtime() - start) / ((double)b * c);
    for (int i = 0; i < a; ++i) MPI_Comm_free(&comms[i]);
    free(comms);
  } else if (!strcmp(mode, "handover") && a > 0) {
    MPI_Comm first, second;
    MPI_Comm_dup(MPI_COMM_WORLD, &first);
    MPI_Comm_dup(MPI_COMM_WORLD, &second);
    for (int k = 0; k < a; ++k) checked_allreduce(first, k);
    for (int k = 0; k < a; ++k) checked_allreduce(second, k);
    MPI_Comm_free(&first);
    for (int k = 0; k < a; ++k) checked_allreduce(second, k);
    MPI_Comm_free(&second);
    per = slowest(MPI_Wtime() - start) / (3.0 * a);
  } else if (!strcmp(mode, "paced") && a > 0 && b >= 0) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int k = 0; k < a; ++k) {
      if (rank == 0 && b > 0) usleep((useconds_t)b);
      checked_allreduce(comm, k);
    }
    per = slowest(MPI_Wtime() - start) / a;
    MPI_Comm_free(&comm);
  } else {
    if (rank == 0)
      fprintf(stderr,
              "usage: mpi_comm_churn dup N | split STEPS K | group STEPS K | kept N BUSY K "
              "[FIRST] | handover K | die STEPS K AT | paced K US\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int all_failures = 0;
  MPI_Reduce(&failures, &all_failures, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    const int fds = fds_then < 0 ? 0 : count_entries("/proc/self/fd") - fds_then;
    const int maps = maps_then < 0 ? 0 : count_mappings() - maps_then;
    printf("%s %.3f us per iteration, %d wrong, %+d fds %+d mappings\n", mode, per * 1e6,
           all_failures, fds, maps);
  }
  MPI_Finalize();
  return all_failures ? 1 : 0;
}
