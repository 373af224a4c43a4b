// The environment shmcoll-run hands to each rank, read back by Team::attach().
#pragma once

namespace shmcoll::detail {

inline constexpr const char* kRankEnv = "SHMCOLL_RANK";
inline constexpr const char* kSizeEnv = "SHMCOLL_SIZE";
inline constexpr const char* kSegmentFdEnv = "SHMCOLL_SEGMENT_FD";

}  // namespace shmcoll::detail
