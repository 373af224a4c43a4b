// The public Team: argument checks (before any data moves), then the collective algorithm.
#include "api/checks.hpp"

namespace shmcoll {

using namespace detail;

Team::Team(std::unique_ptr<detail::TeamState> state) : state_(std::move(state)) {}
Team::Team(Team&&) noexcept = default;
Team& Team::operator=(Team&&) noexcept = default;
Team::~Team() {
  // The calls still queued run first, on a team whose every part is still whole: they may name
  // this Team (the MPI layer's nonblocking calls do, past their communicator's free).
  if (state_) state_->worker.reset();
}

int Team::rank() const noexcept {
  return state_ ? static_cast<int>(state_->rounds.rank()) : -1;
}
int Team::size() const noexcept {
  return state_ ? static_cast<int>(state_->rounds.size()) : -1;
}
std::size_t Team::segment_bytes() const noexcept {
  return state_ ? state_->rounds.segment().layout().total_bytes : 0;
}
bool Team::ended() const noexcept {
  return !state_ || state_->rounds.segment().aborted_by() >= 0;
}
WaitCounts Team::wait_counts() const noexcept {
  return state_ ? state_->rounds.wait_counts() : WaitCounts{};
}

void Team::check_spans(std::size_t send_size, std::size_t recv_size) {
  if (send_size != recv_size) {
    fail(Errc::invalid_argument, "allreduce: send span has ", send_size,
         " elements but recv span has ", recv_size);
  }
}

void* Team::allocate_bytes(std::size_t bytes, std::size_t alignment) {
  const Call call{"allocate", state_};
  return state_->heap.allocate(bytes, alignment);
}

void* Team::allocate_array(std::size_t count, std::size_t element_bytes, std::size_t alignment) {
  const Call call{"allocate", state_};
  if (element_bytes != 0 && count > SIZE_MAX / element_bytes) {
    reject(call, "count ", count, " of ", element_bytes, "-byte elements overflows a size");
  }
  return state_->heap.allocate(count * element_bytes, alignment);
}

void Team::deallocate_bytes(void* memory) {
  const Call call{"deallocate", state_};
  state_->heap.deallocate(memory);
}

namespace {

// The checked call as a closure over values: the blocking form runs it at once, the nonblocking
// form hands it to the team's worker (src/api/progress.hpp).
auto barrier_call(const char* name, const std::unique_ptr<TeamState>& state) {
  const Call call{name, state};
  TeamState* team = state.get();
  return
      [team] { run_call(*team, {Collective::barrier}, [team] { coll::barrier(team->context); }); };
}

auto bcast_call(const char* name, const std::unique_ptr<TeamState>& state, void* buffer,
                std::int64_t count, Dtype dtype, int root) {
  const Call call{name, state};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_root(call, root);
  check_buffer(call, "buffer", buffer, bytes);
  TeamState* team = state.get();
  return [team, buffer, bytes, root] { run_contiguous_bcast(*team, buffer, bytes, root); };
}

auto reduce_call(const char* name, const std::unique_ptr<TeamState>& state, const void* sendbuf,
                 void* recvbuf, std::int64_t count, Dtype dtype, const Op& op, int root) {
  const Call call{name, state};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_op(call, op, dtype);
  check_root(call, root);
  const bool at_root = static_cast<int>(state->rounds.rank()) == root;
  if (sendbuf == in_place) {
    if (!at_root) reject(call, "sendbuf is in_place, which only the root (", root, ") may pass");
    sendbuf = recvbuf;
    check_buffer(call, "recvbuf", recvbuf, bytes);
  } else {
    check_buffer(call, "sendbuf", sendbuf, bytes);
    if (at_root) {
      check_buffer(call, "recvbuf", recvbuf, bytes);
      check_no_overlap(call, sendbuf, recvbuf, bytes);
    }
  }
  TeamState* team = state.get();
  return [team, sendbuf, recvbuf, count, dtype, op, root] {
    run_call(*team,
             {Collective::reduce, root, op.kind(), static_cast<int>(dtype),
              static_cast<std::uint64_t>(count)},
             [&] {
               coll::reduce(team->context, sendbuf, recvbuf, static_cast<std::size_t>(count), dtype,
                            op, root);
             });
  };
}

auto allreduce_call(const char* name, const std::unique_ptr<TeamState>& state, const void* sendbuf,
                    void* recvbuf, std::int64_t count, Dtype dtype, const Op& op) {
  const Call call{name, state};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_op(call, op, dtype);
  sendbuf = input_buffer(call, sendbuf, recvbuf, bytes);
  TeamState* team = state.get();
  return [team, sendbuf, recvbuf, count, dtype, op] {
    run_call(*team,
             {Collective::allreduce,
              {},
              op.kind(),
              static_cast<int>(dtype),
              static_cast<std::uint64_t>(count)},
             [&] {
               coll::allreduce(team->context, sendbuf, recvbuf, static_cast<std::size_t>(count),
                               dtype, op);
             });
  };
}

}  // namespace

void Team::barrier() {
  barrier_call("barrier", state_)();
}

void Team::bcast(void* buffer, std::int64_t count, Dtype dtype, int root) {
  bcast_call("bcast", state_, buffer, count, dtype, root)();
}

void Team::reduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op,
                  int root) {
  reduce_call("reduce", state_, sendbuf, recvbuf, count, dtype, op, root)();
}

