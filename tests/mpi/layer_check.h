// Shared by the MPI layer check program's files: the failure count, the digest of every result,
// and the check macro.
#pragma once
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int failures;
void absorb(const void* data, size_t bytes);
// This rank's line "rank R digest D failures F" (layer_digest.c).
void print_digest(int rank);

// Defined by the layer, so null when the program runs without it.
extern const char* shmcoll_mpi_layer_version(void) __attribute__((weak));
// Whether the layer runs every collective on `comm` itself: loaded, not on pretend nodes (there,
// all but barrier, bcast, reduce and allreduce go to the MPI underneath), and more than one rank
// (a communicator of one rank is the MPI's).
int layer_serves_every_call(MPI_Comm comm);
// The class of an MPI error code (MPI_SUCCESS for success).
int error_class(int rc);

#define CHECK(cond, ...)                                    \
  do {                                                      \
    if (!(cond)) {                                          \
      ++failures;                                           \
      fprintf(stderr, "line %d: check failed: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                         \
      fprintf(stderr, "\n");                                \
    }                                                       \
  } while (0)

// 2x2 matrices of uint64 (4 elements each), multiplied modulo 2^64: a non-commutative user op,
// and the entries of rank r's matrices.
void matrix_product(void* in, void* inout, int* len, MPI_Datatype* type);
uint64_t matrix_entry(int rank, int i);
// The product M0 x M1 x ... x Mlast of ranks 0..last's matrices (count <= 400 entries each).
void matrix_chain(int last, int count, uint64_t* out);

// Scatter(v), gather(v), allgather(v), alltoall(v/w), each in place and not, with derived types.
void check_movement(MPI_Comm comm);
// Every data-movement collective with different type maps of one signature on different ranks.
void check_mixed_type_maps(MPI_Comm comm);
// Reductions on Fortran's element types (INTEGER, REAL, LOGICAL ...), from C.
void check_fortran_types(MPI_Comm comm);
// Reductions on one-byte types beyond the standard's table, and on what the MPIs refuse.
void check_byte_types(MPI_Comm comm);
// MPI_BOTTOM with struct types of absolute addresses in bcast, gather, allgather and alltoallw,
// blocking and nonblocking.
void check_bottom(MPI_Comm comm);
// MPI-4's large-count forms (MPI_Allreduce_c ...) where the MPI has them; nothing elsewhere.
void check_large_count_forms(MPI_Comm comm);
// Alltoall, allgather, scatter, bcast and allreduce on MPI_Alloc_mem buffers, fresh each time.
void check_alloc_mem(MPI_Comm comm);
// Reduce_scatter(_block), scan and exscan, in place and not, with a non-commutative op.
void check_prefix_and_scatter_reductions(MPI_Comm comm);
