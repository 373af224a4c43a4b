// The most bytes any buffer, offset or span can cover: 64-bit Linux gives a process at most 2^56
// bytes of address space (with 5-level paging), so anything larger is a wrong argument.
#pragma once

#include <cstdint>

namespace shmcoll {

inline constexpr std::int64_t kMostAddressBytes = std::int64_t{1} << 56;

}  // namespace shmcoll
