// Rounds over the segment (see layout.hpp for the rule). This is the only place that waits:
// every wait spins briefly with a pause instruction, then sleeps on the awaited futex word, and
// fails with peer_failed when the team is aborted or the awaited member has exited.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "shm/peer_watch.hpp"
#include "shm/segment.hpp"

namespace shmcoll::shm {

struct WaitPolicy {
  long spin_ns = 50'000;             // busy-wait this long before sleeping on the futex
  long sleep_slice_ns = 10'000'000;  // longest single futex sleep: liveness is checked this often
  long timeout_ms = 0;               // 0: wait forever (peers are still watched)
};

class Rounds {
 public:
  Rounds(Segment segment, std::uint32_t rank, WaitPolicy policy);

  std::uint32_t rank() const { return rank_; }
  std::uint32_t size() const { return size_; }
  std::size_t slot_bytes() const { return segment_.layout().slot_bytes; }
  const Segment& segment() const { return segment_; }

  // The next round number; every rank calls it the same number of times. Fails once the team
  // is aborted, even when the round would need no wait.
  std::uint32_t begin() {
    if (segment_.header().abort_word.load(std::memory_order_relaxed) != 0) fail_aborted(rank_);
    return ++round_;
  }
  std::byte* slot(std::uint32_t rank, std::uint32_t round) const {
    return segment_.slot(rank, round & 1);
  }
  // Before writing my slot for `round`: wait until nobody can still read round-2 from it.
  void wait_slot_free(std::uint32_t round) { wait_for_all(round - 1); }
  void publish(std::uint32_t round);
  void wait_for(std::uint32_t peer, std::uint32_t round) {
    if (round_reached(known_[peer], round)) return;
    const std::uint32_t seen = segment_.control(peer).round.load(std::memory_order_acquire);
    if (round_reached(seen, round)) {
      known_[peer] = seen;
      return;
    }
    const auto& word = segment_.control(peer).round;
    known_[peer] = wait_slow(peer, round, word, word);
  }

  // Small payloads (<= kMessageBytes) travel in message lines instead of slots; the round rule
  // is the same over kMessageLines rounds (publish_message waits for the line to be free).
  // Readers call wait_message(peer, round) and read the returned bytes.
  void publish_message(std::uint32_t round, const void* data, std::size_t bytes);
  const std::byte* wait_message(std::uint32_t peer, std::uint32_t round);
  void wait_for_all(std::uint32_t round) {
    for (std::uint32_t peer = 0; peer < size_; ++peer) {
      if (peer != rank_) wait_for(peer, round);
    }
  }

  // Direct reads: a rank that copied blocks straight out of other ranks' heaps in `round` says
  // so with release(round); their owners wait_released() before the memory may change.
  void release(std::uint32_t round);
  void wait_released(std::uint32_t peer, std::uint32_t round) {
    const auto& word = segment_.control(peer).released;
    if (!round_reached(word.load(std::memory_order_acquire), round)) {
      wait_slow(peer, round, word, word);
    }
  }

  // Joins the team: publishes my pid and `profile_data` (at most kProfileBytes) in my profile,
  // touches my pages (place them first), waits until everyone has joined, starts watching peers.
  void join_team(std::span<const std::byte> profile_data = {});
  // What `peer` published when it joined.
  const std::byte* profile_data(std::uint32_t peer) const { return segment_.profile(peer).data; }
  // Ends the team for everybody, naming `failed_rank` as the cause.
  void abort_team(std::uint32_t failed_rank) const { segment_.abort(failed_rank); }

 private:
  // `peer` is the rank being awaited, or my own rank when no wait was in progress.
  [[noreturn]] void fail_aborted(std::uint32_t peer) const;
  // Spins on `spin_word` (the peer's round word, or the message line it is about to fill), then
  // sleeps on `sleep_word` (the peer's round word, which the peer always publishes after its
  // message line). Returns the value that reached `round`.
  std::uint32_t wait_slow(std::uint32_t peer, std::uint32_t round,
                          const std::atomic<std::uint32_t>& spin_word,
                          const std::atomic<std::uint32_t>& sleep_word);

  Segment segment_;
  PeerWatch peers_;
  std::uint32_t rank_;
  std::uint32_t size_;
  std::uint32_t round_ = 0;
  WaitPolicy policy_;
  // Highest round seen per peer: a round a peer is known to have reached needs no shared read.
  std::vector<std::uint32_t> known_;
};

}  // namespace shmcoll::shm
