/* The measurement method's constants, shared by shmcoll-bench (native_bench.cpp) and the MPI
 * harness (mpi_coll_bench.c) so every contender is measured alike.
 *
 * Per size: WARMUP_CALLS untimed calls, then SIZING_CALLS timed calls size a batch of
 * back-to-back calls lasting about BATCH_SECONDS (1 to MAX_BATCH_CALLS calls). The first calls pay
 * for lazy symbol binding and cold caches; a batch sized from them is too short to hide the
 * barrier between samples.
 *
 * --vary-data: each call of a batch uses the next of several buffer slots, each filled with
 * different values, so a call does not find the previous call's data in the caches. Slots start
 * on page boundaries and together span at least VARY_POOL_BYTES, at most VARY_MAX_SLOTS of them,
 * at least 2. 32 MiB is well past a core's L2 (1 MiB here), and a per-size cost of first touches
 * we can afford. (This VM reports a 508 MB L3, which no pool of sensible size outgrows.)
 *
 * The single-call method (--method single), as OSU and IMB users measure: WARMUP_CALLS untimed
 * calls, then per sample a barrier, one timed call, and the slowest rank's time. Buffers are
 * pages fresh from the kernel (calloc in the MPI harness, a new process per size; mmap in
 * shmcoll-bench's ranks, which live through every size) and the harness never writes them: send pages stay the kernel's zero page, receive
 * pages are first touched by the collective itself, as in a program that allocates and calls.
 * With --written, it writes every byte of both once before timing, as OSU's set_buffer does: a
 * kernel copy (CMA) of a send buffer then reads real pages, not one cached zero page. */
#ifndef SHMCOLL_BENCH_HARNESS_METHOD_H
#define SHMCOLL_BENCH_HARNESS_METHOD_H

#include <stddef.h>

#define WARMUP_CALLS 5
#define SIZING_CALLS 10
#define BATCH_SECONDS 200e-6
#define MAX_BATCH_CALLS 10000

#define VARY_PAGE_BYTES ((size_t)4096)
#define VARY_POOL_BYTES ((size_t)32 << 20)
#define VARY_MAX_SLOTS ((size_t)1024)

static inline size_t vary_slot_stride(size_t buffer_bytes) {
  const size_t pages = (buffer_bytes + VARY_PAGE_BYTES - 1) / VARY_PAGE_BYTES;
  return (pages > 0 ? pages : 1) * VARY_PAGE_BYTES;
}

static inline size_t vary_slot_count(size_t stride) {
  const size_t wanted = (VARY_POOL_BYTES + stride - 1) / stride;
  return wanted < 2 ? 2 : wanted > VARY_MAX_SLOTS ? VARY_MAX_SLOTS : wanted;
}

#endif
