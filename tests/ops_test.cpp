// The elementwise operators against a scalar reference written here, independently of src/ops:
// every (type, op) pair MPI defines, every kernel form, odd lengths, pointers off vector
// alignment, aliasing, special float values, wrapping integers and the MAXLOC tie rule.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <complex>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "ops/reduce.hpp"
#include "shmcoll/shmcoll.hpp"
#include "test_support.hpp"

namespace {

using shmcoll::Dtype;
using shmcoll::Op;

template <typename T>
constexpr bool is_pair = requires(T t) {
  t.index;
};
template <typename T>
constexpr bool is_complex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
template <typename T>
constexpr bool is_half =
    std::is_same_v<T, shmcoll::float16> || std::is_same_v<T, shmcoll::bfloat16>;

float half_to_float(shmcoll::float16 h) {
  return static_cast<float>(std::bit_cast<_Float16>(h.bits));
}
float half_to_float(shmcoll::bfloat16 h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h.bits) << 16);
}

// Rounds by choosing the nearer of the two neighbouring bfloat16 values (ties to even): a
// different method from the library's integer rounding trick.
shmcoll::bfloat16 float_to_bf16(float x) {
  if (std::isnan(x))
    return {static_cast<std::uint16_t>((std::bit_cast<std::uint32_t>(x) >> 16) | 0x40)};
  const auto low = static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16);
  const auto high = static_cast<std::uint16_t>(low + 1);
  const double d_low = half_to_float(shmcoll::bfloat16{low});
  // Past the largest finite value, IEEE rounding treats 2^128 as the next value up.
  const double d_high = (high & 0x7f80) == 0x7f80 ? std::copysign(0x1p128, x)
                                                  : half_to_float(shmcoll::bfloat16{high});
  if (d_low == x) return {low};  // exact (infinities too)
  const double below = std::fabs(x - d_low), above = std::fabs(d_high - x);
  if (below < above || (below == above && (low & 1) == 0)) return {low};
  return {high};
}
shmcoll::float16 float_to_half(float x, shmcoll::float16) {
  return {std::bit_cast<std::uint16_t>(static_cast<_Float16>(x))};
}
shmcoll::bfloat16 float_to_half(float x, shmcoll::bfloat16) {
  return float_to_bf16(x);
}

