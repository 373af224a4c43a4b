// Rounds over the segment (see layout.hpp for the rule). This is the only place that waits:
// every wait spins briefly with a pause instruction, then sleeps on the awaited futex word, and
// fails with peer_failed when the team is aborted or the awaited member has exited.
//
// Call signatures: the layer above names each collective call with a 64-bit signature
// (begin_call); every round carries it in its message line, with a digest of the previous call's
// signature, and every wait for a peer's round of the current call compares both with its own.
// The previous call's digest catches calls in which the two ranks never read each other (two
// ranks that both think they are a bcast's root). A difference ends the team: the first member
// to see one records both and aborts, and every member then fails with mismatched_call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "shm/descriptor_passing.hpp"
#include "shm/peer_watch.hpp"
#include "shm/segment.hpp"
#include "shmcoll/shmcoll.hpp"

namespace shmcoll::shm {

// Describes a call signature mismatch for the error message: which field differs and how.
using MismatchDescriber = std::string (*)(std::uint32_t rank_a, const Signature& signature_a,
                                          std::uint32_t rank_b, const Signature& signature_b);

struct WaitPolicy {
  long spin_ns = 200'000;            // busy-wait this long, then
  long yield_ns = 0;                 // poll with sched_yield this long, then sleep on the futex
  long sleep_slice_ns = 10'000'000;  // longest single futex sleep: liveness is checked this often
  long timeout_ms = 0;               // 0: wait forever (peers are still watched)
  // A waiter that finds the rank it waits for on its own CPU moves to this CPU (of its affinity
  // mask, and no other rank's; -1 when the team's ranks outnumber their CPUs), else it sleeps
  // at once.
  int home_cpu = -1;
  // How a publisher and a sleeper make sure that one sees the other's write (the sleeper counts
  // itself, then reads the word; the publisher writes the word, then reads the count, and x86
  // may read before its write is visible): the publisher fences every publish, which stalls it
  // for the transfer of its line to its readers, or the sleeper, about to pay for a sleep anyway,
  // issues a global membarrier that fences every running publisher for it. Team-wide: every
  // member must use the same.
  enum class Handshake { publisher_fence, sleeper_membarrier };
  Handshake handshake = Handshake::publisher_fence;
};

// Run by a wait of this thread's that has spun its window and goes on yielding or sleeping
// (then every few yields, and at least every kIdleHookSliceNs of sleep): the MPI layer drives its
// MPI's progress here, so that a peer blocked in the MPI on this rank's help (a large send to a
// receive this rank posted) gets it while this rank waits in a collective for that peer. Null, the
// default: nothing runs.
using WaitIdleHook = void (*)();
void set_wait_idle_hook(WaitIdleHook hook);
// Runs this thread's hook, if it has one (also for waits outside Rounds: a nonblocking call's).
void run_wait_idle_hook();
bool has_wait_idle_hook();
inline constexpr long kIdleHookSliceNs = 1'000'000;

class Rounds;

// One piece written into `owner`'s memory, as Rounds::begin_write_into describes.
class WriteInto {
 public:
  WriteInto(Rounds& rounds, std::uint32_t owner);
  ~WriteInto();
  WriteInto(const WriteInto&) = delete;
  WriteInto& operator=(const WriteInto&) = delete;

 private:
  Rounds& rounds_;
};

class Rounds {
 public:
  Rounds(Segment segment, std::uint32_t rank, WaitPolicy policy);

  std::uint32_t rank() const { return rank_; }
  std::uint32_t size() const { return size_; }
  std::size_t slot_bytes() const { return segment_.layout().slot_bytes; }
  const Segment& segment() const { return segment_; }

  // A collective call starts: its rounds carry `signature` (unchecked: do not check this call).
  void begin_call(const Signature& signature) {
    previous_signature_ = signature_;
    previous_digest_ = digest(signature_);
    signature_ = signature;
    call_first_round_ = round_ + 1;
  }
  void set_mismatch_describer(MismatchDescriber describer) { describe_ = describer; }

