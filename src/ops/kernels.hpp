// The k-ary elementwise kernel, written once as plain loops that GCC vectorizes, and the lists of
// element types that instantiate it. simd_*.cpp compile it per x86 SIMD level (target_clones);
// reduce_scalar.cpp compiles it without vectorization, as the benchmark's scalar baseline.
//
//   out[i] = in[0][i] op in[1][i] op ... op in[k-1][i]     (left to right: rank order)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/element.hpp"

namespace shmcoll::ops::kernels {

// Blocks of 8 KiB of accumulators stay in L1 while the inputs stream past them.
inline constexpr std::size_t kBlockBytes = 8192;
// The first pass combines up to this many inputs, later passes the block and up to one fewer.
// Reading all of them in one loop keeps every stream in flight at once; two passes of four ran
// at half the speed at 8 inputs (16 MiB, f32 sum).
inline constexpr int kInputsPerPass = 8;

inline bool overlaps_any(const void* out, const void* const* inputs, int first, int last,
                         std::size_t bytes) {
  const auto* o = static_cast<const char*>(out);
  for (int k = first; k < last; ++k) {
    const auto* in = static_cast<const char*>(inputs[k]);
    if (o < in + bytes && in < o + bytes) return true;
  }
  return false;
}

// block[i] = in[0][i] op ... op in[G-1][i], or block[i] op in[0][i] op ... when `accumulate`.
// `block` may be one of the inputs (an in-place reduction works on its own buffer): not
// __restrict, so GCC vectorizes behind a run-time overlap check instead of assuming none.
template <typename T, typename A, typename F, int G, bool accumulate>
[[gnu::always_inline]] inline void combine_pass(A* block, const T* const* in, std::size_t n) {
  const F f;
  for (std::size_t i = 0; i < n; ++i) {
    A acc = accumulate ? block[i] : widen(in[0][i]);
    for (int g = accumulate ? 0 : 1; g < G; ++g) acc = f(acc, widen(in[g][i]));
    block[i] = acc;
  }
}

// The first pass takes 2 to 8 inputs. Later passes (more than 8 inputs: large teams) fold in 7
// at a time and any rest one by one, which keeps the number of compiled loops, and the build
// time, down.
template <typename T, typename A, typename F>
[[gnu::always_inline]] inline void combine_first(A* block, const T* const* in, int group,
                                                 std::size_t n) {
  switch (group) {
    case 1:
      return combine_pass<T, A, F, 1, false>(block, in, n);
    case 2:
      return combine_pass<T, A, F, 2, false>(block, in, n);
    case 3:
      return combine_pass<T, A, F, 3, false>(block, in, n);
    case 4:
      return combine_pass<T, A, F, 4, false>(block, in, n);
    case 5:
      return combine_pass<T, A, F, 5, false>(block, in, n);
    case 6:
      return combine_pass<T, A, F, 6, false>(block, in, n);
    case 7:
      return combine_pass<T, A, F, 7, false>(block, in, n);
    default:
      return combine_pass<T, A, F, 8, false>(block, in, n);
  }
}

// Works on the result in place in `out` when that is safe: the element types match and `out`
// aliases no input read after the first pass. Otherwise a private block holds the result.
template <typename T, Op::Kind K>
[[gnu::always_inline]] inline void reduce_blocks(void* out_bytes, const void* const* inputs,
                                                 int input_count, std::size_t count) {
  using A = typename Accumulator<T>::type;
  using F = Combine<K, A>;
  constexpr std::size_t kBlock = kBlockBytes / sizeof(A) > 0 ? kBlockBytes / sizeof(A) : 1;
  T* out = static_cast<T*>(out_bytes);
  const int first_pass = std::min(input_count, kInputsPerPass);
  const bool direct = std::is_same_v<A, T> &&
                      !overlaps_any(out, inputs, first_pass, input_count, count * sizeof(T));
  // One pass needs no blocks: a single loop streams best.
  const std::size_t block_count = direct && input_count == first_pass ? count : kBlock;
  alignas(64) A private_block[kBlock];
  const T* in[kInputsPerPass];
  for (std::size_t base = 0; base < count; base += block_count) {
    const std::size_t n = std::min(block_count, count - base);
    A* block = private_block;
    if constexpr (std::is_same_v<A, T>) {
      if (direct) block = out + base;
    }
    for (int g = 0; g < first_pass; ++g) in[g] = static_cast<const T*>(inputs[g]) + base;
    combine_first<T, A, F>(block, in, first_pass, n);
    for (int k = first_pass; k < input_count;) {
      const bool seven = input_count - k >= kInputsPerPass - 1;
      for (int g = 0; g < (seven ? 7 : 1); ++g) in[g] = static_cast<const T*>(inputs[k + g]) + base;
      if (seven) {
        combine_pass<T, A, F, kInputsPerPass - 1, true>(block, in, n);
      } else {
        combine_pass<T, A, F, 1, true>(block, in, n);
      }
      k += seven ? kInputsPerPass - 1 : 1;
    }
    if (block == private_block) {
      for (std::size_t i = 0; i < n; ++i) out[base + i] = narrow<T>(block[i]);
    }
  }
}

// One switch per element type over the operations MPI defines on it.
template <typename T>
[[gnu::always_inline]] inline void reduce_typed(Op::Kind op, void* out, const void* const* inputs,
                                                int input_count, std::size_t count) {
  constexpr TypeClass kClass = type_class_of<T>();
#define SHMCOLL_CASE(kind)                                                \
  case Op::kind:                                                          \
    if constexpr (defined_on(Op::kind, kClass))                           \
      return reduce_blocks<T, Op::kind>(out, inputs, input_count, count); \
    break;
  switch (op) {
    SHMCOLL_CASE(sum)
    SHMCOLL_CASE(prod)
    SHMCOLL_CASE(min)
    SHMCOLL_CASE(max)
    SHMCOLL_CASE(land)
    SHMCOLL_CASE(lor)
    SHMCOLL_CASE(lxor)
    SHMCOLL_CASE(band)
    SHMCOLL_CASE(bor)
    SHMCOLL_CASE(bxor)
    SHMCOLL_CASE(maxloc)
    SHMCOLL_CASE(minloc)
    SHMCOLL_CASE(replace)
    SHMCOLL_CASE(no_op)
    case Op::user:
      break;
  }
#undef SHMCOLL_CASE
  __builtin_trap();  // callers check op_defined_on first
}

}  // namespace shmcoll::ops::kernels

