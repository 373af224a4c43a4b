// libFuzzer target: the datatype engine. The input is a small program that builds derived
// datatypes from the predefined ones (every constructor, with counts, strides and displacements
// that may be negative or overflow); each type that is accepted is then packed from, unpacked
// into and packed again from a buffer that covers its data, whole and in random windows, and the
// packed streams must agree. A rejected type must be an invalid_argument error, nothing else.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_input.hpp"
#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::Datatype;
using shmcoll::Dtype;
using shmcoll::fuzz::Input;

constexpr std::int64_t kMostBufferBytes = 1 << 20;

std::vector<std::int64_t> values(Input& in, std::size_t n, std::int64_t limit) {
  std::vector<std::int64_t> out(n);
  for (auto& value : out) value = in.shifted_count(limit, in.pick(4) == 0 ? limit : 0);
  return out;
}

Datatype build(Input& in, std::vector<Datatype>& made) {
  const Datatype& old = made[static_cast<std::size_t>(in.pick(static_cast<int>(made.size())))];
  const std::size_t blocks = static_cast<std::size_t>(in.pick(5));
  switch (in.pick(9)) {
    case 0:
      return Datatype::contiguous(in.count(16), old);
    case 1:
      return Datatype::vector(in.count(8), in.count(4), in.shifted_count(8, 4), old);
    case 2:
      return Datatype::hvector(in.count(8), in.count(4), in.shifted_count(256, 128), old);
    case 3:
      return Datatype::indexed(values(in, blocks, 4), values(in, blocks, 16), old);
    case 4:
      return Datatype::hindexed(values(in, blocks, 4), values(in, blocks, 256), old);
    case 5:
      return Datatype::indexed_block(in.count(4), values(in, blocks, 16), old);
    case 6: {
      std::vector<Datatype> members;
      for (std::size_t i = 0; i < blocks; ++i) {
        members.push_back(made[static_cast<std::size_t>(in.pick(static_cast<int>(made.size())))]);
      }
      return Datatype::structure(values(in, blocks, 4), values(in, blocks, 256), members);
    }
    case 7:
      return Datatype::resized(old, in.shifted_count(64, 32), in.shifted_count(128, 16));
    default:
      return Datatype(static_cast<Dtype>(in.pick(shmcoll::kDtypeCount + 1)));  // one invalid
  }
}

void fail_check(const char* what) {
  std::fprintf(stderr, "datatype_fuzzer: %s\n", what);
  std::abort();
}

// Packs `count` elements out of a buffer that covers them, unpacks into a zeroed one, packs again.
void round_trip(const Datatype& type, std::int64_t count, Input& in) {
  // Types far from their origin are valid (absolute addresses), but no test buffer reaches them.
  auto near = [](std::int64_t value) {
    return value >= -kMostBufferBytes && value <= kMostBufferBytes;
  };
  if (type.size() == 0 || !near(type.true_lb()) || !near(type.true_extent()) ||
      !near(type.extent()) || !near(static_cast<std::int64_t>(type.size()))) {
    return;
  }
  const std::int64_t last = type.true_lb() + (count - 1) * type.extent();
  const std::int64_t low = std::min(type.true_lb(), last);
  const std::int64_t high = std::max(type.true_lb(), last) + type.true_extent();
  if (!near(low) || !near(high) || !near(high - low) ||
      !near(count * static_cast<std::int64_t>(type.size()))) {
    return;
  }
  std::vector<std::uint8_t> source(static_cast<std::size_t>(high - low)), target(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<std::uint8_t>(i * 31 + 7);
  std::uint8_t* origin = source.data() - low;  // element 0's address: data starts at origin + lb
  std::uint8_t* target_origin = target.data() - low;
  const std::size_t bytes = static_cast<std::size_t>(count) * type.size();
  std::vector<std::uint8_t> packed(bytes), again(bytes);
  if (type.pack(origin, count, packed.data()) != bytes) fail_check("pack returned a wrong length");
  if (type.unpack(packed.data(), count, target_origin) != bytes) fail_check("unpack length");
  type.pack(target_origin, count, again.data());
  if (packed != again) fail_check("pack(unpack(pack(x))) differs from pack(x)");
  const std::size_t offset = static_cast<std::size_t>(in.word() % bytes);
  const std::size_t window = static_cast<std::size_t>(in.word() % (bytes + 1));
  std::vector<std::uint8_t> piece(window);
  const std::size_t got = type.pack_range(origin, count, offset, window, piece.data());
  if (got != std::min(window, bytes - offset)) fail_check("pack_range returned a wrong length");
  if (!std::equal(piece.begin(), piece.begin() + static_cast<std::ptrdiff_t>(got),
                  packed.begin() + static_cast<std::ptrdiff_t>(offset))) {
    fail_check("pack_range differs from the same window of pack");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Input in(data, size);
  std::vector<Datatype> made = {Datatype(Dtype::i8), Datatype(Dtype::i32), Datatype(Dtype::f64),
                                Datatype(Dtype::double_int)};
  for (int step = 0; step < 6 && !in.empty(); ++step) {
    try {
      made.push_back(build(in, made));
    } catch (const shmcoll::Error& error) {
      if (error.code() != shmcoll::Errc::invalid_argument) fail_check(error.what());
    }
  }
  for (const Datatype& type : made) round_trip(type, 1 + in.pick(8), in);
  return 0;
}
