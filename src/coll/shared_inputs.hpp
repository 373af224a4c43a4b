// An allreduce that reads its peers' send buffers where they are: in the buffers' shared pages
// (shm/shared_pages.hpp), with no copy into the slots. Round one's message line carries each
// rank's note (where its buffer is shared); the bytes of its buffer in the partly used pages at
// its ends travel in its slot. The call takes this path only when every rank's note says its
// buffer is shared: every rank reads the same notes, so all agree. Otherwise the caller goes on
// with its usual algorithm, one round later. Not for reduce: its root alone reads, and out of
// the senders' buffers it measured no faster than out of the slots they fill at the same time
// (2 ranks, 1-4 MiB: 0.86-1.19x).
#pragma once

#include <cstddef>

#include "coll/collectives.hpp"

namespace shmcoll::coll {

// Every rank reduces every rank's buffer itself, in rank order (allreduce_all_read's result);
// true when the call was done this way. For large calls (SHMCOLL_SHARE_PAGES_MIN) on ranks with
// CPUs of their own, not in place.
bool allreduce_from_shared_pages(Context& ctx, const std::byte* send, std::byte* recv,
                                 std::size_t count, Dtype dtype, const Op& op);

}  // namespace shmcoll::coll
