/* A dense eigensolver's communication as ScaLAPACK/BLACS makes it (issue 45: Quantum ESPRESSO's
 * cdiaghg at 4 ranks on 2 cores ran 4x slower with the layer): the ranks form a process grid
 * with a communicator per row and per column, and each step makes a few small collectives on
 * them between point-to-point exchanges on MPI_COMM_WORLD:
 *   a panel broadcast along the row (1 KiB), a pivot search along the column (allreduce of 16 B,
 *   MPI_MAXLOC-like as a pair of doubles with MPI_MAX), a norm on the row (allreduce of 8 B),
 *   a halo exchange with the ranks before and after in MPI_COMM_WORLD (MPI_Sendrecv, 4 KiB).
 * Every result is checked.
 *   mpi_subcomm_pattern STEPS [ROWS]   ROWS rows in the grid (default: the squarest)
 * Rank 0 prints the slowest rank's time per step in us and how many results were wrong. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PANEL = 128, HALO = 512 }; /* doubles: 1 KiB and 4 KiB */

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* As a program reads its input: rank 0 parses it and hands it out on MPI_COMM_WORLD. */
  int steps = argc > 1 ? atoi(argv[1]) : 0, rows = argc > 2 ? atoi(argv[2]) : 0;
  MPI_Bcast(&steps, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(&rows, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (rows <= 0)
    for (rows = (int)sqrt((double)size); rows > 1 && size % rows != 0; --rows) {
    }
  if (steps <= 0 || rows <= 0 || size % rows != 0) {
    if (rank == 0) fprintf(stderr, "usage: mpi_subcomm_pattern STEPS [ROWS dividing the ranks]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int cols = size / rows, my_row = rank / cols, my_col = rank % cols;
  MPI_Comm row, col;
  MPI_Comm_split(MPI_COMM_WORLD, my_row, my_col, &row);
  MPI_Comm_split(MPI_COMM_WORLD, my_col, my_row, &col);

  double panel[PANEL], halo_out[HALO], halo_in[HALO], pivot[2], best[2], norm, total;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  long wrong = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int step = 0; step < steps; ++step) {
    const int root = step % cols; /* the column that owns this step's panel */
    for (int i = 0; i < PANEL; ++i) panel[i] = my_col == root ? step + i : -1;
    MPI_Bcast(panel, PANEL, MPI_DOUBLE, root, row);
    for (int i = 0; i < PANEL; ++i) wrong += panel[i] != step + i;

    pivot[0] = (double)((my_row * 7 + step) % rows);
    pivot[1] = (double)my_row;
    MPI_Allreduce(pivot, best, 2, MPI_DOUBLE, MPI_MAX, col);
    double expected = 0;
    for (int r = 0; r < rows; ++r) expected = fmax(expected, (double)((r * 7 + step) % rows));
    wrong += best[0] != expected || best[1] != (double)(rows - 1);

    for (int i = 0; i < HALO; ++i) halo_out[i] = rank * 1000.0 + i + step;
    MPI_Sendrecv(halo_out, HALO, MPI_DOUBLE, next, step, halo_in, HALO, MPI_DOUBLE, prev, step,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    wrong += halo_in[HALO - 1] != prev * 1000.0 + HALO - 1 + step;

    norm = (double)(my_col + 1);
    MPI_Allreduce(&norm, &total, 1, MPI_DOUBLE, MPI_SUM, row);
    wrong += total != (double)cols * (cols + 1) / 2;
  }
  const double mine = MPI_Wtime() - start;
  double slowest = 0;
  long all_wrong = 0;
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0)
    printf("subcomm %dx%d: %.3f us per step, %ld wrong\n", rows, cols, slowest / steps * 1e6,
           all_wrong);
  MPI_Comm_free(&row);
  MPI_Comm_free(&col);
  MPI_Finalize();
  return all_wrong != 0;
}
