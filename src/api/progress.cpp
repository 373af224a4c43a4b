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

void PendingCall::wait_for_worker() {
  std::unique_lock lock(mutex);
  const auto is_done = [this] { return done.load(std::memory_order_acquire); };
  if (shm::has_wait_idle_hook()) {
    // The thread's hook (an MPI's progress) runs while the worker has the call, as in a wait of
    // the call's own.
    while (!finished.wait_for(lock, std::chrono::nanoseconds(shm::kIdleHookSliceNs), is_done)) {
      lock.unlock();
      shm::run_wait_idle_hook();
      lock.lock();
    }
  } else {
    finished.wait(lock, is_done);
  }
  if (error) std::rethrow_exception(error);
}

void PendingCall::wait() {
  if (!done.load(std::memory_order_acquire) && worker) worker->run_if_next(this);
  wait_for_worker();
}

std::shared_ptr<PendingCall> ProgressWorker::start(std::function<void()> call) {
  auto pending = std::make_shared<PendingCall>();
  pending->worker = this;
  {
    const std::lock_guard lock(mutex_);
    queue_.emplace_back(std::move(call), pending);
    ++outstanding_;
  }
  work_.notify_one();
  return pending;
}

namespace {

// Set while this thread runs a queued call: that call's own run_call must not wait for the queue,
// which still counts it.
thread_local bool running_a_queued_call = false;

}  // namespace

void ProgressWorker::drain() {
  if (running_a_queued_call) return;
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return outstanding_ == 0; });
}

void ProgressWorker::run_if_next(PendingCall* call) {
  std::pair<std::function<void()>, std::shared_ptr<PendingCall>> next;
  {
    const std::lock_guard lock(mutex_);
    if (running_ || queue_.empty() || queue_.front().second.get() != call) return;
    next = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
  }
  run_one(std::move(next));
}

void ProgressWorker::run_one(std::pair<std::function<void()>, std::shared_ptr<PendingCall>> next) {
  std::exception_ptr failure;
  running_a_queued_call = true;
  try {
    next.first();
  } catch (...) {
    failure = std::current_exception();
  }
  running_a_queued_call = false;
  next.second->complete(std::move(failure));
  {
    const std::lock_guard lock(mutex_);
    running_ = false;
    --outstanding_;
  }
  // The worker may have waited for this call to end before taking the next.
  work_.notify_one();
  idle_.notify_all();
}

void ProgressWorker::run() {
  // The lowest priority (on Linux a thread's own): where it shares a core with the program's
  // thread, it takes the core when that thread waits or blocks, and seldom preempts it (which
  // would cost a call that the waiting thread runs itself two context switches), yet still gets
  // a share, so a call progresses while the program spins on something else.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  for (;;) {
    std::pair<std::function<void()>, std::shared_ptr<PendingCall>> next;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [this] { return !running_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      next = std::move(queue_.front());
      queue_.pop_front();
      running_ = true;
    }
    run_one(std::move(next));
  }
}

}  // namespace shmcoll::detail
