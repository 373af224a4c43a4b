#include "ops/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "util/fail.hpp"

namespace shmcoll::ops {

namespace {

// Integer arithmetic in an unsigned type at least as wide as unsigned int, so overflow wraps
// instead of being undefined (and u16 * u16 cannot overflow a promoted int).
template <typename T>
using WrapType =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename T>
struct Sum {
  [[gnu::always_inline]] T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(WrapType<T>(a) + WrapType<T>(b));
    else
      return a + b;
  }
};
template <typename T>
struct Prod {
  [[gnu::always_inline]] T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(WrapType<T>(a) * WrapType<T>(b));
    else
      return a * b;
  }
};
template <typename T>
struct Min {
  [[gnu::always_inline]] T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct Max {
  [[gnu::always_inline]] T operator()(T a, T b) const { return a < b ? b : a; }
};

// Inputs usually sit in another core's cache, and the hardware prefetcher stops at every page
// boundary, so each block asks for the whole next block before it starts computing.
template <typename T>
[[gnu::always_inline]] inline void prefetch_next_block(const void* const* inputs, int input_count,
                                                       std::size_t next, std::size_t count) {
  constexpr std::size_t kBlock = 8192 / sizeof(T);
  constexpr std::size_t kLine = 64 / sizeof(T);
  const std::size_t end = std::min(count, next + kBlock);
  for (int k = 0; k < input_count; ++k) {
    const T* in = static_cast<const T*>(inputs[k]);
    for (std::size_t i = next; i < end; i += kLine) __builtin_prefetch(in + i);
  }
}

bool overlaps_late_input(const void* out, const void* const* inputs, int input_count,
                         std::size_t bytes) {
  const auto* o = static_cast<const char*>(out);
  for (int k = 2; k < input_count; ++k) {
    const auto* in = static_cast<const char*>(inputs[k]);
    if (o < in + bytes && in < o + bytes) return true;
  }
  return false;
}

// Blocked so each block of the result stays in L1 while the k inputs stream past it once each.
// The first pass combines inputs 0 and 1 straight into `out`, which is safe when `out` aliases one
// of them; when it aliases a later input, the block is built in a private buffer instead.
template <typename T, typename Combine>
[[gnu::always_inline]] inline void reduce_blocks(T* out, const void* const* inputs, int input_count,
                                                 std::size_t count) {
  constexpr std::size_t kBlock = 8192 / sizeof(T);
  const Combine combine;
  const auto input = [inputs](int k) { return static_cast<const T*>(inputs[k]); };
  if (input_count == 1) {
    if (out != input(0)) std::copy(input(0), input(0) + count, out);
    return;
  }
  alignas(64) T private_block[kBlock];
  const bool use_private = overlaps_late_input(out, inputs, input_count, count * sizeof(T));
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    prefetch_next_block<T>(inputs, input_count, base + kBlock, count);
    T* block = use_private ? private_block : out + base;
    const T* in0 = input(0) + base;
    const T* in1 = input(1) + base;
    for (std::size_t i = 0; i < n; ++i) block[i] = combine(in0[i], in1[i]);
    for (int k = 2; k < input_count; ++k) {
      const T* in = input(k) + base;
      for (std::size_t i = 0; i < n; ++i) block[i] = combine(block[i], in[i]);
    }
    if (use_private) std::copy(block, block + n, out + base);
  }
}

template <typename T>
[[gnu::always_inline]] inline void reduce_typed(Op op, void* out, const void* const* inputs,
                                                int input_count, std::size_t count) {
  T* typed_out = static_cast<T*>(out);
  switch (op) {
    case Op::sum:
      return reduce_blocks<T, Sum<T>>(typed_out, inputs, input_count, count);
    case Op::prod:
      return reduce_blocks<T, Prod<T>>(typed_out, inputs, input_count, count);
    case Op::min:
      return reduce_blocks<T, Min<T>>(typed_out, inputs, input_count, count);
    case Op::max:
      return reduce_blocks<T, Max<T>>(typed_out, inputs, input_count, count);
  }
  fail(Errc::invalid_argument, "op ", static_cast<int>(op), " is not a shmcoll::Op");
}

// One entry point per type, compiled for AVX-512 (x86-64-v4), AVX2 (v3) and the baseline; the
// loader picks the best the CPU supports (GCC function multiversioning through an ifunc).
#if defined(__x86_64__)
#define SHMCOLL_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SHMCOLL_SIMD_CLONES
#endif

#define SHMCOLL_DEFINE_KERNEL(name, T)                                                        \
  SHMCOLL_SIMD_CLONES void name(Op op, void* out, const void* const* inputs, int input_count, \
                                std::size_t count) {                                          \
    reduce_typed<T>(op, out, inputs, input_count, count);                                     \
  }

SHMCOLL_DEFINE_KERNEL(reduce_i8, std::int8_t)
SHMCOLL_DEFINE_KERNEL(reduce_i16, std::int16_t)
SHMCOLL_DEFINE_KERNEL(reduce_i32, std::int32_t)
SHMCOLL_DEFINE_KERNEL(reduce_i64, std::int64_t)
SHMCOLL_DEFINE_KERNEL(reduce_u8, std::uint8_t)
SHMCOLL_DEFINE_KERNEL(reduce_u16, std::uint16_t)
SHMCOLL_DEFINE_KERNEL(reduce_u32, std::uint32_t)
SHMCOLL_DEFINE_KERNEL(reduce_u64, std::uint64_t)
SHMCOLL_DEFINE_KERNEL(reduce_f32, float)
SHMCOLL_DEFINE_KERNEL(reduce_f64, double)

}  // namespace

void reduce_kary(Dtype dtype, Op op, void* out, const void* const* inputs, int input_count,
                 std::size_t count) {
  switch (dtype) {
    case Dtype::i8:
      return reduce_i8(op, out, inputs, input_count, count);
    case Dtype::i16:
      return reduce_i16(op, out, inputs, input_count, count);
    case Dtype::i32:
      return reduce_i32(op, out, inputs, input_count, count);
    case Dtype::i64:
      return reduce_i64(op, out, inputs, input_count, count);
    case Dtype::u8:
      return reduce_u8(op, out, inputs, input_count, count);
    case Dtype::u16:
      return reduce_u16(op, out, inputs, input_count, count);
    case Dtype::u32:
      return reduce_u32(op, out, inputs, input_count, count);
    case Dtype::u64:
      return reduce_u64(op, out, inputs, input_count, count);
    case Dtype::f32:
      return reduce_f32(op, out, inputs, input_count, count);
    case Dtype::f64:
      return reduce_f64(op, out, inputs, input_count, count);
  }
  fail(Errc::invalid_argument, "dtype ", static_cast<int>(dtype), " is not a shmcoll::Dtype");
}

}  // namespace shmcoll::ops