void Team::allreduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                     const Op& op) {
  allreduce_call("allreduce", state_, sendbuf, recvbuf, count, dtype, op)();
}

Request Team::ibarrier() {
  return issue(barrier_call("ibarrier", state_));
}

Request Team::ibcast(void* buffer, std::int64_t count, Dtype dtype, int root) {
  return issue(bcast_call("ibcast", state_, buffer, count, dtype, root));
}

Request Team::ireduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                      const Op& op, int root) {
  return issue(reduce_call("ireduce", state_, sendbuf, recvbuf, count, dtype, op, root));
}

Request Team::iallreduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                         const Op& op) {
  return issue(allreduce_call("iallreduce", state_, sendbuf, recvbuf, count, dtype, op));
}

Request Team::run_nonblocking(std::function<void()> calls) {
  const Call call{"run_nonblocking", state_};
  if (!calls) reject(call, "calls is empty");
  return issue(std::move(calls));
}

Request Team::issue(std::function<void()> call) {
  if (!state_->worker) {
    state_->worker = std::make_unique<ProgressWorker>(
        state_->ranks_share_cpus ? kWorkerGraceWhereCpusShared : std::chrono::microseconds{});
  }
  return Request(state_->worker->start(std::move(call)));
}

Request::Request(std::shared_ptr<detail::PendingCall> call) : call_(std::move(call)) {}
Request::Request(Request&&) noexcept = default;
Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    const Request replaced(std::move(*this));  // waits, as it goes, for the call this one held
    call_ = std::move(other.call_);
  }
  return *this;
}

Request::~Request() {
  if (!call_) return;
  try {
    call_->wait();
  } catch (...) {  // the call ended the team: the program's next call on it says so
  }
}

void Request::wait() {
  if (!call_) fail(Errc::invalid_argument, "Request::wait: this Request holds no call");
  const std::shared_ptr<detail::PendingCall> call = std::move(call_);
  call->wait();
}

bool Request::test() const {
  return !call_ || call_->done.load(std::memory_order_acquire);
}

bool Request::wait_for(std::chrono::nanoseconds timeout) const {
  return !call_ || call_->wait_done_for(timeout);
}

