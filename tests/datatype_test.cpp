// The derived datatype engine against typemaps and bounds worked out by hand from the MPI
// standard's definitions: size, lb, ub, extent, true extent, and pack/unpack in typemap order.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "shmcoll/shmcoll.hpp"

namespace {

using shmcoll::Datatype;
using shmcoll::Dtype;

struct Piece {  // bytes [offset, offset + bytes) of one element, in typemap order
  std::int64_t offset;
  std::size_t bytes;
};

struct Bounds {
  std::size_t size;
  std::int64_t lb, extent, true_lb, true_extent;
};

// Packs `count` elements from a buffer of distinct bytes and compares with the bytes the typemap
// names; then unpacks into a zeroed buffer and checks that exactly those bytes came back.
void check_type(const Datatype& type, const std::vector<Piece>& typemap, const Bounds& want,
                int count = 3) {
  EXPECT_EQ(type.size(), want.size);
  EXPECT_EQ(type.lb(), want.lb);
  EXPECT_EQ(type.extent(), want.extent);
  EXPECT_EQ(type.ub(), want.lb + want.extent);
  EXPECT_EQ(type.true_lb(), want.true_lb);
  EXPECT_EQ(type.true_extent(), want.true_extent);

  // Room for negative displacements: element 0 sits `margin` bytes into the buffer.
  const std::int64_t margin = 256;
  std::vector<unsigned char> source(2 * margin + count * std::max<std::int64_t>(want.extent, 0) +
                                    512);
  std::iota(source.begin(), source.end(), 1);
  std::vector<unsigned char> expected;
  for (int i = 0; i < count; ++i) {
    for (const Piece& piece : typemap) {
      const auto start = source.begin() + margin + i * want.extent + piece.offset;
      expected.insert(expected.end(), start, start + piece.bytes);
    }
  }
  std::vector<unsigned char> packed(expected.size() + 16, 0xee);
  EXPECT_EQ(type.pack(source.data() + margin, count, packed.data()), expected.size());
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), packed.begin()));
  EXPECT_EQ(packed[expected.size()], 0xee) << "pack wrote past its count * size bytes";

  std::vector<unsigned char> unpacked(source.size(), 0);
  EXPECT_EQ(type.unpack(packed.data(), count, unpacked.data() + margin), expected.size());
  std::vector<unsigned char> want_unpacked(source.size(), 0);
  for (int i = 0; i < count; ++i) {
    for (const Piece& piece : typemap) {
      const std::size_t at = margin + i * want.extent + piece.offset;
      std::memcpy(&want_unpacked[at], &source[at], piece.bytes);
    }
  }
  EXPECT_EQ(unpacked, want_unpacked);

  // Every window of the packed stream, of several widths: pack_range gives the same bytes as
  // pack, and unpacking the windows one after another rebuilds what unpack does.
  for (std::size_t width : {std::size_t{1}, std::size_t{3}, std::size_t{7}, std::size_t{64}}) {
    std::vector<unsigned char> windowed(expected.size(), 0);
    std::vector<unsigned char> rebuilt(source.size(), 0);
    for (std::size_t offset = 0; offset < expected.size(); offset += width) {
      const std::size_t want_bytes = std::min(width, expected.size() - offset);
      EXPECT_EQ(type.pack_range(source.data() + margin, count, offset, width, &windowed[offset]),
                want_bytes);
      EXPECT_EQ(type.unpack_range(&expected[offset], count, offset, width, rebuilt.data() + margin),
                want_bytes);
    }
    EXPECT_EQ(windowed, expected) << "windows of " << width << " bytes";
    EXPECT_EQ(rebuilt, want_unpacked) << "windows of " << width << " bytes";
  }
}

TEST(Datatype, PredefinedTypesAreTheirOwnContiguousElements) {
  check_type(Dtype::i32, {{0, 4}}, {4, 0, 4, 0, 4});
  check_type(Dtype::double_int, {{0, 16}}, {16, 0, 16, 0, 16});
  const Datatype four = Datatype::contiguous(4, Dtype::f32);
  check_type(four, {{0, 16}}, {16, 0, 16, 0, 16});
  EXPECT_TRUE(four.is_contiguous());
  EXPECT_EQ(four.element_type(), Dtype::f32);
  EXPECT_EQ(four.element_count(), 4);
}

// A count of zero (or an empty type) moves nothing, so its buffers may be null, as in MPI; the
// sanitizer build fails this if a zero-byte memcpy still sees a null pointer.
TEST(Datatype, NothingToMoveAcceptsNullBuffers) {
  const Datatype empty = Datatype::contiguous(0, Dtype::f64);
  for (const Datatype& type :
       {Datatype(Dtype::i32), Datatype::vector(3, 1, 2, Dtype::f32), empty}) {
    const std::int64_t count = type.size() == 0 ? 5 : 0;
    EXPECT_EQ(type.pack(nullptr, count, nullptr), 0u);
    EXPECT_EQ(type.unpack(nullptr, count, nullptr), 0u);
  }
}

TEST(Datatype, VectorAndHvector) {
  // 3 blocks of 2 ints, 4 ints apart: ints at 0 4 | 16 20 | 32 36.
  const Datatype vector = Datatype::vector(3, 2, 4, Dtype::i32);
  check_type(vector, {{0, 8}, {16, 8}, {32, 8}}, {24, 0, 40, 0, 40});
  EXPECT_FALSE(vector.is_contiguous());
  EXPECT_EQ(vector.element_count(), 6);
  // A negative byte stride: the second double lies before the first, and packs after it.
  const Datatype backwards = Datatype::hvector(2, 1, -8, Dtype::f64);
  check_type(backwards, {{0, 8}, {-8, 8}}, {16, -8, 16, -8, 16});
  EXPECT_FALSE(backwards.is_contiguous());
  // A vector whose stride equals its block is contiguous.
  EXPECT_TRUE(Datatype::vector(5, 3, 3, Dtype::u8).is_contiguous());
  check_type(Datatype::vector(0, 3, 3, Dtype::u8), {}, {0, 0, 0, 0, 0});
}

