// The layer keeps the MPI's progress going while its collectives wait: rank 0 posts a receive and
// enters a collective that rank 1 enters only after its large send to that receive has completed
// (a rendezvous, which needs rank 0's MPI to move the message). MPI's own collectives progress it
// while they wait; with the layer's, the program must not hang. Every result is checked against a
// reference computed from the inputs, and each rank prints a digest for the comparison with the
// run without the layer.
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

enum { kMessageBytes = 1 << 20, kRounds = 4 };

// One collective of each kind the layer serves node-wide; `which` picks it.
static void collective(int which, int rank, int size, int round) {
  double mine = rank + round, sum = 0;
  int value = rank == 0 ? 1000 + round : -1;
  switch (which) {
    case 0:
      MPI_Barrier(MPI_COMM_WORLD);
      break;
    case 1:
      MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
      CHECK(value == 1000 + round, "bcast");
      absorb(&value, sizeof value);
      break;
    default:
      MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      CHECK(sum == size * (size - 1) / 2.0 + size * round, "allreduce");
      absorb(&sum, sizeof sum);
  }
}

// Rank 1 sends to rank 0 before the collective; rank 0 receives after it.
static void send_before_collective(int rank, int size, char* message) {
  for (int round = 0; round < kRounds; ++round) {
    for (int which = 0; which < 3; ++which) {
      if (rank == 0) {
        MPI_Request receive;
        memset(message, 0, kMessageBytes);
        MPI_Irecv(message, kMessageBytes, MPI_CHAR, 1, round, MPI_COMM_WORLD, &receive);
        collective(which, rank, size, round);
        MPI_Wait(&receive, MPI_STATUS_IGNORE);
        CHECK(message[0] == (char)(round + 1) && message[kMessageBytes - 1] == (char)(round + 1),
              "the message sent before the collective");
      } else {
        if (rank == 1) {
          memset(message, round + 1, kMessageBytes);
          MPI_Send(message, kMessageBytes, MPI_CHAR, 0, round, MPI_COMM_WORLD);
        }
        collective(which, rank, size, round);
      }
    }
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char* message = malloc(kMessageBytes);
  if (size >= 2) send_before_collective(rank, size, message);
  free(message);
  print_digest(rank);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
