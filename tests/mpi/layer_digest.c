// The failure count and the digest of every result, shared by the MPI layer's check programs
// (layer_check.h): each rank prints one digest line, so a run with the layer and one without
// compare bitwise (run_mpi_layer_test.sh).
#include <stdio.h>

#include "layer_check.h"

int failures = 0;
static uint64_t digest = 1469598103934665603ull;

void absorb(const void* data, size_t bytes) {
  const unsigned char* p = data;
  for (size_t i = 0; i < bytes; ++i) digest = (digest ^ p[i]) * 1099511628211ull;
}

void print_digest(int rank) {
  printf("rank %d digest %016llx failures %d\n", rank, (unsigned long long)digest, failures);
}
