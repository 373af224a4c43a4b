// Nonblocking calls (Team::iallreduce and the others): a worker thread per team runs them in the
// order they were issued, while the program goes on; a blocking call on the team first waits
// until the worker has finished everything issued before it (run_call), so every rank still runs
// the team's calls in one order.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

namespace shmcoll::detail {

class ProgressWorker;

// One issued call: done (with the error it failed with, if any) once it has run, on the worker's
// thread or on the thread that waits for it (ProgressWorker::run_if_next).
struct PendingCall {
  // Marks the call done; wakes a thread blocked in wait_for_worker, if there is one (a call the
  // waiting thread ran itself costs no wake-up).
  void complete(std::exception_ptr failure) {
    error = std::move(failure);
    done.store(true, std::memory_order_seq_cst);
    if (waiting.load(std::memory_order_seq_cst)) {
      const std::lock_guard lock(mutex);
      finished.notify_all();
    }
  }
  void wait();
  void wait_for_worker();
  // Whether the call completed within `timeout` (never runs it on this thread).
  bool wait_done_for(std::chrono::nanoseconds timeout);
  std::atomic<bool> done{false};
  std::chrono::steady_clock::time_point issued;  // when start() queued it
  std::exception_ptr error;                      // written before `done`, read after it
  ProgressWorker* worker = nullptr;  // the team's, whose queue holds the call until it runs
  // A thread blocks on `finished` (set before it reads `done`, which complete sets before reading
  // this: one of the two sees the other).
  std::atomic<bool> waiting{false};
  std::mutex mutex;
  std::condition_variable finished;
};

// Where a team's ranks share CPUs, the worker shares one with the program's thread: handing it a
// call costs context switches each way (a nonblocking call across two pretend nodes of one CPU,
// issued and waited for at once: 75-125 us against 23-29 us run by the waiting thread itself).
// There the worker leaves a call this long to a thread that waits for it, and takes it after.
inline constexpr std::chrono::microseconds kWorkerGraceWhereCpusShared{100};

class ProgressWorker {
 public:
  // `grace`: how long a queued call is left to a waiting thread before the worker takes it.
  explicit ProgressWorker(std::chrono::microseconds grace = {})
      : grace_(grace), thread_([this] { run(); }) {}
  // Runs what was issued, then ends the thread.
  ~ProgressWorker();
  ProgressWorker(const ProgressWorker&) = delete;
  ProgressWorker& operator=(const ProgressWorker&) = delete;

  std::shared_ptr<PendingCall> start(std::function<void()> call);
  // Returns once every call issued so far has completed, running those still queued on this
  // thread (at once inside a queued call).
  void drain();
  // Runs `call` on this thread when it is next in line and the worker has not started it (a wait
  // right after the issue then costs what the blocking call does, not a hand-off between
  // threads); else leaves it to the worker.
  void run_if_next(PendingCall* call);

 private:
  using Queued = std::pair<std::function<void()>, std::shared_ptr<PendingCall>>;
  void run();
  // The call at the queue's front, taken off it and marked running (under mutex_).
  Queued take_next();
  // Runs one call taken off the queue and marks it complete.
  void run_one(Queued next);
  std::mutex mutex_;
  std::condition_variable work_, idle_;
  std::deque<Queued> queue_;
  int outstanding_ = 0;   // issued, not yet completed
  bool running_ = false;  // a call taken off the queue is running (on either thread)
  bool stopping_ = false;
  // Who waits on the condition variables, so that nobody signals one nobody waits on (a loop of
  // issue-and-wait then makes no system call at all).
  bool worker_waits_ = false;
  int drainers_ = 0;
  const std::chrono::microseconds grace_;
  std::thread thread_;
};

}  // namespace shmcoll::detail
