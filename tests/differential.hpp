// The differential tester's model: random collective calls that every rank derives identically
// from (seed, call index, team size), the buffers each rank passes, and the results each rank
// must see, computed from the inputs by code that shares nothing with the library's algorithms
// (only Datatype::pack/unpack, tested on their own in datatype_test).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace shmcoll::differential {

using Kind = shmcoll::Collective;
inline bool is_reduction(Kind kind) {
  return kind >= Kind::reduce && kind <= Kind::exscan;
}

// Element types for data movement: all made of i32, so any two describe the same signature when
// their counts cover the same number of i32 (a multiple of 6 always works).
struct TypeMenu {
  TypeMenu();
  std::vector<Datatype> types;
  std::vector<std::int64_t> ints;  // i32 per element of each type
};

// Reductions: an element type and operation, and whether results must match bitwise.
struct Reduction {
  Dtype dtype;
  Op op;
  bool exact;
  std::size_t multiple;  // counts are multiples of this (4: a 2x2 matrix)
};
std::vector<Reduction> reduction_menu(const Op& matrix);

struct Call {
  Kind kind;
  std::uint64_t seed;
  int root = 0;
  bool in_place = false;
  // Reductions.
  int reduction = 0;
  std::int64_t count = 0;
  std::vector<std::int64_t> counts;  // reduce_scatter's recvcounts
  // Data movement: ints[i][j] = i32 moving from rank i to rank j; type indices per rank (per
  // rank and peer for alltoallw).
  std::vector<std::vector<std::int64_t>> ints;
  std::vector<std::vector<int>> send_type, recv_type;
};

// The call with index `index` of the sequence `seed` for a team of p; one call in ten has up to
// `largest` elements (i32 times 6 per rank pair for data movement), the rest at most 3000.
inline constexpr std::int64_t kLargestElements = 40000;
// A private buffer each rank keeps for a whole sequence, whose pages its peers read directly
// (shm/shared_pages.hpp) once share_kept_buffer has run on every rank: a buffer's pages move on
// its second call, and that makes two allgathers from all of it. Teams of up to kMostKeptRanks
// (the allgathers receive p times the buffer). Calls then send from it when they fit, at offsets
// that vary.
inline constexpr std::size_t kKeptBytes = 1 << 20;
inline constexpr int kMostKeptRanks = 8;
void share_kept_buffer(Team& team);

Call describe_call(std::uint64_t seed, int index, int p, const TypeMenu& menu,
                   const std::vector<Reduction>& reductions,
                   std::int64_t largest = kLargestElements);

// Runs `call` on `team` with buffers built from the model; returns "" or what went wrong.
// `digest` accumulates a hash of this rank's results (the same run to run), `common_digest` of
// the results every rank must hold bit for bit (allreduce, bcast).
std::string run_and_check(Team& team, const Call& call, const TypeMenu& menu,
                          const std::vector<Reduction>& reductions, std::uint64_t& digest,
                          std::uint64_t& common_digest);

// ---- The model's buffers and results (differential.cpp), for the runner (differential_run.cpp)

std::uint64_t mix(std::uint64_t a, std::uint64_t b);  // splitmix64 of a combined with b

// One rank's side of a data-movement call: per peer count, displacement (bytes for w, extents
// otherwise) and type, and the bytes its buffer spans.
struct Side {
  std::vector<std::int64_t> counts, displs;
  std::vector<int> types;
  std::vector<Datatype> datatypes;
  std::size_t buffer_bytes = 0;
};
struct Sides {
  Side send, recv;
};

Sides sides_of(const Call& call, int rank, int p, const TypeMenu& menu);

// What a rank's buffers hold before a call: a pattern of the call, the rank and the role ('s'
// send, 'r' receive, 'i' a reduction's input), whole or bytes [begin, end) (begin a multiple of 8).
std::vector<std::byte> initial_bytes(const Call& call, int rank, char role, std::size_t bytes);
std::vector<std::byte> initial_bytes(const Call& call, int rank, char role, std::size_t begin,
                                     std::size_t end);

// A reduction's input on `rank`: `count` elements of the reduction's type.
std::vector<std::byte> reduction_input(const Call& call, int rank, std::size_t count,
                                       const Reduction& reduction);
// acc = acc op next, element by element, for the menu's reduction `reduction`.
void fold(int reduction, std::byte* acc, const std::byte* next, std::size_t count);
// Exact reductions bit for bit; floating ones within a tolerance growing with `contributors`.
bool close_enough(const Reduction& reduction, const std::byte* got, const std::byte* want,
                  std::size_t count, int contributors);

// What `me`'s receive buffer must hold after a data-movement call.
std::vector<std::byte> expected_movement(const Call& call, int me, int p, const TypeMenu& menu);

}  // namespace shmcoll::differential