TEST(Datatype, IndexedFamily) {
  const std::int64_t lengths[] = {2, 1}, displacements[] = {3, 0};
  // ints at 12 16 then 0: typemap order is not address order.
  check_type(Datatype::indexed(lengths, displacements, Dtype::i32), {{12, 8}, {0, 4}},
             {12, 0, 20, 0, 20});
  const std::int64_t block_displacements[] = {1, 4};
  check_type(Datatype::indexed_block(2, block_displacements, Dtype::i16), {{2, 4}, {8, 4}},
             {8, 2, 10, 2, 10});
  const std::int64_t byte_lengths[] = {1, 2}, bytes[] = {-4, 8};
  check_type(Datatype::hindexed(byte_lengths, bytes, Dtype::i32), {{-4, 4}, {8, 8}},
             {12, -4, 20, -4, 20});
}

TEST(Datatype, StructPadsItsExtentLikeACStruct) {
  // struct { double d; char c; }: 9 bytes of data, extent 16.
  const std::int64_t lengths[] = {1, 1}, offsets[] = {0, 8};
  const Datatype types[] = {Dtype::f64, Dtype::character};
  const Datatype double_char = Datatype::structure(lengths, offsets, types);
  check_type(double_char, {{0, 9}}, {9, 0, 16, 0, 9});
  EXPECT_FALSE(double_char.element_type().has_value());
  // struct { char c; int i; short s; }: c at 0, i at 4, s at 8; ub 10 padded to 12.
  const std::int64_t lengths3[] = {1, 1, 1}, offsets3[] = {0, 4, 8};
  const Datatype types3[] = {Dtype::character, Dtype::i32, Dtype::i16};
  const Datatype mixed = Datatype::structure(lengths3, offsets3, types3);
  check_type(mixed, {{0, 1}, {4, 6}}, {7, 0, 12, 0, 10});
  // Nested: every third struct, twice: the structs at 0 and 36.
  check_type(Datatype::vector(2, 1, 3, mixed), {{0, 1}, {4, 6}, {36, 1}, {40, 6}},
             {14, 0, 48, 0, 46});
}

TEST(Datatype, ResizedSetsBoundsAndStopsStructPadding) {
  const Datatype padded_int = Datatype::resized(Dtype::i32, -4, 12);
  check_type(padded_int, {{0, 4}}, {4, -4, 12, 0, 4});
  // Three of them: ints at 0 12 24; bounds from the resized markers.
  check_type(Datatype::contiguous(3, padded_int), {{0, 4}, {12, 4}, {24, 4}}, {12, -4, 36, 0, 28});
  // A resized member's bounds are sticky: they win over the char after it (ub stays 8, though
  // data reaches 9), and the struct gets no alignment padding. Open MPI 4.1 says 8 as well;
  // MPICH 4.0 says 16.
  const std::int64_t lengths[] = {1, 1}, offsets[] = {0, 8};
  const Datatype types[] = {Datatype::resized(Dtype::f64, 0, 8), Dtype::character};
  check_type(Datatype::structure(lengths, offsets, types), {{0, 9}}, {9, 0, 8, 0, 9});
  // Without the resize: padded to 16.
  const Datatype plain[] = {Dtype::f64, Dtype::character};
  check_type(Datatype::structure(lengths, offsets, plain), {{0, 9}}, {9, 0, 16, 0, 9});
}

TEST(Datatype, LargeStridedTypesCostOneNode) {
  // A million blocks: described by a formula, packed correctly, spot-checked.
  const std::int64_t n = 1'000'000;
  const Datatype every_other = Datatype::vector(n, 1, 2, Dtype::f64);
  EXPECT_EQ(every_other.size(), std::size_t(n) * 8);
  EXPECT_EQ(every_other.extent(), (2 * n - 1) * 8);
  std::vector<double> source(2 * n), packed(n);
  std::iota(source.begin(), source.end(), 0.0);
  every_other.pack(source.data(), 1, packed.data());
  for (std::int64_t i = 0; i < n; i += 99'999) EXPECT_EQ(packed[i], 2.0 * double(i));
}

TEST(Datatype, BadArgumentsAreNamed) {
  const auto expect_rejected = [](auto make, const char* words) {
    try {
      make();
      ADD_FAILURE() << "accepted: " << words;
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
  };
  expect_rejected([] { Datatype::contiguous(-1, Dtype::i32); }, "contiguous: count");
  expect_rejected([] { Datatype::vector(2, -3, 1, Dtype::i32); }, "vector: blocklength");
  expect_rejected(
      [] {
        const std::int64_t lengths[] = {1, 2}, displacements[] = {0};
        Datatype::indexed(lengths, displacements, Dtype::i32);
      },
      "2 blocklengths but 1 displacements");
  expect_rejected([] { Datatype::resized(Dtype::i32, 0, -8); }, "resized: extent");
  expect_rejected([] { Datatype(static_cast<Dtype>(99)); }, "dtype 99");
  expect_rejected([] { Datatype::vector(std::int64_t{1} << 62, 1, 1 << 4, Dtype::f64); },
                  "overflows");
  int x = 0;
  expect_rejected([&] { Datatype(Dtype::i32).pack(&x, -2, &x); }, "pack: count");
}

}  // namespace
