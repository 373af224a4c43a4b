#include "shm/rounds.hpp"

#include <unistd.h>

#include <chrono>
#include <cstring>

#include "shm/futex.hpp"
#include "util/fail.hpp"

namespace shmcoll::shm {

namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Rounds::Rounds(Segment segment, std::uint32_t rank, WaitPolicy policy)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(segment_.layout().team_size),
      policy_(policy),
      known_(size_, 0) {}

void Rounds::join_team(std::span<const std::byte> profile_data) {
  if (profile_data.size() > kProfileBytes) {
    fail(Errc::invalid_argument, "rank ", rank_, ": a profile of ", profile_data.size(),
         " bytes does not fit (", kProfileBytes, " bytes)");
  }
  RankProfile& mine = segment_.profile(rank_);
  mine.pid.store(static_cast<std::int32_t>(getpid()), std::memory_order_relaxed);
  std::memcpy(mine.data, profile_data.data(), profile_data.size());
  segment_.prefault_own_pages(rank_);
  mine.joined.store(1, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(mine.joined);
  if (segment_.header().abort_word.load(std::memory_order_relaxed) != 0) fail_aborted(rank_);
  for (std::uint32_t peer = 0; peer < size_; ++peer) {
    const auto& joined = segment_.profile(peer).joined;
    if (peer != rank_) wait_slow(peer, 1, joined, joined);
  }
  peers_.open_all(segment_, rank_);
}

void Rounds::publish(std::uint32_t round) {
  auto& word = segment_.control(rank_).round;
  // A release store, so publishing never stalls on the store buffer (a seq_cst store would cost a
  // cache-line round trip per round). A sleeper increments `sleepers` (seq_cst) before re-reading
  // the word, and FUTEX_WAIT re-checks the word in the kernel, so a wake-up can only be missed
  // if our store stays buffered for the whole futex system call; even then the sleeper wakes
  // after its sleep slice and sees the round.
  word.store(round, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_acquire) != 0) futex_wake_all(word);
}

void Rounds::release(std::uint32_t round) {
  auto& word = segment_.control(rank_).released;
  word.store(round, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_acquire) != 0) futex_wake_all(word);
}

void Rounds::publish_message(std::uint32_t round, const void* data, std::size_t bytes) {
  if (bytes > kMessageBytes) {
    fail(Errc::invalid_argument, "rank ", rank_, ": a message of ", bytes,
         " bytes does not fit a message line (", kMessageBytes, " bytes)");
  }
  wait_for_all(round - (kMessageLines - 1));  // the line last carried round - kMessageLines
  MessageLine& line = segment_.control(rank_).messages[round % kMessageLines];
  if (bytes > 0) std::memcpy(line.data, data, bytes);
  line.round.store(round, std::memory_order_release);
  publish(round);
}

const std::byte* Rounds::wait_message(std::uint32_t peer, std::uint32_t round) {
  const MessageLine& line = segment_.control(peer).messages[round % kMessageLines];
  // Spin on the message line itself, so flag and payload arrive in one transfer.
  if (!round_reached(known_[peer], round)) {
    known_[peer] = wait_slow(peer, round, line.round, segment_.control(peer).round);
  }
  return line.data;
}

void Rounds::fail_aborted(std::uint32_t peer) const {
  const int culprit = segment_.aborted_by();
  if (culprit >= static_cast<int>(size_)) {
    fail(Errc::peer_failed, "rank ", rank_, ": the launcher stopped the team");
  }
  const std::string context = peer == rank_
                                  ? std::string(" (at the start of a round)")
                                  : " (was waiting for rank " + std::to_string(peer) + ")";
  fail(Errc::peer_failed, "rank ", rank_, ": team aborted because rank ", culprit, " (pid ",
       segment_.profile(static_cast<std::uint32_t>(culprit)).pid.load(), ") failed", context);
}

std::uint32_t Rounds::wait_slow(std::uint32_t peer, std::uint32_t round,
                                const std::atomic<std::uint32_t>& spin_word,
                                const std::atomic<std::uint32_t>& word) {
  auto& header = segment_.header();
  std::uint32_t seen = 0;
  auto reached_on = [&](const std::atomic<std::uint32_t>& watched) {
    seen = watched.load(std::memory_order_acquire);
    return round_reached(seen, round);
  };
  auto reached = [&] { return reached_on(word); };

  const long long start = now_ns();
  for (unsigned spins = 1;; ++spins) {
    if (reached_on(spin_word)) return seen;
    if (header.abort_word.load(std::memory_order_relaxed) != 0) fail_aborted(peer);
    cpu_relax();
    if (spins % 256 == 0 && now_ns() - start >= policy_.spin_ns) break;
  }

  for (;;) {
    header.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t before = word.load(std::memory_order_seq_cst);
    if (!round_reached(before, round) && header.abort_word.load() == 0) {
      futex_wait(word, before, policy_.sleep_slice_ns);
    }
    header.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (reached()) return seen;
    if (header.abort_word.load(std::memory_order_acquire) != 0) fail_aborted(peer);
    if (peers_.has_exited(segment_, peer)) {
      if (reached()) return seen;  // it published before leaving
      segment_.abort(peer);
      fail(Errc::peer_failed, "rank ", rank_, ": rank ", peer, " (pid ",
           segment_.profile(peer).pid.load(), ") exited while this rank waited for its round ",
           round);
    }
    if (policy_.timeout_ms > 0 && now_ns() - start > policy_.timeout_ms * 1'000'000LL) {
      fail(Errc::timeout, "rank ", rank_, ": waited more than ", policy_.timeout_ms,
           " ms for rank ", peer, " to reach round ", round);
    }
  }
}

}  // namespace shmcoll::shm
