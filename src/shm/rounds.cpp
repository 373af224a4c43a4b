#include "shm/rounds.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "shm/futex.hpp"
#include "util/fail.hpp"

namespace shmcoll::shm {

namespace {

thread_local WaitIdleHook wait_idle_hook = nullptr;

// Registered as the library loads, while the process most likely has one thread: in a process
// with threads the kernel waits for an RCU grace period, 15-23 ms here (every MPI process has
// helper threads by the time the MPI layer makes its first team; measured 20 of the first
// team's 21 ms).
[[maybe_unused]] const bool membarrier_registered_at_load = register_for_global_membarrier();

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Moves the calling thread to `cpu` (the kernel migrates it before the call returns), then gives
// it its affinity mask back, so it keeps whatever binding it had and the scheduler may move it
// again. False when `cpu` is not in the mask.
bool move_to_cpu(int cpu) {
  cpu_set_t mask, target;
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof mask, &mask) != 0) return false;
  if (!CPU_ISSET(cpu, &mask)) return false;
  CPU_ZERO(&target);
  CPU_SET(cpu, &target);
  if (sched_setaffinity(0, sizeof target, &target) != 0) return false;
  sched_setaffinity(0, sizeof mask, &mask);
  return true;
}

}  // namespace

namespace {

std::int64_t first_round = 0;  // start_rounds_at_for_testing

}  // namespace

void Rounds::start_rounds_at_for_testing(std::int64_t round) {
  first_round = round;
}

Rounds::Rounds(Segment segment, std::uint32_t rank, WaitPolicy policy)
    : segment_(std::move(segment)),
      rank_(rank),
      size_(segment_.layout().team_size),
      round_(first_round),
      published_(first_round),
      call_first_round_(first_round + 1),
      policy_(policy),
      known_(size_, first_round) {}

void Rounds::join_team(std::span<const std::byte> profile_data,
                       std::span<const std::byte> team_data) {
  if (profile_data.size() > kProfileBytes || team_data.size() > kTeamDataBytes) {
    fail(Errc::invalid_argument, "rank ", rank_, ": a profile of ", profile_data.size(),
         " bytes or team data of ", team_data.size(), " bytes does not fit (", kProfileBytes,
         " and ", kTeamDataBytes, " bytes)");
  }
  // Published before `joined`, whose release store makes it visible to everyone who waits.
  if (rank_ == 0) std::memcpy(segment_.header().team_data, team_data.data(), team_data.size());
  RankProfile& mine = segment_.profile(rank_);
  mine.pid.store(static_cast<std::int32_t>(getpid()), std::memory_order_relaxed);
  mine.start_ticks.store(own_start_ticks(), std::memory_order_relaxed);
  std::memcpy(mine.data, profile_data.data(), profile_data.size());
  try {
    segment_.prefault_own_pages(rank_);
  } catch (...) {
    // The others wait for me to join: they must fail too (at once, naming me), not hang.
    segment_.abort(rank_);
    throw;
  }
  RankControl& control = segment_.control(rank_);
  control.round.store(static_cast<std::uint32_t>(round_), std::memory_order_relaxed);
  // Where I run from the start: ranks forked together often start on one CPU, and a peer can
  // only tell (and move) from what this says.
  control.cpu.store(sched_getcpu(), std::memory_order_relaxed);
  for (MessageLine& line : control.messages) {
    line.round.store(static_cast<std::uint32_t>(round_), std::memory_order_relaxed);
  }
  // A team that ended before I joined fails here. Once I have joined, the others may run ahead
  // and end it at once (a mismatched first call, say): that is for my first collective to report.
  if (segment_.header().abort_word.load(std::memory_order_acquire) != 0) fail_aborted(rank_);
  mine.joined.store(1, std::memory_order_release);
  wake_sleepers(mine.joined);
  for (std::uint32_t peer = 0; peer < size_; ++peer) {
    const auto& joined = segment_.profile(peer).joined;
    auto has_joined = [&] { return joined.load(std::memory_order_acquire) != 0; };
    if (peer != rank_) wait_slow(peer, 0, has_joined, joined);
  }
  std::vector<std::int32_t> peers;
  for (std::uint32_t peer = 0; peer < size_; ++peer) {
    if (peer != rank_) peers.push_back(segment_.profile(peer).pid.load(std::memory_order_relaxed));
  }
  allowed_peers_ = AllowedPeers(std::move(peers));
}

