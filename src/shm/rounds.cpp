#include "shm/rounds.hpp"

#include <sched.h>
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
  // A team that ended before I joined fails here. Once I have joined, the others may run ahead
  // and end it at once (a mismatched first call, say): that is for my first collective to report.
  if (segment_.header().abort_word.load(std::memory_order_acquire) != 0) fail_aborted(rank_);
  mine.joined.store(1, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(mine.joined);
  for (std::uint32_t peer = 0; peer < size_; ++peer) {
    const auto& joined = segment_.profile(peer).joined;
    if (peer != rank_) wait_slow(peer, 1, joined, joined);
  }
  peers_.open_all(segment_, rank_);
}

void Rounds::publish_message(std::uint32_t round, const void* data, std::size_t bytes) {
  if (bytes > kMessageBytes) {
    fail(Errc::invalid_argument, "rank ", rank_, ": a message of ", bytes,
         " bytes does not fit a message line (", kMessageBytes, " bytes)");
  }
  wait_for_all(round - (kMessageLines - 1));  // the line last carried round - kMessageLines
  MessageLine& line = segment_.control(rank_).messages[round % kMessageLines];
  if (bytes > 0) std::memcpy(line.data, data, bytes);
  line.signature.store(signature_, std::memory_order_relaxed);
  line.previous_digest.store(previous_digest_, std::memory_order_relaxed);
  line.round.store(round, std::memory_order_release);
  // The round word is what sleepers wait on. A release store, so publishing never stalls on the
  // store buffer (a seq_cst store would cost a cache-line round trip per round). A sleeper
  // increments `sleepers` (seq_cst) before re-reading the word, and FUTEX_WAIT re-checks the word
  // in the kernel, so a wake-up can only be missed if our store stays buffered for the whole futex
  // system call; even then the sleeper wakes after its sleep slice and sees the round.
  auto& word = segment_.control(rank_).round;
  word.store(round, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_acquire) != 0) futex_wake_all(word);
}

void Rounds::release(std::uint32_t round) {
  auto& word = segment_.control(rank_).released;
  word.store(round, std::memory_order_release);
  if (segment_.header().sleepers.load(std::memory_order_acquire) != 0) futex_wake_all(word);
}

void Rounds::fail_previous_mismatch(std::uint32_t peer) const {
  const std::uint32_t before = call_first_round_ - 1;
  const MessageLine& line = segment_.control(peer).messages[before % kMessageLines];
  const bool on_record = line.round.load(std::memory_order_acquire) == before;
  fail_mismatch(peer, previous_signature_,
                on_record ? line.signature.load(std::memory_order_relaxed) : 0);
}

void Rounds::fail_mismatch(std::uint32_t peer, std::uint64_t my_signature,
                           std::uint64_t peer_signature) const {
  MismatchRecord& record = segment_.header().mismatch;
  std::uint32_t expected = MismatchRecord::none;
  if (record.state.compare_exchange_strong(expected, MismatchRecord::writing)) {
    record.reporter = rank_;
    record.peer = peer;
    record.reporter_signature = my_signature;
    record.peer_signature = peer_signature;
    record.state.store(MismatchRecord::written, std::memory_order_release);
    segment_.abort(rank_);
  }
  fail_recorded_mismatch();
}

void Rounds::fail_recorded_mismatch() const {
  const MismatchRecord& record = segment_.header().mismatch;
  while (record.state.load(std::memory_order_acquire) != MismatchRecord::written) {
    sched_yield();  // the reporter is between two stores
  }
  const std::string what = describe_ ? describe_(record.peer, record.peer_signature,
                                                 record.reporter, record.reporter_signature)
                                     : "rank " + std::to_string(record.peer) + " and rank " +
                                           std::to_string(record.reporter) +
                                           " called different collectives";
  fail(Errc::mismatched_call, "rank ", rank_, ": mismatched collective calls: ", what);
}

void Rounds::fail_aborted(std::uint32_t peer) const {
  if (segment_.header().mismatch.state.load(std::memory_order_acquire) != MismatchRecord::none) {
    fail_recorded_mismatch();
  }
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

void Rounds::wait_slow(std::uint32_t peer, std::uint32_t round,
                       const std::atomic<std::uint32_t>& spin_word,
                       const std::atomic<std::uint32_t>& word) {
  auto& header = segment_.header();
  auto reached_on = [&](const std::atomic<std::uint32_t>& watched) {
    return round_reached(watched.load(std::memory_order_acquire), round);
  };
  auto reached = [&] { return reached_on(word); };

  const long long start = now_ns();
  for (unsigned spins = 1;; ++spins) {
    if (reached_on(spin_word)) return;
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
    if (reached()) return;
    if (header.abort_word.load(std::memory_order_acquire) != 0) fail_aborted(peer);
    if (peers_.has_exited(segment_, peer)) {
      if (reached()) return;  // it published before leaving
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
