// libFuzzer target: argument validation. The input chooses a collective and every argument (counts
// that may be negative or overflow, invalid datatypes and ops, roots out of range, per-rank
// arrays of the wrong length, null, in_place and aliased buffers) for a one-rank team. Either
// the call is valid and runs (on buffers large enough for any valid count, so a sanitizer report
// is a real fault), or it fails with invalid_argument; anything else aborts. A call after each
// must still work.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_input.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::Datatype;
using shmcoll::Dtype;
using shmcoll::Op;
using shmcoll::fuzz::Input;

constexpr std::int64_t kMostCount = 64;     // valid counts; with 32-byte elements, 2 KiB
constexpr std::size_t kBufferBytes = 8192;  // room for kMostCount plus displacements each way
constexpr std::size_t kMiddle = kBufferBytes / 2;

shmcoll::Team& team() {
  static shmcoll::Team one = shmcoll::Team::join(shmcoll::Team::unique_segment_name(), 0, 1);
  return one;
}

struct Buffers {
  std::vector<std::byte> a = std::vector<std::byte>(kBufferBytes);
  std::vector<std::byte> b = std::vector<std::byte>(kBufferBytes);
  // Null, in_place, either buffer (from its middle, so small negative displacements stay
  // inside), or the first shifted by a few bytes (overlapping it).
  void* choose(Input& in) {
    switch (in.pick(5)) {
      case 0:
        return nullptr;
      case 1:
        return shmcoll::in_place;
      case 2:
        return a.data() + kMiddle;
      case 3:
        return b.data() + kMiddle;
      default:
        return a.data() + kMiddle + 8 * in.pick(4);
    }
  }
};

Dtype dtype(Input& in) {
  return static_cast<Dtype>(in.pick(shmcoll::kDtypeCount + 2) - 1);
}
Op op(Input& in) {
  return Op(static_cast<Op::Kind>(in.pick(shmcoll::kPredefinedOpCount + 3)));
}
int root(Input& in) {
  return in.pick(4) == 0 ? static_cast<int>(in.word()) : in.pick(3) - 1;
}
// A per-rank array: usually one entry (the team has one rank), sometimes none or two.
template <typename Draw>
std::vector<std::int64_t> per_rank(Input& in, Draw draw) {
  const std::size_t n = in.pick(6) == 0 ? static_cast<std::size_t>(in.pick(3)) : 1;
  std::vector<std::int64_t> out(n);
  for (auto& value : out) value = draw();
  return out;
}
std::vector<std::int64_t> counts(Input& in) {
  return per_rank(in, [&] { return in.count(kMostCount); });
}
// Displacements (in extents, or bytes): within `reach` either way of the buffer's middle, where
// any valid block fits, or beyond any address space, where every call must refuse them.
std::vector<std::int64_t> displacements(Input& in, std::int64_t reach) {
  return per_rank(in, [&] {
    if (in.pick(8) != 0)
      return static_cast<std::int64_t>(in.pick(static_cast<int>(2 * reach + 1))) - reach;
    return in.pick(2) == 0 ? std::int64_t{1} << 62 : INT64_MIN + in.pick(256);
  });
}

void call(Input& in, Buffers& buffers) {
  shmcoll::Team& t = team();
  void* send = buffers.choose(in);
  void* recv = buffers.choose(in);
  const Datatype type_a(static_cast<Dtype>(in.pick(shmcoll::kDtypeCount)));
  const Datatype type_b(static_cast<Dtype>(in.pick(shmcoll::kDtypeCount)));
  switch (in.pick(17)) {
    case 0:
      return t.bcast(recv, in.count(kMostCount), dtype(in), root(in));
    case 1:
      return t.reduce(send, recv, in.count(kMostCount), dtype(in), op(in), root(in));
    case 2:
      return t.allreduce(send, recv, in.count(kMostCount), dtype(in), op(in));
    case 3:
      return t.reduce_scatter(send, recv, counts(in), dtype(in), op(in));
    case 4:
      return t.reduce_scatter_block(send, recv, in.count(kMostCount), dtype(in), op(in));
    case 5:
      return t.scan(send, recv, in.count(kMostCount), dtype(in), op(in));
    case 6:
      return t.exscan(send, recv, in.count(kMostCount), dtype(in), op(in));
    case 7:
      return t.scatter(send, in.count(kMostCount), type_a, recv, in.count(kMostCount), type_b,
                       root(in));
    case 8:
      return t.scatterv(send, counts(in), displacements(in, 16), type_a, recv, in.count(kMostCount),
                        type_b, root(in));
    case 9:
      return t.gather(send, in.count(kMostCount), type_a, recv, in.count(kMostCount), type_b,
                      root(in));
    case 10:
      return t.gatherv(send, in.count(kMostCount), type_a, recv, counts(in), displacements(in, 16),
                       type_b, root(in));
    case 11:
      return t.allgather(send, in.count(kMostCount), type_a, recv, in.count(kMostCount), type_b);
    case 12:
      return t.allgatherv(send, in.count(kMostCount), type_a, recv, counts(in),
                          displacements(in, 16), type_b);
    case 13:
      return t.alltoall(send, in.count(kMostCount), type_a, recv, in.count(kMostCount), type_b);
    case 14:
      return t.alltoallv(send, counts(in), displacements(in, 16), type_a, recv, counts(in),
                         displacements(in, 16), type_b);
    case 15: {
      const std::vector<Datatype> send_types(static_cast<std::size_t>(in.pick(3)), type_a);
      const std::vector<Datatype> recv_types(static_cast<std::size_t>(in.pick(3)), type_b);
      return t.alltoallw(send, counts(in), displacements(in, 128), send_types, recv, counts(in),
                         displacements(in, 128), recv_types);
    }
    default:
      return t.barrier();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  Buffers buffers;
  try {
    call(in, buffers);
  } catch (const shmcoll::Error& error) {
    if (error.code() != shmcoll::Errc::invalid_argument) {
      std::fprintf(stderr, "arguments_fuzzer: not invalid_argument: %s\n", error.what());
      std::abort();
    }
  }
  // The team is still usable.
  std::int64_t value = 41, sum = 0;
  team().allreduce(&value, &sum, 1, Dtype::i64, Op::sum);
  if (sum != 41) std::abort();
  return 0;
}
