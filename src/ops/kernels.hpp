// The k-ary elementwise kernel, written once as plain loops that GCC vectorizes. Included by
// reduce.cpp (compiled per x86 SIMD level through target_clones) and by reduce_scalar.cpp
// (compiled without vectorization: the benchmark's scalar baseline), each inside its own
// namespace, with SHMCOLL_KERNEL_ATTRIBUTES saying how to compile the per-type entry points.
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
// The first pass combines up to this many inputs, later passes the block and up to one fewer:
// several streams in flight keep the memory system busy without spilling registers.
inline constexpr int kInputsPerPass = 4;

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
template <typename T, typename A, typename F, int G, bool accumulate>
[[gnu::always_inline]] inline void combine_pass(A* __restrict block, const T* const* in,
                                                std::size_t n) {
  const F f;
  for (std::size_t i = 0; i < n; ++i) {
    A acc = accumulate ? block[i] : widen(in[0][i]);
    for (int g = accumulate ? 0 : 1; g < G; ++g) acc = f(acc, widen(in[g][i]));
    block[i] = acc;
  }
}

template <typename T, typename A, typename F, bool accumulate>
[[gnu::always_inline]] inline void combine_group(A* block, const T* const* in, int group,
                                                 std::size_t n) {
  switch (group) {
    case 1:
      return combine_pass<T, A, F, 1, accumulate>(block, in, n);
    case 2:
      return combine_pass<T, A, F, 2, accumulate>(block, in, n);
    case 3:
      return combine_pass<T, A, F, 3, accumulate>(block, in, n);
    default:
      return combine_pass<T, A, F, 4, accumulate>(block, in, n);
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
    combine_group<T, A, F, false>(block, in, first_pass, n);
    for (int k = first_pass; k < input_count; k += kInputsPerPass - 1) {
      const int group = std::min(kInputsPerPass - 1, input_count - k);
      for (int g = 0; g < group; ++g) in[g] = static_cast<const T*>(inputs[k + g]) + base;
      combine_group<T, A, F, true>(block, in, group, n);
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

// Defines `void reduce_<name>(Op::Kind, void* out, const void* const* inputs, int k, size_t n)`
// for every element type, and `reduce_dispatch(Dtype, ...)` choosing among them. GCC's
// target_clones takes only named non-template functions, hence one function per type.
#define SHMCOLL_DEFINE_KERNELS(ATTRIBUTES)                                             \
  SHMCOLL_KERNEL(ATTRIBUTES, i8, std::int8_t)                                          \
  SHMCOLL_KERNEL(ATTRIBUTES, i16, std::int16_t)                                        \
  SHMCOLL_KERNEL(ATTRIBUTES, i32, std::int32_t)                                        \
  SHMCOLL_KERNEL(ATTRIBUTES, i64, std::int64_t)                                        \
  SHMCOLL_KERNEL(ATTRIBUTES, u8, std::uint8_t)                                         \
  SHMCOLL_KERNEL(ATTRIBUTES, u16, std::uint16_t)                                       \
  SHMCOLL_KERNEL(ATTRIBUTES, u32, std::uint32_t)                                       \
  SHMCOLL_KERNEL(ATTRIBUTES, u64, std::uint64_t)                                       \
  SHMCOLL_KERNEL(ATTRIBUTES, f32, float)                                               \
  SHMCOLL_KERNEL(ATTRIBUTES, f64, double)                                              \
  SHMCOLL_KERNEL(ATTRIBUTES, f16, float16)                                             \
  SHMCOLL_KERNEL(ATTRIBUTES, bf16, bfloat16)                                           \
  SHMCOLL_KERNEL(ATTRIBUTES, long_double, long double)                                 \
  SHMCOLL_KERNEL(ATTRIBUTES, complex_f32, std::complex<float>)                         \
  SHMCOLL_KERNEL(ATTRIBUTES, complex_f64, std::complex<double>)                        \
  SHMCOLL_KERNEL(ATTRIBUTES, boolean, bool)                                            \
  SHMCOLL_KERNEL(ATTRIBUTES, character, char)                                          \
  SHMCOLL_KERNEL(ATTRIBUTES, wchar, wchar_t)                                           \
  SHMCOLL_KERNEL(ATTRIBUTES, byte, std::byte)                                          \
  SHMCOLL_KERNEL(ATTRIBUTES, float_int, float_int)                                     \
  SHMCOLL_KERNEL(ATTRIBUTES, double_int, double_int)                                   \
  SHMCOLL_KERNEL(ATTRIBUTES, long_int, long_int)                                       \
  SHMCOLL_KERNEL(ATTRIBUTES, int_int, int_int)                                         \
  SHMCOLL_KERNEL(ATTRIBUTES, short_int, short_int)                                     \
  SHMCOLL_KERNEL(ATTRIBUTES, long_double_int, long_double_int)                         \
  void reduce_dispatch(Dtype dtype, Op::Kind op, void* out, const void* const* inputs, \
                       int input_count, std::size_t count) {                           \
    switch (dtype) { SHMCOLL_DISPATCH_ALL }                                            \
    __builtin_trap();                                                                  \
  }

#define SHMCOLL_KERNEL(ATTRIBUTES, name, T)                                        \
  ATTRIBUTES void reduce_##name(Op::Kind op, void* out, const void* const* inputs, \
                                int input_count, std::size_t count) {              \
    kernels::reduce_typed<T>(op, out, inputs, input_count, count);                 \
  }

#define SHMCOLL_DISPATCH(name) \
  case Dtype::name:            \
    return reduce_##name(op, out, inputs, input_count, count);
#define SHMCOLL_DISPATCH_ALL                                                                    \
  SHMCOLL_DISPATCH(i8)                                                                          \
  SHMCOLL_DISPATCH(i16)                                                                         \
  SHMCOLL_DISPATCH(i32) SHMCOLL_DISPATCH(i64) SHMCOLL_DISPATCH(u8) SHMCOLL_DISPATCH(u16)        \
      SHMCOLL_DISPATCH(u32) SHMCOLL_DISPATCH(u64) SHMCOLL_DISPATCH(f32) SHMCOLL_DISPATCH(f64)   \
          SHMCOLL_DISPATCH(f16) SHMCOLL_DISPATCH(bf16) SHMCOLL_DISPATCH(long_double)            \
              SHMCOLL_DISPATCH(complex_f32) SHMCOLL_DISPATCH(complex_f64)                       \
                  SHMCOLL_DISPATCH(boolean) SHMCOLL_DISPATCH(character) SHMCOLL_DISPATCH(wchar) \
                      SHMCOLL_DISPATCH(byte) SHMCOLL_DISPATCH(float_int)                        \
                          SHMCOLL_DISPATCH(double_int) SHMCOLL_DISPATCH(long_int)               \
                              SHMCOLL_DISPATCH(int_int) SHMCOLL_DISPATCH(short_int)             \
                                  SHMCOLL_DISPATCH(long_double_int)
