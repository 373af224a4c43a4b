// Argument checks shared by the Team's collectives: each failure is an invalid_argument error
// that names the call, the rank and the argument, raised before any data moves.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "api/team_state.hpp"
#include "coll/signature.hpp"
#include "ops/reduce.hpp"
#include "util/address_space.hpp"
#include "util/fail.hpp"

namespace shmcoll::detail {

struct Call {
  // Fails when the Team was moved from: it holds no team any more.
  Call(const char* name_in, const std::unique_ptr<TeamState>& state_in)
      : name(name_in), state(live(name_in, state_in)) {}
  const char* name;
  const TeamState& state;

 private:
  static const TeamState& live(const char* name, const std::unique_ptr<TeamState>& state) {
    if (!state) fail(Errc::invalid_argument, name, ": this Team was moved from; it has no team");
    return *state;
  }
};

// Runs a call's algorithm once its arguments have passed, before any data moves: tells the
// rounds which call it is, so the members can check that they all made the same one. An error
// from the algorithm (a failed wait, a user op that throws, a check only possible mid-call)
// leaves the peers waiting for rounds that will never come, or for a release of memory they
// read: it ends the team, so every peer fails at once instead of hanging, and returns only once
// no peer is still writing into this rank's buffers (Rounds::wait_for_writers). A call that
// completed here while the team ended fails too: a peer whose memory this rank read in place
// may have left early, its program rewriting what was read. (Errors raised before, bad
// arguments, leave the team usable.)
// A call issued on the program's thread first waits for the nonblocking calls issued before it,
// which the team's worker runs in order (on the worker's thread it does not wait).
template <typename Algorithm>
void run_call(TeamState& state, const coll::CallSignature& signature, Algorithm&& algorithm) {
  if (state.worker) state.worker->drain();
  state.rounds.begin_call(state.tunables.team.check_calls ? signature.encode() : shm::Signature{});
  try {
    algorithm();
    state.context.last_call_root = signature.root.value_or(-1);
    state.rounds.check_not_aborted();
  } catch (...) {
    state.rounds.abort_team(state.rounds.rank());
    state.rounds.wait_for_writers();
    throw;
  }
}

// A bcast of `bytes` contiguous bytes from `first` (whichever overload and layout each rank
// called with: the rounds depend only on the bytes, which every rank agrees on).
inline void run_contiguous_bcast(TeamState& state, void* first, std::size_t bytes, int root) {
  static const Datatype kBytes(Dtype::byte);
  run_call(state, {Collective::bcast, root, {}, {}, bytes}, [&] {
    coll::bcast(state.context,
                coll::Block{static_cast<std::byte*>(first), std::int64_t(bytes), &kBytes}, root);
  });
}

template <typename... Parts>
[[noreturn]] void reject(const Call& call, Parts&&... parts) {
  fail(Errc::invalid_argument, call.name, " on rank ", call.state.rounds.rank(), ": ",
       std::forward<Parts>(parts)...);
}

inline void check_dtype(const Call& call, Dtype dtype) {
  if (!is_valid_dtype(dtype)) {
    reject(call, "dtype ", static_cast<int>(dtype), " is not a shmcoll::Dtype");
  }
}

inline void check_op(const Call& call, const Op& op, Dtype dtype) {
  if (op_defined_on(op, dtype)) return;  // the fast path builds no string
  reject(call, ops::op_undefined_reason(op, dtype));
}

// Returns count * size of dtype, after rejecting negative and overflowing counts.
inline std::size_t checked_bytes(const Call& call, std::int64_t count, Dtype dtype) {
  check_dtype(call, dtype);
  if (count < 0) reject(call, "count must be non-negative, got ", count);
  const std::size_t element_bytes = dtype_size(dtype);
  if (static_cast<std::uint64_t>(count) > kMostAddressBytes / element_bytes) {
    reject(call, "count ", count, " of ", dtype_name(dtype),
           " is more bytes than any address space");
  }
  return static_cast<std::size_t>(count) * element_bytes;
}

inline void check_root(const Call& call, int root) {
  const int size = static_cast<int>(call.state.rounds.size());
  if (root < 0 || root >= size) reject(call, "root ", root, " is out of range [0, ", size, ")");
}

inline void check_buffer(const Call& call, const char* name, const void* buffer,
                         std::size_t bytes) {
  if (buffer == in_place) reject(call, name, " is in_place, which is not allowed here");
  if (bytes > 0 && buffer == nullptr) reject(call, name, " is null with ", bytes, " bytes to move");
}

// Overlap is judged on data spans (buffer_spans.hpp): a derived type's holes count as its own.
inline void check_not_aliased(const Call& call, const DataSpan& send, const DataSpan& recv) {
  if (send.overlaps(recv)) {
    reject(call, "sendbuf and recvbuf overlap; pass shmcoll::in_place as sendbuf instead");
  }
}

// Two contiguous buffers of `bytes` each.
inline void check_no_overlap(const Call& call, const void* send, const void* recv,
                             std::size_t bytes) {
  check_not_aliased(call, data_span(send, bytes), data_span(recv, bytes));
}

// The send buffer of a reduction whose input may be in place: recvbuf when it is, else sendbuf,
// which must then not overlap recvbuf.
inline const void* input_buffer(const Call& call, const void* sendbuf, void* recvbuf,
                                std::size_t bytes) {
  check_buffer(call, "recvbuf", recvbuf, bytes);
  if (sendbuf == in_place) return recvbuf;
  check_buffer(call, "sendbuf", sendbuf, bytes);
  check_no_overlap(call, sendbuf, recvbuf, bytes);
  return sendbuf;
}

// Bytes of `count` elements of a (derived) datatype, after rejecting negative and overflowing
// counts; `name` is the count's argument name.
inline std::size_t checked_bytes(const Call& call, const char* name, std::int64_t count,
                                 const Datatype& type) {
  if (count < 0) reject(call, name, " must be non-negative, got ", count);
  if (type.size() != 0 && static_cast<std::uint64_t>(count) > kMostAddressBytes / type.size()) {
    reject(call, name, " ", count, " is more bytes than any address space");
  }
  return static_cast<std::size_t>(count) * type.size();
}

// The lowest address a buffer's data can have: no mapping starts in the first page.
inline constexpr std::int64_t kLowestDataAddress = 4096;

// A typed buffer: null (MPI_BOTTOM) is allowed where the type's displacements are absolute
// addresses, as its true lower bound tells (a struct of one variable's address is as
// contiguous as any type); in_place only where the caller has already handled it.
inline void check_typed_buffer(const Call& call, const char* name, const void* buffer,
                               std::size_t bytes, const Datatype& type) {
  if (buffer == in_place) reject(call, name, " is in_place, which is not allowed here");
  if (bytes > 0 && buffer == nullptr && type.true_lb() < kLowestDataAddress) {
    reject(call, name, " is null with ", bytes, " bytes to move at address ", type.true_lb(),
           " (the type's displacements are not absolute addresses)");
  }
}

// `blocks` consecutive blocks of `count` elements of `type` (a regular layout's whole buffer)
// must fit in an address space; their extents, not just their data, are what the buffer spans.
inline void check_span(const Call& call, const char* name, std::int64_t count, const Datatype& type,
                       std::int64_t blocks = 1) {
  const std::int64_t extent = type.extent() < 0 ? -type.extent() : type.extent();
  std::optional<std::int64_t> span = address_product(count, extent);
  if (span) span = address_product(*span, blocks);
  if (!span) {
    reject(call, name, " ", count, " of a type of extent ", type.extent(),
           blocks > 1 ? " per rank" : "", " spans more than any address space");
  }
}

// A per-rank array (counts, displacements or types) must have one entry per rank.
template <typename T>
void check_per_rank(const Call& call, const char* name, std::span<const T> values) {
  const std::size_t size = call.state.rounds.size();
  if (values.size() != size) {
    reject(call, name, " has ", values.size(), " entries but the team has ", size, " ranks");
  }
}

// Per-rank counts and displacements of a v or w layout (`types` empty: every block of `type`).
inline void check_layout(const Call& call, const char* buffer_name, const void* buffer,
                         const char* counts_name, std::span<const std::int64_t> counts,
                         const char* displs_name, std::span<const std::int64_t> displs,
                         const Datatype* type, std::span<const Datatype> types = {}) {
  check_per_rank(call, counts_name, counts);
  check_per_rank(call, displs_name, displs);
  for (std::size_t rank = 0; rank < counts.size(); ++rank) {
    const Datatype& block_type = type ? *type : types[rank];
    if (counts[rank] < 0) {
      reject(call, counts_name, "[", rank, "] must be non-negative, got ", counts[rank]);
    }
    check_typed_buffer(call, buffer_name, buffer,
                       checked_bytes(call, counts_name, counts[rank], block_type), block_type);
    check_span(call, counts_name, counts[rank], block_type);
    // v layouts count displacements in extents of the type, w layouts in bytes.
    if (!address_product(displs[rank], type ? type->extent() : 1)) {
      reject(call, displs_name, "[", rank, "] = ", displs[rank],
             " puts the block beyond any address space");
    }
  }
}

}  // namespace shmcoll::detail
