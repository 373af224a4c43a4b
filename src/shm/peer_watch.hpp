// Knows whether another member process is still alive, through pidfds (a pidfd turns readable
// when its process exits, zombie or not, and never refers to a recycled pid).
#pragma once

#include <cstdint>
#include <vector>

#include "shm/segment.hpp"

namespace shmcoll::shm {

class PeerWatch {
 public:
  PeerWatch() = default;
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;
  PeerWatch(PeerWatch&& other) noexcept;
  PeerWatch& operator=(PeerWatch&& other) noexcept;
  ~PeerWatch();

  // Opens a pidfd for every member whose pid the segment records (call once all are attached).
  void open_all(const Segment& segment, std::uint32_t self);
  // True when `rank` has exited. Opens its pidfd on first use if open_all could not.
  bool has_exited(const Segment& segment, std::uint32_t rank);

 private:
  void close_all();
  std::vector<int> pidfds_;
};

}  // namespace shmcoll::shm
