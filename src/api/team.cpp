// The public Team: argument checks (before any data moves), then the collective algorithm.
#include <cstdint>
#include <limits>

#include "api/team_state.hpp"
#include "ops/reduce.hpp"
#include "util/fail.hpp"

namespace shmcoll {

namespace {

struct Call {
  const char* name;
  const detail::TeamState& state;
};

template <typename... Parts>
[[noreturn]] void reject(const Call& call, Parts&&... parts) {
  fail(Errc::invalid_argument, call.name, " on rank ", call.state.rounds.rank(), ": ",
       std::forward<Parts>(parts)...);
}

void check_dtype(const Call& call, Dtype dtype) {
  if (!is_valid_dtype(dtype)) {
    reject(call, "dtype ", static_cast<int>(dtype), " is not a shmcoll::Dtype");
  }
}

void check_op(const Call& call, const Op& op, Dtype dtype) {
  if (op_defined_on(op, dtype)) return;  // the fast path builds no string
  reject(call, ops::op_undefined_reason(op, dtype));
}

// Returns count * size of dtype, after rejecting negative and overflowing counts.
std::size_t checked_bytes(const Call& call, std::int64_t count, Dtype dtype) {
  check_dtype(call, dtype);
  if (count < 0) reject(call, "count must be non-negative, got ", count);
  const std::size_t element_bytes = dtype_size(dtype);
  if (static_cast<std::uint64_t>(count) >
      std::numeric_limits<std::size_t>::max() / 2 / element_bytes) {
    reject(call, "count ", count, " of ", dtype_name(dtype), " overflows the addressable bytes");
  }
  return static_cast<std::size_t>(count) * element_bytes;
}

void check_root(const Call& call, int root) {
  const int size = static_cast<int>(call.state.rounds.size());
  if (root < 0 || root >= size) reject(call, "root ", root, " is out of range [0, ", size, ")");
}

void check_buffer(const Call& call, const char* name, const void* buffer, std::size_t bytes) {
  if (buffer == in_place) reject(call, name, " is in_place, which is not allowed here");
  if (bytes > 0 && buffer == nullptr) reject(call, name, " is null with ", bytes, " bytes to move");
}

void check_no_overlap(const Call& call, const void* send, const void* recv, std::size_t bytes) {
  const auto a = reinterpret_cast<std::uintptr_t>(send);
  const auto b = reinterpret_cast<std::uintptr_t>(recv);
  if (bytes > 0 && a < b + bytes && b < a + bytes) {
    reject(call, "sendbuf and recvbuf overlap; pass shmcoll::in_place as sendbuf instead");
  }
}

}  // namespace

Team::Team(std::unique_ptr<detail::TeamState> state) : state_(std::move(state)) {}
Team::Team(Team&&) noexcept = default;
Team& Team::operator=(Team&&) noexcept = default;
Team::~Team() = default;

int Team::rank() const noexcept {
  return static_cast<int>(state_->rounds.rank());
}
int Team::size() const noexcept {
  return static_cast<int>(state_->rounds.size());
}

void Team::check_spans(std::size_t send_size, std::size_t recv_size) {
  if (send_size != recv_size) {
    fail(Errc::invalid_argument, "allreduce: send span has ", send_size,
         " elements but recv span has ", recv_size);
  }
}

void Team::barrier() {
  coll::barrier(state_->context);
}

void Team::bcast(void* buffer, std::int64_t count, Dtype dtype, int root) {
  const Call call{"bcast", *state_};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_root(call, root);
  check_buffer(call, "buffer", buffer, bytes);
  coll::bcast(state_->context, buffer, bytes, root);
}

void Team::reduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype, const Op& op,
                  int root) {
  const Call call{"reduce", *state_};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_op(call, op, dtype);
  check_root(call, root);
  const bool at_root = rank() == root;
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
  coll::reduce(state_->context, sendbuf, recvbuf, static_cast<std::size_t>(count), dtype, op, root);
}

void Team::allreduce(const void* sendbuf, void* recvbuf, std::int64_t count, Dtype dtype,
                     const Op& op) {
  const Call call{"allreduce", *state_};
  const std::size_t bytes = checked_bytes(call, count, dtype);
  check_op(call, op, dtype);
  check_buffer(call, "recvbuf", recvbuf, bytes);
  if (sendbuf == in_place) {
    sendbuf = recvbuf;
  } else {
    check_buffer(call, "sendbuf", sendbuf, bytes);
    check_no_overlap(call, sendbuf, recvbuf, bytes);
  }
  coll::allreduce(state_->context, sendbuf, recvbuf, static_cast<std::size_t>(count), dtype, op);
}

}  // namespace shmcoll