void Rounds::wake_sleepers(const std::atomic<std::uint32_t>& futex_word) const {
  // Closes the lost wake-up window (WaitPolicy::Handshake): without a fence, here or the
  // sleeper's membarrier, x86 may read `sleepers` before our store to the word is visible, so
  // each side would miss the other's write and the sleeper would sleep a whole slice.
  if (policy_.handshake == WaitPolicy::Handshake::publisher_fence) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (segment_.control(rank_).sleepers.load(std::memory_order_relaxed) == 0) return;
  futex_wake_all(futex_word);
  // Where I run, for the rank I may just have woken (beside a system call, this costs nothing):
  // a rank that never waits long itself would otherwise never say, and a sleeper woken onto my
  // CPU could not tell that we share it.
  note_my_cpu(sched_getcpu());
}

void Rounds::note_my_cpu(int cpu) const {
  auto& word = segment_.control(rank_).cpu;
  if (word.load(std::memory_order_relaxed) != cpu) word.store(cpu, std::memory_order_relaxed);
}

void Rounds::publish_message(std::uint32_t round, const void* data, std::size_t bytes) {
  if (bytes > kMessageBytes) {
    fail(Errc::invalid_argument, "rank ", rank_, ": a message of ", bytes,
         " bytes does not fit a message line (", kMessageBytes, " bytes)");
  }
  wait_for_all(round - (kMessageLines - 1));  // the line last carried round - kMessageLines
  MessageLine& line = segment_.control(rank_).messages[round % kMessageLines];
  if (bytes > 0) std::memcpy(line.data, data, bytes);
  line.signature_call.store(signature_.call, std::memory_order_relaxed);
  line.signature_count.store(signature_.count, std::memory_order_relaxed);
  line.previous_digest.store(previous_digest_, std::memory_order_relaxed);
  line.round.store(round, std::memory_order_release);
  // The round word is what sleepers wait on.
  auto& word = segment_.control(rank_).round;
  word.store(round, std::memory_order_release);
  published_ = widen(round);
  wake_sleepers(word);
}

void Rounds::publish_result(std::uint32_t round) {
  ResultLine& result = segment_.header().result;
  result.round.store(static_cast<std::uint64_t>(widen(round)), std::memory_order_release);
  if (policy_.handshake == WaitPolicy::Handshake::publisher_fence) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  if (result.sleepers.load(std::memory_order_relaxed) != 0) {
    futex_wake_all(futex_word_of(result.round));
  }
}

void Rounds::release(std::uint32_t round) {
  auto& word = segment_.control(rank_).released;
  word.store(static_cast<std::uint64_t>(widen(round)), std::memory_order_release);
  wake_sleepers(futex_word_of(word));
}

void Rounds::fail_previous_mismatch(std::uint32_t peer) const {
  const auto before = static_cast<std::uint32_t>(call_first_round_ - 1);
  const MessageLine& line = segment_.control(peer).messages[before % kMessageLines];
  const bool on_record = line.round.load(std::memory_order_acquire) == before;
  const Signature theirs = on_record
                               ? Signature{line.signature_call.load(std::memory_order_relaxed),
                                           line.signature_count.load(std::memory_order_relaxed)}
                               : Signature{};
  fail_mismatch(peer, previous_signature_, theirs);
}

