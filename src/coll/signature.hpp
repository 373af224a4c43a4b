// The signature of a collective call: what every rank's call must agree on, packed into the two
// 64-bit words that travel with each of the call's rounds (shm/rounds.hpp compares them).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "shm/layout.hpp"
#include "shmcoll/types.hpp"

namespace shmcoll::coll {

struct CallSignature {
  Collective kind;
  std::optional<int> root;   // rooted calls
  std::optional<int> op;     // reductions: Op::Kind
  std::optional<int> dtype;  // reductions: Dtype
  // What must be equal on every rank, where something is: the element count of a reduction,
  // bcast's bytes, the bytes of one block of scatter, gather, allgather and alltoall, a hash of
  // the per-rank counts of reduce_scatter and allgatherv. Compared in full (63 bits; counts
  // are below 2^56 bytes).
  std::optional<std::uint64_t> count;

  shm::Signature encode() const;
  static CallSignature decode(const shm::Signature& signature);
};

// A hash of per-rank counts in bytes (`unit_bytes` each), for the calls whose every rank passes
// the same vector.
std::uint64_t hash_counts(std::span<const std::int64_t> counts, std::size_t unit_bytes);

// "rank 0 called allreduce(count 8, dtype i32, op sum) but rank 1 called allreduce(count 8,
// dtype i32, op max): the op differs" (shm::MismatchDescriber).
std::string describe_mismatch(std::uint32_t rank_a, const shm::Signature& signature_a,
                              std::uint32_t rank_b, const shm::Signature& signature_b);

}  // namespace shmcoll::coll