  // The next round number; every rank calls it the same number of times. Fails once the team
  // is aborted, even when the round would need no wait.
  std::uint32_t begin() {
    if (segment_.header().abort_word.load(std::memory_order_relaxed) != 0) fail_aborted(rank_);
    return static_cast<std::uint32_t>(++round_);
  }
  // Fails once the team is aborted (after a call: a peer failed it, maybe after this rank was
  // done, and a buffer this rank read in place may have changed under the read).
  void check_not_aborted() const {
    if (segment_.header().abort_word.load(std::memory_order_acquire) != 0) fail_aborted(rank_);
  }
  std::byte* slot(std::uint32_t rank, std::uint32_t round) const {
    return segment_.slot(rank, round & 1);
  }
  // Before writing my slot for `round`: wait until nobody can still read round-2 from it.
  void wait_slot_free(std::uint32_t round) { wait_for_all(round - 1); }
  void publish(std::uint32_t round) { publish_message(round, nullptr, 0); }
  // A round of my current call is awaited on the peer's message line of that round (a line's
  // round only grows, in steps of kMessageLines, so it reaches `round` exactly when the peer has
  // published it), which brings the round's signature in the same transfer, and the signature
  // is compared every time. An earlier round (is my slot or line free?) is awaited on the round
  // word, whose value, the peer's latest round, usually answers the next few such waits too.
  void wait_for(std::uint32_t peer, std::uint32_t round) {
    const std::int64_t target = widen(round);
    if (signature_.checked() && target >= call_first_round_) {
      wait_message(peer, round);
      return;
    }
    if (known_[peer] >= target) return;
    const auto& word = segment_.control(peer).round;
    if (widen(word.load(std::memory_order_acquire)) < target) wait_for_round_word(peer, target);
    note_seen(peer, word.load(std::memory_order_acquire));
  }

  // Small payloads (<= kMessageBytes) travel in message lines instead of slots; the round rule
  // is the same over kMessageLines rounds (publish_message waits for the line to be free).
  // Readers call wait_message(peer, round) and read the returned bytes.
  void publish_message(std::uint32_t round, const void* data, std::size_t bytes);
  const std::byte* wait_message(std::uint32_t peer, std::uint32_t round) {
    const MessageLine& line = segment_.control(peer).messages[round % kMessageLines];
    const std::int64_t target = widen(round);
    prefetch_data_line(line);
    std::uint32_t seen = line.round.load(std::memory_order_acquire);
    if (widen(seen) < target) {
      wait_for_line(peer, target, line);
      seen = line.round.load(std::memory_order_acquire);
    }
    note_seen(peer, seen);
    // The signature is compared while the line cannot change: the peer rewrites it (for round
    // + kMessageLines) only after I publish round + 1, and a rank catching up on an old round
    // (publish_message's wait) may have. (seen > round: the line has been reused already.)
    if (seen == round && signature_.checked() && target >= call_first_round_ &&
        published_ <= target) {
      check_signature(peer, line);
    }
    return line.data;
  }
  void wait_for_all(std::uint32_t round) {
    for (std::uint32_t peer = 0; peer < size_; ++peer) {
      if (peer != rank_) wait_for(peer, round);
    }
  }

  // Calls completed by the last rank to arrive: every rank publishes its round, then arrives;
  // arrive() answers true to the last of the team's ranks to do so, and to nobody else. That rank
  // reads the others' rounds (all published) and posts the result with publish_result; the others
  // wait_result. Arrivals are counted team-wide, and each call's arrivals all come before any
  // of the next call's, because every rank waits for a call's result before arriving again.
  bool arrive(std::uint32_t round) {
    auto& header = segment_.header();
    const std::uint64_t before = header.arrivals.fetch_add(1, std::memory_order_acq_rel);
    if ((before + 1) % size_ != 0) return false;
    header.result.combiner.store(static_cast<std::uint64_t>(round) << 32 | rank_,
                                 std::memory_order_relaxed);
    return true;
  }
  // Where the last arriver builds the result (at most kMessageBytes), before publish_result.
  std::byte* result_data() const { return segment_.header().result.data; }
  void publish_result(std::uint32_t round);
  const std::byte* wait_result(std::uint32_t round) {
    const ResultLine& result = segment_.header().result;
    const std::int64_t target = widen(round);
    if (static_cast<std::int64_t>(result.round.load(std::memory_order_acquire)) < target) {
      wait_for_result(target);
    }
    return result.data;
  }

