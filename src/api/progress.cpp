#include "api/progress.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm/rounds.hpp"

namespace shmcoll::detail {

ProgressWorker::~ProgressWorker() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

namespace {

// Waits on `condition` until `ready`. Where the thread has an idle hook (an MPI's progress), it
// runs every slice of the wait, as in a wait of shm::Rounds: the call waited for may need a peer
// that waits on this rank's MPI.
template <typename Ready>
void wait_with_idle_hook(std::condition_variable& condition, std::unique_lock<std::mutex>& lock,
                         Ready ready) {
  if (!shm::has_wait_idle_hook()) return condition.wait(lock, ready);
  while (!condition.wait_for(lock, std::chrono::nanoseconds(shm::kIdleHookSliceNs), ready)) {
    lock.unlock();
    shm::run_wait_idle_hook();
    lock.lock();
  }
}

}  // namespace

void PendingCall::wait_for_worker() {
  if (!done.load(std::memory_order_acquire)) {
    std::unique_lock lock(mutex);
    waiting.store(true, std::memory_order_seq_cst);
    wait_with_idle_hook(finished, lock, [this] { return done.load(std::memory_order_seq_cst); });
  }
  if (error) std::rethrow_exception(error);
}

bool PendingCall::wait_done_for(std::chrono::nanoseconds timeout) {
  if (done.load(std::memory_order_acquire)) return true;
  std::unique_lock lock(mutex);
  waiting.store(true, std::memory_order_seq_cst);
  return finished.wait_for(lock, timeout, [this] { return done.load(std::memory_order_seq_cst); });
}

void PendingCall::wait() {
  if (!done.load(std::memory_order_acquire) && worker) worker->run_if_next(this);
  wait_for_worker();
}

std::shared_ptr<PendingCall> ProgressWorker::start(std::function<void()> call) {
  auto pending = std::make_shared<PendingCall>();
  pending->worker = this;
  if (grace_.count() > 0) pending->issued = std::chrono::steady_clock::now();
  bool wake = false;
  {
    const std::lock_guard lock(mutex_);
    queue_.emplace_back(std::move(call), pending);
    ++outstanding_;
    wake = worker_waits_;
  }
  if (wake) work_.notify_one();
  return pending;
}

namespace {

// Set while this thread runs a queued call: that call's own run_call must not wait for the queue,
// which still counts it.
thread_local bool running_a_queued_call = false;

}  // namespace

void ProgressWorker::drain() {
  if (running_a_queued_call) return;
  for (;;) {
    std::unique_lock lock(mutex_);
    if (outstanding_ == 0) return;
    // The calls still queued run here, in order, as the caller's wait for them (the worker may
    // share this thread's CPU at the lowest priority).
    if (!running_ && !queue_.empty()) {
      Queued next = take_next();
      lock.unlock();
      run_one(std::move(next));
      continue;
    }
    ++drainers_;
    wait_with_idle_hook(idle_, lock,
                        [this] { return outstanding_ == 0 || (!running_ && !queue_.empty()); });
    --drainers_;
  }
}

ProgressWorker::Queued ProgressWorker::take_next() {
  Queued next = std::move(queue_.front());
  queue_.pop_front();
  running_ = true;
  return next;
}

void ProgressWorker::run_if_next(PendingCall* call) {
  Queued next;
  {
    const std::lock_guard lock(mutex_);
    if (running_ || queue_.empty() || queue_.front().second.get() != call) return;
    next = take_next();
  }
  run_one(std::move(next));
}

void ProgressWorker::run_one(Queued next) {
  std::exception_ptr failure;
  running_a_queued_call = true;
  try {
    next.first();
  } catch (...) {
    failure = std::current_exception();
  }
  running_a_queued_call = false;
  next.second->complete(std::move(failure));
  bool wake_worker = false, wake_drainers = false;
  {
    const std::lock_guard lock(mutex_);
    running_ = false;
    --outstanding_;
    // The worker may have waited for this call to end before taking the next.
    wake_worker = worker_waits_ && !queue_.empty();
    wake_drainers = drainers_ > 0;
  }
  if (wake_worker) work_.notify_one();
  if (wake_drainers) idle_.notify_all();
}

void ProgressWorker::run() {
  // The lowest priority (on Linux a thread's own): where it shares a core with the program's
  // thread, it takes the core when that thread waits or blocks, and seldom preempts it (which
  // would cost a call that the waiting thread runs itself two context switches), yet still gets
  // a share, so a call progresses while the program spins on something else.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  for (;;) {
    Queued next;
    {
      std::unique_lock lock(mutex_);
      worker_waits_ = true;
      for (;;) {
        work_.wait(lock, [this] { return !running_ && (stopping_ || !queue_.empty()); });
        if (stopping_ || grace_.count() == 0) break;
        const auto due = queue_.front().second->issued + grace_;
        if (std::chrono::steady_clock::now() >= due) break;
        work_.wait_until(lock, due);  // a thread that waits for the call may take it meanwhile
      }
      worker_waits_ = false;
      if (queue_.empty()) return;  // stopping, and nothing left to run
      next = take_next();
    }
    run_one(std::move(next));
  }
}

}  // namespace shmcoll::detail
