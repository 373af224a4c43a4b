// What a fork costs a process that holds MPI_Alloc_mem memory (issue 57, row 3): each rank
// allocates `mib` MiB with MPI_Alloc_mem, writes it all, then forks `reps` children one after the
// other; each child writes the whole buffer and exits, calling no MPI. Prints, on rank 0, the
// median and range of the time fork() took to return in the parent and of fork to the child's
// exit, and how many bytes of the parent's buffer the children's writes changed (0 is right).
// Run it alone and with the layer preloaded, interleaved:
//   mpirun.openmpi -np 2 [-x LD_PRELOAD=build/lib/libshmcoll_mpi_openmpi.so]
//     build/bin/mpi_fork_cost_openmpi 256 9
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int compare(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t bytes = (size_t)(argc > 1 ? atol(argv[1]) : 256) << 20;
  const int reps = argc > 2 ? atoi(argv[2]) : 9;
  if (reps < 1 || reps > 100 || bytes == 0) {
    if (rank == 0) fprintf(stderr, "usage: mpi_fork_cost [MiB] [reps, 1-100]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  unsigned char* memory = NULL;
  MPI_Alloc_mem((MPI_Aint)bytes, MPI_INFO_NULL, &memory);
  memset(memory, 0x11, bytes);
  double returned[100], exited[100];
  for (int rep = 0; rep < reps; ++rep) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = now_ms();
    const pid_t child = fork();
    if (child == 0) {
      memset(memory, 0x22, bytes);
      _exit(0);
    }
    returned[rep] = now_ms() - start;
    int status = 0;
    waitpid(child, &status, 0);
    exited[rep] = now_ms() - start;
  }
  size_t changed = 0;
  for (size_t i = 0; i < bytes; ++i) changed += memory[i] != 0x11;
  unsigned long long all_changed = changed;
  MPI_Reduce(rank == 0 ? MPI_IN_PLACE : &all_changed, &all_changed, 1, MPI_UNSIGNED_LONG_LONG,
             MPI_SUM, 0, MPI_COMM_WORLD);
  qsort(returned, (size_t)reps, sizeof *returned, compare);
  qsort(exited, (size_t)reps, sizeof *exited, compare);
  if (rank == 0) {
    printf(
        "fork with %zu MiB of MPI_Alloc_mem memory, %d forks: returned in %.2f ms (%.2f-%.2f), "
        "child done in %.2f ms (%.2f-%.2f); %llu bytes of the parents' memory changed by the "
        "children's writes\n",
        bytes >> 20, reps, returned[reps / 2], returned[0], returned[reps - 1], exited[reps / 2],
        exited[0], exited[reps - 1], all_changed);
  }
  MPI_Free_mem(memory);
  MPI_Finalize();
  return all_changed == 0 ? 0 : 1;
}