  // Direct reads: a rank that copied blocks straight out of other ranks' heaps in `round` says
  // so with release(round); their owners wait_released() before the memory may change. The
  // word is 64-bit: a peer's last release may be any number of rounds old.
  void release(std::uint32_t round);
  void wait_released(std::uint32_t peer, std::uint32_t round) {
    const std::int64_t target = widen(round);
    if (released_round(peer) < target) {
      wait_for_release(peer, target);
    }
  }

  // Writes into a peer's memory (its receive buffer, through its shared pages or the kernel's
  // copy) go in pieces, each between begin_write_into and end_write (or inside a WriteInto): a
  // piece begins only while the team is healthy (else begin_write_into fails with the abort),
  // and a member that leaves a call with an error first ends the team, then waits for the pieces
  // begun into its memory (wait_for_writers). So no write into a program's memory outlives the
  // call that allowed it, errors included: a piece never starts after its owner saw the abort,
  // and its owner returns only once every piece started before is done. Both sides are
  // sequentially consistent (writer: mark, then read the abort word; owner: abort, then read the
  // marks), so one of them sees the other.
  void begin_write_into(std::uint32_t owner);
  void end_write() const {
    segment_.control(rank_).writing_into.store(0, std::memory_order_release);
  }
  // Returns once no live peer is writing a piece into my memory. The team must be aborted
  // already, so no new piece can begin. A piece takes as long as its copy (kWritePieceBytes in
  // coll), or, from a peer stopped mid-piece (SIGSTOP), until it runs again or exits: its piece
  // would land later otherwise.
  void wait_for_writers() const;

  // Joins the team: publishes my pid and `profile_data` (at most kProfileBytes) in my profile
  // and, on rank 0, `team_data` (at most kTeamDataBytes) for the whole team; touches my pages
  // (place them first), waits until everyone has joined, starts watching peers.
  void join_team(std::span<const std::byte> profile_data = {},
                 std::span<const std::byte> team_data = {});
  // What `peer` published when it joined.
  const std::byte* profile_data(std::uint32_t peer) const { return segment_.profile(peer).data; }
  // What rank 0 published for the team when it joined.
  const std::byte* team_data() const { return segment_.header().team_data; }
  // Ends the team for everybody, naming `failed_rank` as the cause.
  void abort_team(std::uint32_t failed_rank) const { segment_.abort(failed_rank); }

  // How my waits have gone so far (Team::wait_counts).
  WaitCounts wait_counts() const { return counts_; }

  // Changes how waits spin and sleep (once the team knows whether its ranks share CPUs).
  void set_wait_policy(const WaitPolicy& policy) { policy_ = policy; }
  const WaitPolicy& wait_policy() const { return policy_; }

  // Tests only: teams made after this count their rounds from `round` (as after that many
  // rounds), so the 32-bit words wrap and stale 64-bit ones can be tried in a short test.
  static void start_rounds_at_for_testing(std::int64_t round);

