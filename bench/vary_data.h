/* --vary-data, shared by shmcoll-bench and the MPI harness so both vary their buffers alike: each
 * call of a batch uses the next of several buffer slots, each filled with different values, so a
 * call does not find the previous call's data in the caches. Slots start on page boundaries and
 * together span at least VARY_POOL_BYTES, at most VARY_MAX_SLOTS of them, at least 2. 32 MiB is
 * well past a core's L2 (1 MiB here), and a per-size cost of first touches we can afford. (This VM
 * reports a 508 MB L3, which no pool of sensible size outgrows.) */
#ifndef SHMCOLL_BENCH_VARY_DATA_H
#define SHMCOLL_BENCH_VARY_DATA_H

#include <stddef.h>

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
