// NUMA placement of a rank's pages, applied before they are first touched (libnuma).
#pragma once

#include <cstddef>
#include <string>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::shm {

inline constexpr const char* kPlacementEnv = "SHMCOLL_PLACEMENT";

// Applies `placement` to the page-aligned range [memory, memory + bytes), which nobody has
// touched yet. `local_node` is the NUMA node (OS number) the owning rank runs on, or -1 when it
// is not known (an unbound rank, a loaded topology): `local` then leaves the pages to the owner's
// first touch. Returns "" when applied, else why the placement degraded to `none`.
std::string place_pages(void* memory, std::size_t bytes, const Placement& placement,
                        int local_node);

// The NUMA node holding the page at `address` (get_mempolicy with MPOL_F_NODE | MPOL_F_ADDR),
// or -1 when the kernel cannot say.
int node_of_page(const void* address);
// The memory policy mode covering `address` (MPOL_DEFAULT, MPOL_PREFERRED, MPOL_INTERLEAVE ...).
int policy_of_page(const void* address);

}  // namespace shmcoll::shm
