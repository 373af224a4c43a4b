// What each element type is and how each operation combines two elements of it: the one place
// that defines MPI's operation-by-type table and the arithmetic (wrapping integers, fp32 for the
// 16-bit floats, MAXLOC's tie rule).
#pragma once

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "shmcoll/types.hpp"

namespace shmcoll::ops {

// MPI's classes of element types (MPI-4.0 section 6.9.2), which decide the valid operations.
enum class TypeClass { integer, floating, complex, logical, byte, character, pair };

template <typename T>
constexpr TypeClass type_class_of() {
  if constexpr (std::is_same_v<T, bool>)
    return TypeClass::logical;
  else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, wchar_t>)
    return TypeClass::character;
  else if constexpr (std::is_integral_v<T>)
    return TypeClass::integer;
  else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, float16> ||
                     std::is_same_v<T, bfloat16>)
    return TypeClass::floating;
  else if constexpr (std::is_same_v<T, std::complex<float>> ||
                     std::is_same_v<T, std::complex<double>>)
    return TypeClass::complex;
  else if constexpr (std::is_same_v<T, std::byte>)
    return TypeClass::byte;
  else
    return TypeClass::pair;
}

inline TypeClass type_class(Dtype dtype) {
  return visit_dtype(dtype, [](auto zero) { return type_class_of<decltype(zero)>(); });
}

constexpr bool defined_on(Op::Kind op, TypeClass type) {
  using C = TypeClass;
  switch (op) {
    case Op::sum:
    case Op::prod:
      return type == C::integer || type == C::floating || type == C::complex;
    case Op::min:
    case Op::max:
      return type == C::integer || type == C::floating;
    case Op::land:
    case Op::lor:
    case Op::lxor:
      return type == C::integer || type == C::logical;
    case Op::band:
    case Op::bor:
    case Op::bxor:
      return type == C::integer || type == C::byte;
    case Op::maxloc:
    case Op::minloc:
      return type == C::pair;
    case Op::replace:
    case Op::no_op:
      return true;
    case Op::user:
      break;
  }
  return false;
}

// The 16-bit floats are combined in float: Accumulator<T> is what a reduction computes in.
template <typename T>
struct Accumulator {
  using type = T;
};
template <>
struct Accumulator<float16> {
  using type = float;
};
template <>
struct Accumulator<bfloat16> {
  using type = float;
};

// IEEE binary16 <-> binary32 in integer and float arithmetic that vectorizes at every SIMD level
// (GCC 12 converts _Float16 one element at a time through libgcc unless the CPU has AVX512-FP16).
[[gnu::always_inline]] inline float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = std::uint32_t{half & 0x8000u} << 16;
  const std::uint32_t magnitude = std::uint32_t{half & 0x7fffu} << 13;  // exponent and mantissa
  const std::uint32_t exponent = magnitude & (0x7c00u << 13);
  // Selects, not branches, so the loop vectorizes.
  const std::uint32_t rebiased = magnitude + ((127 - 15) << 23);
  const std::uint32_t special = rebiased + ((128 - 16) << 23);  // infinity, NaN: all-ones exponent
  // Subnormal: scale the mantissa as an integer-valued float (exact).
  const float subnormal =
      std::bit_cast<float>(rebiased + (1u << 23)) - std::bit_cast<float>(113u << 23);
  const std::uint32_t bits = exponent == 0                 ? std::bit_cast<std::uint32_t>(subnormal)
                             : exponent == (0x7c00u << 13) ? special
                                                           : rebiased;
  return std::bit_cast<float>(bits | sign);
}

// Rounds to nearest even; NaN becomes the quiet NaN 0x7e00 (sign kept).
[[gnu::always_inline]] inline std::uint16_t float_to_half(float value) {
  const std::uint32_t all = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = all & 0x80000000u, magnitude = all ^ sign;
  // All three cases computed, one selected: the loop vectorizes.
  const std::uint32_t too_big = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN, or infinity
  const std::uint32_t magic = ((127 - 15) + (23 - 10) + 1)
                              << 23;  // float addition rounds subnormals
  const std::uint32_t tiny =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(magnitude) + std::bit_cast<float>(magic)) -
      magic;
  const std::uint32_t odd = (magnitude >> 13) & 1u;  // normal: rebias, round 13 bits to even
  const std::uint32_t normal =
      (magnitude + (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfffu + odd) >> 13;
  const std::uint32_t half = magnitude >= (127u + 16) << 23 ? too_big
                             : magnitude < 113u << 23       ? tiny
                                                            : normal;
  return static_cast<std::uint16_t>(half | (sign >> 16));
}