void Rounds::fail_mismatch(std::uint32_t peer, const Signature& my_signature,
                           const Signature& peer_signature) const {
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

void Rounds::begin_write_into(std::uint32_t owner) {
  auto& mark = segment_.control(rank_).writing_into;
  mark.store(owner + 1, std::memory_order_seq_cst);
  if (segment_.header().abort_word.load(std::memory_order_seq_cst) != 0) {
    mark.store(0, std::memory_order_release);
    fail_aborted(rank_);
  }
}

void Rounds::wait_for_writers() const {
  for (std::uint32_t peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const auto& mark = segment_.control(peer).writing_into;
    // Checked for liveness every 64 looks (a few milliseconds); a piece is a copy's length.
    for (unsigned looks = 1; mark.load(std::memory_order_seq_cst) == rank_ + 1; ++looks) {
      if (looks % 64 == 0 && peer_has_exited(peer)) break;
      const timespec pause{0, 50'000};
      nanosleep(&pause, nullptr);
    }
  }
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

void Rounds::wait_for_round_word(std::uint32_t peer, std::int64_t target) {
  const auto& word = segment_.control(peer).round;
  auto reached = [&] { return widen(word.load(std::memory_order_acquire)) >= target; };
  wait_slow(peer, target, reached, word);
}

void Rounds::wait_for_line(std::uint32_t peer, std::int64_t target, const MessageLine& line) {
  // Spins on the line itself (flag, signature and data in one transfer); sleeps on the round
  // word, which the peer publishes after the line.
  // The data line is asked for again at each look: the peer rewrites it just before the flag.
  auto reached = [&] {
    prefetch_data_line(line);
    return widen(line.round.load(std::memory_order_acquire)) >= target;
  };
  wait_slow(peer, target, reached, segment_.control(peer).round);
}

void Rounds::wait_for_release(std::uint32_t peer, std::int64_t target) {
  const auto& word = segment_.control(peer).released;
  auto reached = [&] { return released_round(peer) >= target; };
  wait_slow(peer, target, reached, futex_word_of(word));
}

void Rounds::wait_for_result(std::int64_t target) {
  ResultLine& result = segment_.header().result;
  auto reached = [&] {
    return static_cast<std::int64_t>(result.round.load(std::memory_order_acquire)) >= target;
  };
  // The rank the result waits for: the first that has not published the round, else the one
  // computing the result. Only the last to arrive reads every line, so a wait this long also
  // checks the calls of the ranks that published (a rank in another collective never arrives).
  // When all published and nobody computes, one of them died between publishing and arriving.
  const auto round = static_cast<std::uint32_t>(target);
  std::uint32_t not_arrived = 0;
  auto awaited = [&]() -> std::uint32_t {
    for (; not_arrived < size_; ++not_arrived) {
      if (not_arrived == rank_) continue;
      const MessageLine& line = segment_.control(not_arrived).messages[round % kMessageLines];
      if (widen(line.round.load(std::memory_order_acquire)) < target) return not_arrived;
      wait_message(not_arrived, round);  // published: returns at once, comparing signatures
    }
    const std::uint64_t combiner = result.combiner.load(std::memory_order_relaxed);
    if (static_cast<std::uint32_t>(combiner >> 32) == round) {
      return static_cast<std::uint32_t>(combiner);
    }
    for (std::uint32_t peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && peer_has_exited(peer)) return peer;
    }
    return rank_;
  };
  wait_slow(awaited, target, reached, futex_word_of(result.round), result.sleepers);
}

bool Rounds::shares_cpu_with(std::uint32_t peer, int my_cpu) const {
  return peer != rank_ && segment_.control(peer).cpu.load(std::memory_order_relaxed) == my_cpu;
}

bool Rounds::move_off(int& my_cpu) {
  if (policy_.home_cpu < 0 || my_cpu == policy_.home_cpu || !move_to_cpu(policy_.home_cpu)) {
    return false;
  }
  my_cpu = sched_getcpu();
  note_my_cpu(my_cpu);
  return true;
}

void set_wait_idle_hook(WaitIdleHook hook) {
  wait_idle_hook = hook;
}

void run_wait_idle_hook() {
  if (wait_idle_hook) wait_idle_hook();
}

bool has_wait_idle_hook() {
  return wait_idle_hook != nullptr;
}

template <typename Awaited, typename Reached>
void Rounds::wait_slow(Awaited awaited, std::int64_t round, Reached reached,
                       const std::atomic<std::uint32_t>& futex_word,
                       std::atomic<std::uint32_t>& sleepers) {
  auto& header = segment_.header();
  // The team may end just after what I wait for arrived: peers that ran ahead while I was
  // preempted between reading `reached` and the abort word, found a mismatch and ended it. The
  // wait is over then, and my next round reports the abort: failing here would fail a team's
  // join, outside the first call that the program guards.
  auto aborted_before_reached = [&] {
    return header.abort_word.load(std::memory_order_acquire) != 0 && !reached();
  };
  const long long start = now_ns();
  int my_cpu = -1;
  bool peer_said_my_cpu = false;
  // The clock is read every few pauses: a pause takes 10-140 cycles depending on the CPU, so
  // reading it rarely would stretch a short spin many times over.
  for (unsigned spins = 1;; ++spins) {
    if (reached()) return;
    if (aborted_before_reached()) fail_aborted(awaited());
    cpu_relax();
    if (spins % 16 != 0) continue;
    if (spins == 16) {
      // A wait this long (a short one pays nothing): say where I run, for peers that wait for
      // me. A peer that last said it runs on my CPU cannot run while I spin here: unbound ranks
      // the scheduler put together. Go home and spin on (each rank's home is its own, so a move
      // never lands on a peer, even when what it said is out of date), or, already home or when
      // the ranks outnumber their CPUs, give the CPU up at once, by yielding.
      my_cpu = sched_getcpu();
      note_my_cpu(my_cpu);
      if (shares_cpu_with(awaited(), my_cpu) && !move_off(my_cpu)) {
        peer_said_my_cpu = true;
        break;
      }
    }
    if (now_ns() - start >= policy_.spin_ns) break;
  }
  // Where ranks share CPUs, the rank I wait for is most likely waiting for a CPU, not running:
  // yielding hands mine to whoever can run (0.6 us on this VM when nobody else can, 1.8 us to
  // switch), where a futex sleep would make every publish a wake-up system call and every wake a
  // trip through the scheduler's wake-up path. Sleep only when the wait turns out long.
  // A peer that said it runs on my CPU gets it by my yields for the rest of the spin window: if
  // what it said is out of date (it moved since), a yield costs a fraction of a microsecond and
  // the wait goes on polling, where a sleep would cost both sides a system call and a wake-up.
  const long yield_ns =
      peer_said_my_cpu
          ? std::max(policy_.yield_ns, policy_.spin_ns - static_cast<long>(now_ns() - start))
          : policy_.yield_ns;
  run_wait_idle_hook();
  if (yield_ns > 0) {
    const long long yield_start = now_ns();
    for (unsigned yields = 1;; ++yields) {
      if (reached()) return;
      if (aborted_before_reached()) fail_aborted(awaited());
      sched_yield();
      ++counts_.yields;
      if (yields % 8 == 0) {
        run_wait_idle_hook();
        if (now_ns() - yield_start >= yield_ns) break;
      }
    }
  }
  const long sleep_slice_ns =
      wait_idle_hook ? std::min(policy_.sleep_slice_ns, kIdleHookSliceNs) : policy_.sleep_slice_ns;

  for (;;) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (policy_.handshake == WaitPolicy::Handshake::sleeper_membarrier) global_membarrier();
    const std::uint32_t before = futex_word.load(std::memory_order_seq_cst);
    if (!reached() && header.abort_word.load() == 0) {
      ++counts_.futex_sleeps;
      futex_wait(futex_word, before, sleep_slice_ns);
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
    // Linux's wake-up placement favours the waker's CPU, which is the peer I waited for: left
    // there, we would share it and sleep on every call, which keeps us together.
    my_cpu = sched_getcpu();
    const std::uint32_t peer = awaited();
    if (shares_cpu_with(peer, my_cpu)) move_off(my_cpu);
    if (reached()) return;
    run_wait_idle_hook();
    if (aborted_before_reached()) fail_aborted(awaited());
    if (peer != rank_ && peer_has_exited(peer)) {
      if (reached()) return;  // it published before leaving
      // ... or ended the team before leaving (a mismatch it found, say), after the abort check
      // above: its reason is the one to report.
      if (header.abort_word.load(std::memory_order_acquire) != 0) fail_aborted(peer);
      segment_.abort(peer);
      fail(Errc::peer_failed, "rank ", rank_, ": rank ", peer, " (pid ",
           segment_.profile(peer).pid.load(), ") exited while this rank waited for its round ",
           round);
    }
    if (policy_.timeout_ms > 0 && now_ns() - start > policy_.timeout_ms * 1'000'000LL) {
      segment_.abort(peer);  // a peer this late counts as failed: nobody else waits for it either
      fail(Errc::timeout, "rank ", rank_, ": waited more than ", policy_.timeout_ms,
           " ms for rank ", peer, " to reach round ", round);
    }
  }
}

}  // namespace shmcoll::shm