 private:
  // A round as a peer publishes it (32 bits) in my 64-bit count: peers are never more than
  // kMessageLines rounds away from me, so the nearest value is the one.
  std::int64_t widen(std::uint32_t round) const {
    return round_ + static_cast<std::int32_t>(round - static_cast<std::uint32_t>(round_));
  }
  std::int64_t released_round(std::uint32_t peer) const {
    return static_cast<std::int64_t>(
        segment_.control(peer).released.load(std::memory_order_acquire));
  }
  // A message's bytes past its first 40 (what the flag's line holds after the round and
  // signatures) lie in the line pair's second cache line, which the peer writes before the flag in
  // the first: fetched only once the flag is seen, it costs a second transfer after the first (2
  // ranks, one call after a barrier, scatter of 48-96 B: 0.21 us where 8-40 B take 0.14). Asked for
  // with the flag, it comes in the same time.
  static void prefetch_data_line(const MessageLine& line) {
    __builtin_prefetch(reinterpret_cast<const std::byte*>(&line) + kLineBytes);
  }
  void note_seen(std::uint32_t peer, std::uint32_t round) {
    const std::int64_t seen = widen(round);
    if (seen > known_[peer]) known_[peer] = seen;
  }
  // `peer` is the rank being awaited, or my own rank when no wait was in progress.
  [[noreturn]] void fail_aborted(std::uint32_t peer) const;
  static std::uint32_t digest(const Signature& signature) {
    if (!signature.checked()) return 0;
    const std::uint64_t mixed = signature.call ^ (signature.count * 0x9e3779b97f4a7c15ull);
    return static_cast<std::uint32_t>(mixed ^ (mixed >> 32)) | 1u;
  }
  // Compares the signatures in `peer`'s line of a round of my current call with mine.
  void check_signature(std::uint32_t peer, const MessageLine& line) const {
    const Signature theirs{line.signature_call.load(std::memory_order_relaxed),
                           line.signature_count.load(std::memory_order_relaxed)};
    if (theirs.checked() && theirs != signature_) fail_mismatch(peer, signature_, theirs);
    const std::uint32_t their_previous = line.previous_digest.load(std::memory_order_relaxed);
    if (their_previous != previous_digest_ && their_previous != 0 && previous_digest_ != 0) {
      fail_previous_mismatch(peer);
    }
  }
  // The previous calls differ: names the peer's from its line of that call's last round when
  // the line still holds it.
  [[noreturn]] void fail_previous_mismatch(std::uint32_t peer) const;
  // Records the mismatch (unless another member recorded one first), aborts the team and fails.
  [[noreturn]] void fail_mismatch(std::uint32_t peer, const Signature& my_signature,
                                  const Signature& peer_signature) const;
  [[noreturn]] void fail_recorded_mismatch() const;
  // The slow paths of the waits above: each spins on what it awaits, then sleeps on a futex
  // word the peer writes after it, until `target` is reached.
  void wait_for_round_word(std::uint32_t peer, std::int64_t target);
  void wait_for_line(std::uint32_t peer, std::int64_t target, const MessageLine& line);
  void wait_for_release(std::uint32_t peer, std::int64_t target);
  void wait_for_result(std::int64_t target);
  // Spins until reached(), then sleeps on `futex_word` (which the peer writes after whatever
  // reached() reads) until reached(). `round` names the wait in errors.
  template <typename Reached>
  void wait_slow(std::uint32_t peer, std::int64_t round, Reached reached,
                 const std::atomic<std::uint32_t>& futex_word) {
    wait_slow([peer] { return peer; }, round, reached, futex_word, segment_.control(peer).sleepers);
  }
  // The same where the rank awaited changes as the wait goes on (awaited() names it; my own rank
  // when nobody is known) and sleepers count themselves in `sleepers`.
  template <typename Awaited, typename Reached>
  void wait_slow(Awaited awaited, std::int64_t round, Reached reached,
                 const std::atomic<std::uint32_t>& futex_word,
                 std::atomic<std::uint32_t>& sleepers);
  bool peer_has_exited(std::uint32_t peer) const {
    const RankProfile& profile = segment_.profile(peer);
    const pid_t pid = profile.pid.load(std::memory_order_acquire);
    // Not joined yet: the supervisor or a timeout must judge.
    return pid > 0 && process_has_exited(pid, profile.start_ticks.load(std::memory_order_relaxed));
  }
  // Whether `peer` last said it runs on `my_cpu`; moving off it to my home CPU (when the policy
  // gives one and I am elsewhere), noting where I now run.
  bool shares_cpu_with(std::uint32_t peer, int my_cpu) const;
  bool move_off(int& my_cpu);
  // Publishes where I run (written only when it changed: peers read the line).
  void note_my_cpu(int cpu) const;
  // After a store that a sleeper may wait for: wakes the word's sleepers, if any (the publisher's
  // side of the handshake).
  void wake_sleepers(const std::atomic<std::uint32_t>& futex_word) const;

  Segment segment_;
  std::uint32_t rank_;
  std::uint32_t size_;
  std::int64_t round_;
  std::int64_t published_;  // the last round I published
  Signature signature_;
  Signature previous_signature_;
  std::uint32_t previous_digest_ = 0;  // what each round's line carries, worked out once per call
  std::int64_t call_first_round_;
  MismatchDescriber describe_ = nullptr;
  WaitPolicy policy_;
  WaitCounts counts_;
  // Highest round seen per peer: a round a peer is known to have reached needs no shared read.
  std::vector<std::int64_t> known_;
  // The team's other members, whom this process's memfd server answers (descriptor_passing.hpp)
  // once all have joined.
  AllowedPeers allowed_peers_;
};

inline WriteInto::WriteInto(Rounds& rounds, std::uint32_t owner) : rounds_(rounds) {
  rounds_.begin_write_into(owner);
}
inline WriteInto::~WriteInto() {
  rounds_.end_write();
}

}  // namespace shmcoll::shm
