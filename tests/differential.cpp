// The differential tester's model (differential.hpp): the random calls, the buffers each rank passes
// and the results each rank must hold, computed from the inputs alone.
#include "differential.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>

namespace shmcoll::differential {

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

namespace {

std::int64_t span_bytes(std::int64_t count, const Datatype& type) {
  if (count == 0) return 0;
  return (count - 1) * type.extent() + type.true_lb() + type.true_extent();
}

// A size class: mostly message-line sizes, some that take several rounds of a small slot.
// Mostly small, sometimes up to `largest`.
std::int64_t random_elements(std::mt19937_64& rng, std::int64_t largest) {
  switch (rng() % 10) {
    case 0:
      return 0;
    case 1:
    case 2:
    case 3:
      return 1 + std::int64_t(rng() % 8);
    case 4:
    case 5:
    case 6:
      return 1 + std::int64_t(rng() % 64);
    case 7:
    case 8:
      return 1 + std::int64_t(rng() % std::uint64_t(std::min<std::int64_t>(3000, largest)));
    default:
      return 1 + std::int64_t(rng() % std::uint64_t(largest));
  }
}

}  // namespace

TypeMenu::TypeMenu() {
  const Datatype i32 = Dtype::i32;
  const std::int64_t indexed_lengths[] = {1, 2}, indexed_displs[] = {3, 0};
  const std::int64_t struct_lengths[] = {1, 1}, struct_displs[] = {0, 8};
  const Datatype struct_types[] = {i32, i32};
  types = {i32,
           Datatype::contiguous(3, i32),
           Datatype::vector(2, 1, 3, i32),                            // gaps between the ints
           Datatype::indexed(indexed_lengths, indexed_displs, i32),   // out of address order
           Datatype::resized(Datatype::vector(3, 1, 2, i32), 0, 28),  // padding at the end
           Datatype::structure(struct_lengths, struct_displs, struct_types)};
  for (const Datatype& type : types) {
    ints.push_back(type.element_count());
    // expected_movement makes only the bytes from a block's displacement on.
    if (type.true_lb() < 0) throw std::logic_error("TypeMenu: a type with data below its start");
  }
}

std::vector<Reduction> reduction_menu(const Op& matrix) {
  return {{Dtype::i32, Op::sum, true, 1},  {Dtype::u8, Op::sum, true, 1},
          {Dtype::i64, Op::prod, true, 1}, {Dtype::i32, Op::max, true, 1},
          {Dtype::u32, Op::bxor, true, 1}, {Dtype::f64, Op::sum, false, 1},
          {Dtype::f32, Op::sum, false, 1}, {Dtype::u64, matrix, true, 4}};
}

Call describe_call(std::uint64_t seed, int index, int p, const TypeMenu& menu,
                   const std::vector<Reduction>& reductions, std::int64_t largest) {
  std::mt19937_64 rng(mix(seed, std::uint64_t(index) * 1000 + std::uint64_t(p)));
  Call call;
  call.kind = Kind(rng() % std::uint64_t(shmcoll::kCollectiveCount));
  call.seed = rng();
  call.root = int(rng() % std::uint64_t(p));
  call.in_place = rng() % 3 == 0;
  if (call.kind == Kind::bcast || call.kind == Kind::barrier) call.in_place = false;
  if (is_reduction(call.kind)) {
    call.reduction = int(rng() % reductions.size());
    const std::int64_t multiple = std::int64_t(reductions[call.reduction].multiple);
    call.count = random_elements(rng, largest) * multiple;
    for (int rank = 0; rank < p; ++rank) {
      call.counts.push_back(call.kind == Kind::reduce_scatter
                                ? random_elements(rng, largest) * multiple
                                : call.count);
    }
    if (call.kind == Kind::reduce_scatter_block) call.count = call.counts[0];
    return call;
  }

  // Data movement: the i32 matrix and per-rank (or per-peer) types.
  const bool personal_types = call.kind == Kind::alltoallw;
  const bool varying = call.kind == Kind::scatterv || call.kind == Kind::gatherv ||
                       call.kind == Kind::allgatherv || call.kind == Kind::alltoallv ||
                       call.kind == Kind::alltoallw;
  auto ints = [&] { return random_elements(rng, largest) * 6; };
  call.ints.assign(p, std::vector<std::int64_t>(p, 0));
  const std::int64_t common = ints();
  std::vector<std::int64_t> per_rank(p);
  for (auto& n : per_rank) n = varying ? ints() : common;
  for (int i = 0; i < p; ++i) {
    for (int j = 0; j < p; ++j) {
      std::int64_t& n = call.ints[i][j];
      switch (call.kind) {
        case Kind::bcast:
          n = i == call.root ? common : 0;
          break;
        case Kind::scatter:
        case Kind::scatterv:
          n = i == call.root ? (varying ? ints() : common) : 0;
          break;
        case Kind::gather:
        case Kind::gatherv:
          n = j == call.root ? per_rank[i] : 0;
          break;
        case Kind::allgather:
        case Kind::allgatherv:
          n = per_rank[i];
          break;
        case Kind::alltoall:
          n = common;
          break;
        default:  // alltoallv/w: in place needs symmetric counts
          n = call.in_place && j < i ? call.ints[j][i] : (varying ? ints() : common);
          break;
      }
    }
  }
  const std::size_t menu_size = menu.types.size();
  call.send_type.assign(p, std::vector<int>(p));
  call.recv_type.assign(p, std::vector<int>(p));
  for (int i = 0; i < p; ++i) {
    const int send = int(rng() % menu_size), recv = int(rng() % menu_size);
    for (int j = 0; j < p; ++j) {
      call.send_type[i][j] = personal_types ? int(rng() % menu_size) : send;
      call.recv_type[i][j] = personal_types ? int(rng() % menu_size) : recv;
    }
  }
  if (call.in_place && call.kind == Kind::alltoallw) {  // same type maps both ways
    for (int i = 0; i < p; ++i) {
      for (int j = 0; j < i; ++j) call.recv_type[i][j] = call.recv_type[j][i];
    }
  }
  return call;
}

Sides sides_of(const Call& call, int rank, int p, const TypeMenu& menu) {
  Sides sides;
  const bool w = call.kind == Kind::alltoallw;
  const bool regular = call.kind == Kind::scatter || call.kind == Kind::gather ||
                       call.kind == Kind::allgather || call.kind == Kind::alltoall ||
                       call.kind == Kind::bcast;
  std::mt19937_64 rng(mix(call.seed, std::uint64_t(rank)));
  auto build = [&](Side& side, bool sending) {
    side.counts.assign(p, 0);
    side.displs.assign(p, 0);
    side.types.assign(p, 0);
    for (int peer = 0; peer < p; ++peer) {
      side.types[peer] = sending ? call.send_type[rank][peer] : call.recv_type[rank][peer];
      const std::int64_t n = sending ? call.ints[rank][peer] : call.ints[peer][rank];
      side.counts[peer] = n / menu.ints[side.types[peer]];
      side.datatypes.push_back(menu.types[side.types[peer]]);
    }
    // Where the blocks lie: in rank order for regular layouts, else shuffled with gaps (and,
    // for alltoallw's send side, sometimes overlapping, which reading allows).
    // A single-block side (what a gather contributor sends, what a scatter receiver gets)
    // has it at the start of the buffer.
    const bool single = sending ? (call.kind == Kind::gather || call.kind == Kind::gatherv ||
                                   call.kind == Kind::allgather || call.kind == Kind::allgatherv ||
                                   call.kind == Kind::bcast)
                                : (call.kind == Kind::scatter || call.kind == Kind::scatterv ||
                                   call.kind == Kind::bcast);
    std::vector<int> order(p);
    std::iota(order.begin(), order.end(), 0);
    if (!regular) std::shuffle(order.begin(), order.end(), rng);
    const bool overlap = w && sending && !call.in_place && rng() % 3 == 0;
    std::int64_t end_of_last = 0;
    for (int peer : order) {
      const Datatype& type = side.datatypes[peer];
      std::int64_t start = 0;
      if (single) {
        side.displs[peer] = 0;
      } else if (regular) {
        side.displs[peer] = peer * side.counts[peer];  // in extents: block `peer`
        start = side.displs[peer] * type.extent();
      } else if (w) {
        start = overlap ? std::int64_t(rng() % 4) * 4 : end_of_last + std::int64_t(rng() % 3) * 4;
        side.displs[peer] = start;
      } else {
        side.displs[peer] =
            (end_of_last + type.extent() - 1) / type.extent() + std::int64_t(rng() % 2);
        start = side.displs[peer] * type.extent();
      }
      const std::int64_t end = start + span_bytes(side.counts[peer], type);
      side.buffer_bytes = std::max(side.buffer_bytes, std::size_t(end));
      end_of_last = std::max(end_of_last, end);
    }
  };
  build(sides.send, true);
  build(sides.recv, false);
  return sides;
}

// What a rank's buffers hold before a call: a pattern of the call, the rank and the role.
// Bytes [begin, end) of a buffer's initial contents (begin a multiple of 8): each 8-byte word
// is a function of its offset, so a part is made without the rest.
std::vector<std::byte> initial_bytes(const Call& call, int rank, char role, std::size_t begin,
                                     std::size_t end) {
  std::vector<std::byte> data(end - begin);
  const std::uint64_t base = mix(call.seed, std::uint64_t(rank) * 7 + std::uint64_t(role));
  // Distinct words at distinct offsets (an odd multiplier is a bijection), folded so the low bytes
  // vary too, and apart for every (call, rank, role); cheap enough to vectorize, since every rank
  // makes every sender's bytes it receives (a splitmix per word was a sixth of a soak's time).
  auto word_at = [base](std::uint64_t offset) {
    const std::uint64_t x = (offset + 8) * 0x9e3779b97f4a7c15ull;
    return base ^ x ^ (x >> 29);
  };
  const std::size_t whole_end = begin + (end - begin) / 8 * 8;
  for (std::size_t i = begin; i < whole_end; i += 8) {
    const std::uint64_t word = word_at(i);
    std::memcpy(data.data() + (i - begin), &word, 8);
  }
  if (whole_end < end) {
    const std::uint64_t word = word_at(whole_end);
    std::memcpy(data.data() + (whole_end - begin), &word, end - whole_end);
  }
  return data;
}
std::vector<std::byte> initial_bytes(const Call& call, int rank, char role, std::size_t bytes) {
  return initial_bytes(call, rank, role, 0, bytes);
}

// ---- Reductions ----------------------------------------------------------------------------

std::vector<std::byte> reduction_input(const Call& call, int rank, std::size_t count,
                                       const Reduction& reduction) {
  std::vector<std::byte> data = initial_bytes(call, rank, 'i', count * dtype_size(reduction.dtype));
  // bits mapped onto [0, n) by a multiply instead of a division (every rank makes every
  // contributor's input for its check).
  auto below = [](std::uint64_t bits, std::uint64_t n) {
    return std::int64_t((unsigned __int128)bits * n >> 64);
  };
  if (reduction.dtype != Dtype::f64 && reduction.dtype != Dtype::f32 &&
      reduction.dtype != Dtype::u64) {
    return data;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bits = mix(call.seed + std::uint64_t(rank), i);
    if (reduction.dtype == Dtype::f64) {
      const double value = double(below(bits, 2000001) - 1000000) / 999983.0;
      std::memcpy(data.data() + i * 8, &value, 8);
    } else if (reduction.dtype == Dtype::f32) {
      const float value = float(below(bits, 20001) - 10000) / 9973.0f;
      std::memcpy(data.data() + i * 4, &value, 4);
    } else {  // matrix entries stay small
      const auto value = std::uint64_t(below(bits, 7));
      std::memcpy(data.data() + i * 8, &value, 8);
    }
  }
  return data;
}

namespace {

template <typename T, typename F>
void fold_as(std::byte* acc, const std::byte* next, std::size_t count, F f) {
  for (std::size_t i = 0; i < count; ++i) {
    T a, b;
    std::memcpy(&a, acc + i * sizeof(T), sizeof(T));
    std::memcpy(&b, next + i * sizeof(T), sizeof(T));
    a = f(a, b);
    std::memcpy(acc + i * sizeof(T), &a, sizeof(T));
  }
}

}  // namespace

// acc = acc op next, element by element, written for the menu's eight reductions one by one.
void fold(int reduction, std::byte* acc, const std::byte* next, std::size_t count) {
  switch (reduction) {
    case 0:
      return fold_as<std::int32_t>(acc, next, count, [](std::int32_t a, std::int32_t b) {
        return std::int32_t(std::uint32_t(a) + std::uint32_t(b));
      });
    case 1:
      return fold_as<std::uint8_t>(
          acc, next, count, [](std::uint8_t a, std::uint8_t b) { return std::uint8_t(a + b); });
    case 2:
      return fold_as<std::int64_t>(acc, next, count, [](std::int64_t a, std::int64_t b) {
        return std::int64_t(std::uint64_t(a) * std::uint64_t(b));
      });
    case 3:
      return fold_as<std::int32_t>(acc, next, count,
                                   [](std::int32_t a, std::int32_t b) { return std::max(a, b); });
    case 4:
      return fold_as<std::uint32_t>(acc, next, count,
                                    [](std::uint32_t a, std::uint32_t b) { return a ^ b; });
    case 5:
      return fold_as<double>(acc, next, count, [](double a, double b) { return a + b; });
    case 6:
      return fold_as<float>(acc, next, count, [](float a, float b) { return a + b; });
    default: {
      auto* a = reinterpret_cast<std::uint64_t*>(acc);
      const auto* b = reinterpret_cast<const std::uint64_t*>(next);
      for (std::size_t m = 0; m + 4 <= count; m += 4) testing::multiply_2x2(a + m, b + m, a + m);
    }
  }
}

bool close_enough(const Reduction& reduction, const std::byte* got, const std::byte* want,
                  std::size_t count, int contributors) {
  if (reduction.exact) return std::memcmp(got, want, count * dtype_size(reduction.dtype)) == 0;
  for (std::size_t i = 0; i < count; ++i) {
    double a, b, tolerance;
    if (reduction.dtype == Dtype::f64) {
      std::memcpy(&a, got + i * 8, 8), std::memcpy(&b, want + i * 8, 8);
      tolerance = 1e-13 * contributors;
    } else {
      float fa, fb;
      std::memcpy(&fa, got + i * 4, 4), std::memcpy(&fb, want + i * 4, 4);
      a = fa, b = fb, tolerance = 1e-5 * contributors;
    }
    if (!(std::fabs(a - b) <= tolerance)) return false;
  }
  return true;
}

// ---- Data movement -------------------------------------------------------------------------

namespace {

std::int64_t displacement_bytes(const Call& call, const Side& side, int peer) {
  return call.kind == Kind::alltoallw ? side.displs[peer]
                                      : side.displs[peer] * side.datatypes[peer].extent();
}

bool sends_from_recv_buffer(const Call& call) {
  return call.in_place && (call.kind == Kind::allgather || call.kind == Kind::allgatherv ||
                           call.kind >= Kind::alltoall);
}

}  // namespace

// What `me`'s receive buffer must hold: its initial bytes, with every block that arrives
// unpacked over them from the sender's own packing of its send block.
std::vector<std::byte> expected_movement(const Call& call, int me, int p, const TypeMenu& menu) {
  const Sides mine = sides_of(call, me, p, menu);
  std::vector<std::byte> want = initial_bytes(call, me, 'r', mine.recv.buffer_bytes);
  if (call.kind == Kind::bcast && me == call.root) return want;
  for (int source = 0; source < p; ++source) {
    if (call.ints[source][me] == 0) continue;
    if (source == me && call.in_place) continue;  // my own block stays where it is
    const Sides theirs = sides_of(call, source, p, menu);
    const bool from_recv = sends_from_recv_buffer(call);
    const Side& side = from_recv ? theirs.recv : theirs.send;
    // In place, an allgather contributor sends its own block of its receive buffer.
    const int block = from_recv && call.kind < Kind::alltoall ? source : me;
    // Only the part of the sender's buffer that its block spans (the menu's types start at or
    // after their lower bound), from the 8-byte word that holds its first byte.
    const Datatype& type = side.datatypes[block];
    const auto at = std::size_t(displacement_bytes(call, side, block));
    const std::size_t from = at / 8 * 8,
                      to = at + std::size_t(span_bytes(side.counts[block], type));
    const std::vector<std::byte> part =
        initial_bytes(call, source, from_recv ? 'r' : 's', from, std::max(from, to));
    std::vector<std::byte> stream(std::size_t(call.ints[source][me]) * 4);
    type.pack(part.data() + (at - from), side.counts[block], stream.data());
    mine.recv.datatypes[source].unpack(stream.data(), mine.recv.counts[source],
                                       want.data() + displacement_bytes(call, mine.recv, source));
  }
  return want;
}

}  // namespace shmcoll::differential