namespace {

// reduce_scatter's buffers, once `counts` and their sum (`total_bytes` of input) have been
// checked: in place the input is recvbuf.
void run_reduce_scatter(const Call& call, const void* sendbuf, void* recvbuf,
                        std::span<const std::int64_t> counts, std::size_t total_bytes, Dtype dtype,
                        const Op& op, coll::CallSignature signature, TeamState& state) {
  check_op(call, op, dtype);
  const std::size_t mine =
      static_cast<std::size_t>(counts[state.rounds.rank()]) * dtype_size(dtype);
  const bool in_place_send = sendbuf == in_place;
  if (in_place_send) {
    check_buffer(call, "recvbuf", recvbuf, total_bytes);
    sendbuf = recvbuf;
  } else {
    check_buffer(call, "sendbuf", sendbuf, total_bytes);
    check_buffer(call, "recvbuf", recvbuf, mine);
    check_no_overlap(call, sendbuf, recvbuf, std::min(total_bytes, mine));
  }
  signature.op = op.kind();
  signature.dtype = static_cast<int>(dtype);
  run_call(state, signature, [&] {
    coll::reduce_scatter(state.context, sendbuf, recvbuf, counts, dtype, op, in_place_send);
  });
}

void run_scan(const Call& call, const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
              const Op& op, bool exclusive, TeamState& state) {
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_op(call, op, dtype);
  sendbuf = input_buffer(call, sendbuf, recvbuf, bytes);
  run_call(state,
           {exclusive ? Collective::exscan : Collective::scan,
            {},
            op.kind(),
            static_cast<int>(dtype),
            static_cast<std::uint64_t>(count)},
           [&] {
             coll::scan(state.context, sendbuf, recvbuf, static_cast<std::size_t>(count), dtype, op,
                        exclusive);
           });
}

}  // namespace

void Team::reduce_scatter(const void* sendbuf, void* recvbuf,
                          std::span<const std::int64_t> recvcounts, Dtype dtype, const Op& op) {
  const Call call{"reduce_scatter", state_};
  check_per_rank(call, "recvcounts", recvcounts);
  for (std::size_t rank = 0; rank < recvcounts.size(); ++rank) {
    if (recvcounts[rank] < 0) {
      reject(call, "recvcounts[", rank, "] must be non-negative, got ", recvcounts[rank]);
    }
  }
  std::int64_t total = 0;
  for (std::int64_t count : recvcounts) {
    if (__builtin_add_overflow(total, count, &total)) reject(call, "recvcounts overflow in sum");
  }
  const std::size_t total_bytes = checked_bytes(call, total, dtype);
  run_reduce_scatter(
      call, sendbuf, recvbuf, recvcounts, total_bytes, dtype, op,
      {Collective::reduce_scatter, {}, {}, {}, coll::hash_counts(recvcounts, dtype_size(dtype))},
      *state_);
}

void Team::reduce_scatter_block(const void* sendbuf, void* recvbuf, std::int64_t recvcount,
                                Dtype dtype, const Op& op) {
  const Call call{"reduce_scatter_block", state_};
  checked_bytes(call, recvcount, dtype);
  std::int64_t total = 0;
  if (__builtin_mul_overflow(recvcount, std::int64_t(size()), &total)) {
    reject(call, "recvcount ", recvcount, " times the team size overflows");
  }
  const std::size_t total_bytes = checked_bytes(call, total, dtype);
  std::fill(state_->equal_counts.begin(), state_->equal_counts.end(), recvcount);
  run_reduce_scatter(
      call, sendbuf, recvbuf, state_->equal_counts, total_bytes, dtype, op,
      {Collective::reduce_scatter_block, {}, {}, {}, static_cast<std::uint64_t>(recvcount)},
      *state_);
}

void Team::scan(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op) {
  const Call call{"scan", state_};
  run_scan(call, sendbuf, recvbuf, count, dtype, op, false, *state_);
}

void Team::exscan(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                  const Op& op) {
  const Call call{"exscan", state_};
  run_scan(call, sendbuf, recvbuf, count, dtype, op, true, *state_);
}

}  // namespace shmcoll