// The element types in three groups (one SIMD translation unit each): X(name, C++ type) for each.
#define SHMCOLL_INTEGER_TYPES(X)                                                  \
  X(i8, std::int8_t)                                                              \
  X(i16, std::int16_t)                                                            \
  X(i32, std::int32_t)                                                            \
  X(i64, std::int64_t)                                                            \
  X(u8, std::uint8_t)                                                             \
  X(u16, std::uint16_t)                                                           \
  X(u32, std::uint32_t) X(u64, std::uint64_t) X(boolean, bool) X(character, char) \
      X(wchar, wchar_t) X(byte, std::byte)
#define SHMCOLL_FLOATING_TYPES(X) \
  X(f32, float)                   \
  X(f64, double)                  \
  X(f16, float16)                 \
  X(bf16, bfloat16)               \
  X(long_double, long double)     \
  X(complex_f32, std::complex<float>) X(complex_f64, std::complex<double>)
#define SHMCOLL_PAIR_TYPES(X)                                                             \
  X(float_int, float_int)                                                                 \
  X(double_int, double_int)                                                               \
  X(long_int, long_int)                                                                   \
  X(int_int, int_int)                                                                     \
  X(short_int, short_int) X(long_double_int, long_double_int) X(float_float, float_float) \
      X(double_double, double_double)
#define SHMCOLL_ALL_TYPES(X) \
  SHMCOLL_INTEGER_TYPES(X) SHMCOLL_FLOATING_TYPES(X) SHMCOLL_PAIR_TYPES(X)

// One named function per type (GCC's target_clones takes no templates):
//   void reduce_<name>(Op::Kind op, void* out, const void* const* inputs, int k, size_t count)
#define SHMCOLL_KERNEL_SIGNATURE(name)                                                   \
  void reduce_##name(Op::Kind op, void* out, const void* const* inputs, int input_count, \
                     std::size_t count)
#define SHMCOLL_DECLARE_KERNEL(name, T) SHMCOLL_KERNEL_SIGNATURE(name);
#define SHMCOLL_DEFINE_KERNEL(name, T)                             \
  SHMCOLL_KERNEL_SIGNATURE(name) {                                 \
    kernels::reduce_typed<T>(op, out, inputs, input_count, count); \
  }

// Calls reduce_<name> for `dtype` (in the enclosing namespace).
#define SHMCOLL_DISPATCH_CASE(name, T) \
  case Dtype::name:                    \
    return reduce_##name(op.kind(), out, inputs, input_count, count);