template <typename T>
[[gnu::always_inline]] inline auto widen(T value) {
  if constexpr (std::is_same_v<T, float16>)
    return half_to_float(value.bits);
  else if constexpr (std::is_same_v<T, bfloat16>)
    return std::bit_cast<float>(std::uint32_t{value.bits} << 16);
  else
    return value;
}

// Rounds to nearest even, as the hardware conversions do; NaN stays NaN (quiet).
template <typename T>
[[gnu::always_inline]] inline T narrow(typename Accumulator<T>::type value) {
  if constexpr (std::is_same_v<T, float16>) {
    return float16{float_to_half(value)};
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    return bfloat16{static_cast<std::uint16_t>(nan ? (bits >> 16) | 0x40u : rounded >> 16)};
  } else {
    return value;
  }
}

// Integer arithmetic in an unsigned type at least as wide as unsigned int, so overflow wraps
// instead of being undefined (and u16 * u16 cannot overflow a promoted int).
// (8-bit values use int: their products fit, and GCC then multiplies in 16-bit lanes instead of
// widening every byte to 32 bits.)
template <typename T>
using WrapType = std::conditional_t<
    sizeof(T) == 1, int,
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>>;

// a op b for one operation on accumulator values; `a` comes from the lower rank.
template <Op::Kind K, typename A>
struct Combine {
  [[gnu::always_inline]] A operator()(A a, A b) const {
    if constexpr (K == Op::sum) {
      if constexpr (std::is_integral_v<A>)
        return static_cast<A>(WrapType<A>(a) + WrapType<A>(b));
      else
        return a + b;
    } else if constexpr (K == Op::prod) {
      if constexpr (std::is_integral_v<A>) {
        return static_cast<A>(WrapType<A>(a) * WrapType<A>(b));
      } else if constexpr (type_class_of<A>() == TypeClass::complex) {
        // The textbook product with each component fused explicitly: GCC's vectorizer fuses
        // complex products (vfmaddsub) even under -ffp-contract=off, so only an explicit fma
        // gives the same bits at every SIMD level. (std::complex's operator* adds C99 Annex G's
        // inf/NaN recovery, a library call per element.)
        return A(std::fma(a.real(), b.real(), -(a.imag() * b.imag())),
                 std::fma(a.real(), b.imag(), a.imag() * b.real()));
      } else {
        return a * b;
      }
    } else if constexpr (K == Op::min) {
      return b < a ? b : a;
    } else if constexpr (K == Op::max) {
      return a < b ? b : a;
    } else if constexpr (K == Op::land) {
      return static_cast<A>((a != A{}) & (b != A{}));
    } else if constexpr (K == Op::lor) {
      return static_cast<A>((a != A{}) | (b != A{}));
    } else if constexpr (K == Op::lxor) {
      return static_cast<A>((a != A{}) ^ (b != A{}));
    } else if constexpr (K == Op::band) {
      return static_cast<A>(a & b);
    } else if constexpr (K == Op::bor) {
      return static_cast<A>(a | b);
    } else if constexpr (K == Op::bxor) {
      return static_cast<A>(a ^ b);
    } else if constexpr (K == Op::maxloc || K == Op::minloc) {
      // As Open MPI: a if it wins, on a tie the lower index, otherwise (also for NaN) b. Selects,
      // not branches, so the loop can vectorize.
      const bool a_wins = K == Op::maxloc ? b.value < a.value : a.value < b.value;
      const bool tie = a.value == b.value;
      const auto tie_index = a.index < b.index ? a.index : b.index;
      A result;
      result.value = a_wins || tie ? a.value : b.value;
      result.index = a_wins ? a.index : tie ? tie_index : b.index;
      return result;
    } else if constexpr (K == Op::replace) {
      return b;
    } else {
      static_assert(K == Op::no_op);
      return a;
    }
  }
};

}  // namespace shmcoll::ops