// a op b, in the simplest C++ that says what MPI means.
template <typename T>
T reference(Op::Kind op, T a, T b) {
  if (op == Op::replace) return b;
  if (op == Op::no_op) return a;
  if constexpr (is_pair<T>) {
    if (a.value == b.value) return T{a.value, std::min(a.index, b.index)};
    const bool a_greater = a.value > b.value;
    if (op == Op::maxloc) return a_greater ? a : b;
    if (op == Op::minloc) return a_greater ? b : a;
  } else if constexpr (is_complex<T>) {
    if (op == Op::sum) return T(a.real() + b.real(), a.imag() + b.imag());
    if (op == Op::prod) {  // each component rounded once (fused), as the library promises
      return T(std::fma(a.real(), b.real(), -(a.imag() * b.imag())),
               std::fma(a.real(), b.imag(), a.imag() * b.real()));
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    if (op == Op::land) return a && b;
    if (op == Op::lor) return a || b;
    if (op == Op::lxor) return a != b;
  } else if constexpr (std::is_same_v<T, std::byte>) {
    if (op == Op::band) return a & b;
    if (op == Op::bor) return a | b;
    if (op == Op::bxor) return a ^ b;
  } else if constexpr (std::is_integral_v<T>) {
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    switch (op) {
      case Op::sum:
        return static_cast<T>(ua + ub);
      case Op::prod:
        return static_cast<T>(ua * ub);
      case Op::min:
        return a <= b ? a : b;
      case Op::max:
        return a >= b ? a : b;
      case Op::land:
        return (a != 0) && (b != 0);
      case Op::lor:
        return (a != 0) || (b != 0);
      case Op::lxor:
        return (a != 0) != (b != 0);
      case Op::band:
        return static_cast<T>(ua & ub);
      case Op::bor:
        return static_cast<T>(ua | ub);
      case Op::bxor:
        return static_cast<T>(ua ^ ub);
      default:
        break;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    switch (op) {  // min and max keep `a` when the comparison is false (equal or NaN)
      case Op::sum:
        return a + b;
      case Op::prod:
        return a * b;
      case Op::min:
        return b < a ? b : a;
      case Op::max:
        return a < b ? b : a;
      default:
        break;
    }
  }
  ADD_FAILURE() << "no reference for op " << op;
  return a;
}

template <typename T>
T reference_fold(Op::Kind op, const std::vector<const T*>& inputs, std::size_t i) {
  if constexpr (is_half<T>) {  // in float, rounded once
    float acc = half_to_float(inputs[0][i]);
    for (std::size_t k = 1; k < inputs.size(); ++k)
      acc = reference(op, acc, half_to_float(inputs[k][i]));
    return float_to_half(acc, T{});
  } else {
    T acc = inputs[0][i];
    for (std::size_t k = 1; k < inputs.size(); ++k) acc = reference(op, acc, inputs[k][i]);
    return acc;
  }
}

// Equal bits, except that any NaN equals any NaN (payloads depend on operand order in hardware)
// and padding is ignored.
template <typename T>
bool same(const T& a, const T& b) {
  if constexpr (is_pair<T>) {
    return same(a.value, b.value) && a.index == b.index;
  } else if constexpr (is_complex<T>) {
    return same(a.real(), b.real()) && same(a.imag(), b.imag());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
    return std::signbit(a) == std::signbit(b) && a == b;
  } else if constexpr (is_half<T>) {
    return same(half_to_float(a), half_to_float(b));
  } else {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  }
}

template <typename T>
std::string describe(const T& x) {
  std::ostringstream s;
  s.precision(17);
  if constexpr (is_pair<T>)
    s << "(" << x.value << ", " << x.index << ")";
  else if constexpr (is_complex<T>)
    s << x;
  else if constexpr (is_half<T>)
    s << half_to_float(x) << " [" << std::hex << x.bits << "]";
  else if constexpr (std::is_same_v<T, std::byte>)
    s << static_cast<int>(x);
  else
    s << +x;
  return s.str();
}

template <typename V>
V random_value(std::mt19937_64& rng) {
  if constexpr (std::is_floating_point_v<V>) {
    static const V specials[] = {std::numeric_limits<V>::quiet_NaN(),
                                 std::numeric_limits<V>::infinity(),
                                 -std::numeric_limits<V>::infinity(),
                                 V(-0.0),
                                 V(0.0),
                                 V(1e30),
                                 V(-1.5)};
    if (rng() % 8 == 0) return specials[rng() % std::size(specials)];
    return static_cast<V>(std::uniform_real_distribution<double>(-4, 4)(rng));
  } else if constexpr (std::is_same_v<V, bool>) {
    return rng() % 2 == 0;
  } else {
    V value;
    const std::uint64_t bits = rng();
    std::memcpy(&value, &bits, sizeof(V));
    return value;
  }
}

template <typename T>
T random_element(std::mt19937_64& rng) {
  if constexpr (is_pair<T>) {  // few distinct values, so ties are common
    T pair{};
    pair.value = static_cast<decltype(pair.value)>(rng() % 4);
    pair.index = static_cast<int>(rng() % 1000) - 500;
    return pair;
  } else if constexpr (is_complex<T>) {
    using V = typename T::value_type;
    return T(random_value<V>(rng), random_value<V>(rng));
  } else if constexpr (is_half<T>) {
    return T{static_cast<std::uint16_t>(rng())};
  } else {
    return random_value<T>(rng);
  }
}

struct Case {
  std::size_t count;
  int inputs;
  int out_alias;  // -1: separate output, else the input it overwrites
};

// Runs every kernel form on one (type, op) and returns the number of wrong elements.
using Kernel = void (*)(Dtype, const Op&, void*, const void* const*, int, std::size_t);

template <typename T>
int check_pair(Kernel kernel, Dtype dtype, Op::Kind op, const Case& c, std::mt19937_64& rng) {
  // One element of offset puts every pointer off 64-byte alignment.
  // (Arrays, not vectors: std::vector<bool> has no data().)
  std::vector<std::unique_ptr<T[]>> storage;
  std::vector<const T*> inputs;
  for (int k = 0; k < c.inputs; ++k) {
    storage.emplace_back(new T[c.count + 1]());
    for (std::size_t i = 0; i <= c.count; ++i) storage[k][i] = random_element<T>(rng);
    inputs.push_back(storage[k].get() + 1);
  }
  std::unique_ptr<T[]> want(new T[c.count + 1]());
  for (std::size_t i = 0; i < c.count; ++i) want[i] = reference_fold(op, inputs, i);

  std::unique_ptr<T[]> separate(new T[c.count + 1]());
  T* out = c.out_alias < 0 ? separate.get() + 1 : storage[c.out_alias].get() + 1;
  std::vector<const void*> raw(inputs.begin(), inputs.end());
  kernel(dtype, Op(op), out, raw.data(), c.inputs, c.count);
  int bad = 0;
  for (std::size_t i = 0; i < c.count; ++i) {
    if (!same(out[i], want[i])) {
      if (bad++ == 0) {
        ADD_FAILURE() << shmcoll::dtype_name(dtype) << " " << shmcoll::op_name(Op(op)) << " count "
                      << c.count << " inputs " << c.inputs << " alias " << c.out_alias
                      << ": first wrong element " << i << ": got " << describe(out[i]) << ", want "
                      << describe(want[i]);
      }
    }
  }
  return bad;
}

TEST(Ops, EveryDefinedPairMatchesTheReference) {
  std::mt19937_64 rng(42);
  int pairs = 0;
  for (int d = 0; d < shmcoll::kDtypeCount; ++d) {
    const auto dtype = static_cast<Dtype>(d);
    for (int o = 0; o < shmcoll::kPredefinedOpCount; ++o) {
      const auto op = static_cast<Op::Kind>(o);
      if (!shmcoll::op_defined_on(op, dtype)) continue;
      ++pairs;
      for (std::size_t count : {0, 1, 3, 17, 63, 64, 65, 1000, 5003}) {
        for (Case c : {Case{count, 2, -1}, Case{count, 2, 1}, Case{count, 3, 0}, Case{count, 5, -1},
                       Case{count, 8, 7}, Case{count, 8, 5}}) {
          // The SIMD build (the best level this CPU has) and the build without SIMD.
          for (Kernel kernel : {&shmcoll::ops::reduce_kary, &shmcoll::ops::scalar::reduce_kary}) {
            shmcoll::visit_dtype(
                dtype, [&](auto zero) { check_pair<decltype(zero)>(kernel, dtype, op, c, rng); });
          }
        }
      }
    }
  }
  EXPECT_EQ(pairs, 8 * 12 + 5 * 6 + 2 * 4 + 5 + 5 + 2 * 2 + 8 * 4);  // MPI's table, counted
}

TEST(Ops, TwoInputFormsMatchTheKaryForm) {
  const std::vector<float> a = {1, -2, 3.5f}, b = {10, 20, -30};
  std::vector<float> out(3), inout = b;
  shmcoll::ops::reduce_pair(Dtype::f32, Op::sum, a.data(), b.data(), out.data(), 3);
  shmcoll::ops::reduce_into(Dtype::f32, Op::sum, a.data(), inout.data(), 3);
  EXPECT_EQ(out, (std::vector<float>{11, 18, -26.5f}));
  EXPECT_EQ(inout, out);
  // replace is a op b = b: the in/out form keeps inout, the pair form takes b.
  std::vector<std::int32_t> x = {1, 2}, y = {7, 8};
  shmcoll::reduce_local(x.data(), y.data(), 2, Dtype::i32, Op::replace);
  EXPECT_EQ(y, (std::vector<std::int32_t>{7, 8}));
  shmcoll::reduce_local(x.data(), y.data(), 2, Dtype::i32, Op::no_op);
  EXPECT_EQ(y, (std::vector<std::int32_t>{1, 2}));
}

TEST(Ops, IntegerOverflowWrapsAsInC) {
  std::vector<std::int8_t> a = {100, -128, 127}, b = {100, -1, 1};
  shmcoll::reduce_local(a.data(), b.data(), 3, Dtype::i8, Op::sum);
  EXPECT_EQ(b, (std::vector<std::int8_t>{-56, 127, -128}));  // Open MPI's op/avx saturates here
  std::vector<std::uint8_t> c(1000, 200), d(1000, 100);
  shmcoll::reduce_local(c.data(), d.data(), 1000, Dtype::u8, Op::sum);
  EXPECT_EQ(d, std::vector<std::uint8_t>(1000, 44));
  std::vector<std::int64_t> e = {INT64_MAX}, f = {2};
  shmcoll::reduce_local(e.data(), f.data(), 1, Dtype::i64, Op::prod);
  EXPECT_EQ(f[0], -2);
}

TEST(Ops, MaxlocAndMinlocBreakTiesByLowestIndex) {
  std::vector<shmcoll::double_int> a = {{5.0, 7}, {1.0, 3}, {2.0, 9}};
  std::vector<shmcoll::double_int> b = {{5.0, 2}, {1.0, 8}, {3.0, 1}};
  auto max = b, min = b;
  shmcoll::reduce_local(a.data(), max.data(), 3, Dtype::double_int, Op::maxloc);
  shmcoll::reduce_local(a.data(), min.data(), 3, Dtype::double_int, Op::minloc);
  EXPECT_EQ(max[0].index, 2);
  EXPECT_EQ(max[1].index, 3);
  EXPECT_EQ(max[2].index, 1);
  EXPECT_EQ(max[2].value, 3.0);
  EXPECT_EQ(min[0].index, 2);
  EXPECT_EQ(min[2].index, 9);
}

TEST(Ops, SixteenBitFloatsRoundOnceFromFloat) {
  EXPECT_EQ(shmcoll::to_float16(1.0f).bits, 0x3c00);
  EXPECT_EQ(shmcoll::to_bfloat16(1.0f).bits, 0x3f80);
  EXPECT_EQ(shmcoll::to_float(shmcoll::bfloat16{0xc0a0}), -5.0f);
  // 1 + 2^-8 lies halfway between two bfloat16 values: ties go to the even one (1.0).
  EXPECT_EQ(shmcoll::to_bfloat16(1.0f + 1.0f / 256).bits, 0x3f80);
  // 1 + 7 * 2^-8 in fp32 is 1.02734375, which rounds to 1.03125. Rounding after every step would
  // round each 1 + 2^-8 (a tie) back to 1.0 and end at 1.0.
  std::vector<shmcoll::bfloat16> v(8, shmcoll::to_bfloat16(1.0f / 256));
  v[0] = shmcoll::to_bfloat16(1.0f);
  std::vector<const void*> in;
  for (auto& x : v) in.push_back(&x);
  shmcoll::bfloat16 out;
  shmcoll::ops::reduce_kary(Dtype::bf16, Op::sum, &out, in.data(), 8, 1);
  EXPECT_EQ(shmcoll::to_float(out), 1.03125f);
}

TEST(Ops, UndefinedPairsAreRejectedBeforeAnyDataMoves) {
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  const auto expect_rejected = [&](Dtype dtype, Op op, const char* words) {
    try {
      shmcoll::reduce_local(a.data(), b.data(), 1, dtype, op);
      ADD_FAILURE() << "accepted " << shmcoll::op_name(op) << " on " << shmcoll::dtype_name(dtype);
    } catch (const shmcoll::Error& error) {
      EXPECT_EQ(error.code(), shmcoll::Errc::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    }
    EXPECT_EQ(b[0], 2.0f);
  };
  expect_rejected(Dtype::f32, Op::band, "band is not defined on dtype f32");
  expect_rejected(Dtype::f64, Op::land, "integer types and bool");
  expect_rejected(Dtype::i32, Op::maxloc, "pair types");
  expect_rejected(Dtype::character, Op::sum, "on dtype char");
  expect_rejected(Dtype::boolean, Op::sum, "on dtype bool");
  expect_rejected(Dtype::complex_f32, Op::max, "integer and floating");
  expect_rejected(Dtype::byte, Op::lor, "on dtype byte");
  expect_rejected(static_cast<Dtype>(77), Op::sum, "dtype 77");
  try {
    shmcoll::reduce_local(a.data(), b.data(), std::int64_t{1} << 62, Dtype::f64, Op::sum);
    ADD_FAILURE() << "accepted an overflowing count";
  } catch (const shmcoll::Error& error) {
    EXPECT_NE(std::string(error.what()).find("more bytes than any address space"),
              std::string::npos)
        << error.what();
  }
}

// The shared 2x2 matrix product, checking what the kernel hands a user operation: the type and
// whole matrices.
void matrix_product(const void* in, void* inout, std::size_t len, Dtype dtype) {
  ASSERT_EQ(dtype, Dtype::u64);
  ASSERT_EQ(len % 4, 0u);
  shmcoll::testing::matrix_product(in, inout, len, dtype);
}

TEST(Ops, NonCommutativeUserOpKeepsInputOrderInTheKaryForm) {
  const Op op = Op::create(matrix_product, false);
  EXPECT_FALSE(op.commutative());
  constexpr int kInputs = 6;
  constexpr std::size_t kMatrices = 3000;  // spans several of the kernel's blocks
  std::vector<std::vector<std::uint64_t>> data(kInputs, std::vector<std::uint64_t>(4 * kMatrices));
  std::vector<const void*> in;
  for (int k = 0; k < kInputs; ++k) {
    for (std::size_t m = 0; m < kMatrices; ++m) {
      const std::uint64_t s = m * 31 + static_cast<std::uint64_t>(k) * 7;
      std::uint64_t* x = &data[k][4 * m];
      x[0] = s % 5 + 1, x[1] = s % 3, x[2] = (s + 1) % 4, x[3] = 1;
    }
    in.push_back(data[k].data());
  }
  for (int alias : {-1, 0, kInputs - 1}) {
    std::vector<std::vector<std::uint64_t>> copy = data;
    std::vector<const void*> inputs;
    for (auto& v : copy) inputs.push_back(v.data());
    std::vector<std::uint64_t> separate(4 * kMatrices);
    auto* out = alias < 0 ? separate.data() : copy[alias].data();
    shmcoll::ops::reduce_kary(Dtype::u64, op, out, inputs.data(), kInputs, 4 * kMatrices);
    for (std::size_t m = 0; m < kMatrices; m += 97) {
      std::uint64_t want[4] = {1, 0, 0, 1};  // in[0] * in[1] * ... * in[k-1], left to right
      for (int k = 0; k < kInputs; ++k) {
        shmcoll::testing::multiply_2x2(want, &data[k][4 * m], want);
      }
      ASSERT_TRUE(std::equal(want, want + 4, out + 4 * m)) << "matrix " << m << " alias " << alias;
    }
  }
}

}  // namespace
