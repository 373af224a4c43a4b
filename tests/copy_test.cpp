// copy_bytes (util/copy.hpp) against memcpy: every length around the vector range's edges and
// every alignment of source and destination on a 64-byte line, with guard bytes on both sides.
#include "util/copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using shmcoll::copy_bytes;
using shmcoll::copy_streaming;
using shmcoll::finish_streaming;
using shmcoll::kVectorCopyEnd;
using shmcoll::kVectorCopyMin;

// copy_bytes, and copy_streaming (non-temporal stores between ordinary ones at each end).
TEST(CopyBytes, CopiesEveryLengthAndAlignmentExactly) {
  const std::size_t lengths[] = {0,
                                 1,
                                 63,
                                 kVectorCopyMin - 1,
                                 kVectorCopyMin,
                                 kVectorCopyMin + 1,
                                 kVectorCopyMin + 63,
                                 4096,
                                 4096 + 17,
                                 65536 + 40,
                                 kVectorCopyEnd - 1,
                                 kVectorCopyEnd,
                                 kVectorCopyEnd + 5};
  constexpr std::size_t kGuard = 64;
  std::vector<unsigned char> source(kVectorCopyEnd + 2 * kGuard + 64);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<unsigned char>(i * 131);
  std::vector<unsigned char> target(source.size() + 64);
  for (const bool streaming : {false, true}) {
    for (const std::size_t length : lengths) {
      for (std::size_t from_offset : {0, 8, 16, 31}) {
        for (std::size_t to_offset = 0; to_offset < 64; to_offset += 4) {
          std::fill(target.begin(), target.end(), 0xEE);
          const unsigned char* from = source.data() + from_offset;
          unsigned char* to = target.data() + kGuard + to_offset;
          if (streaming) {
            copy_streaming(to, from, length);
            finish_streaming();
          } else {
            copy_bytes(to, from, length);
          }
          for (std::size_t i = 0; i < length; ++i) {
            ASSERT_EQ(to[i], from[i])
                << (streaming ? "streaming, " : "") << "length " << length << ", byte " << i
                << ", offsets " << from_offset << "/" << to_offset;
          }
          for (const unsigned char* guard = target.data(); guard < to; ++guard) {
            ASSERT_EQ(*guard, 0xEE) << "length " << length << ": wrote before the destination";
          }
          for (const unsigned char* guard = to + length; guard < target.data() + target.size();
               ++guard) {
            ASSERT_EQ(*guard, 0xEE) << "length " << length << ": wrote past the destination";
          }
        }
      }
    }
  }
}

}  // namespace
