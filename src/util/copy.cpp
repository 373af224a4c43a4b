#include "util/copy.hpp"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace shmcoll {

namespace {

// may_alias: the stores write whatever type the buffer holds.
using Vector = char __attribute__((vector_size(32), may_alias));

// Compiled for AVX2 and for the baseline (two SSE2 registers per vector), chosen at load time.
// GCC would turn the loop back into a call to memcpy: not here.
#if defined(__x86_64__)
__attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
__attribute__((optimize("no-tree-loop-distribute-patterns"))) void
copy_vectors(char* out, const char* in, std::size_t bytes) {
  const std::size_t head = (sizeof(Vector) - (reinterpret_cast<std::uintptr_t>(out) & 31)) & 31;
  std::memcpy(out, in, head);
  out += head, in += head, bytes -= head;
  for (; bytes >= 2 * sizeof(Vector); bytes -= 2 * sizeof(Vector)) {
    Vector a, b;
    std::memcpy(&a, in, sizeof a);
    std::memcpy(&b, in + sizeof a, sizeof b);
    *reinterpret_cast<Vector*>(out) = a;
    *reinterpret_cast<Vector*>(out + sizeof a) = b;
    out += 2 * sizeof(Vector), in += 2 * sizeof(Vector);
  }
  std::memcpy(out, in, bytes);
}

}  // namespace

void copy_streaming(void* to, const void* from, std::size_t bytes) {
#if defined(__x86_64__)
  auto* out = static_cast<char*>(to);
  const auto* in = static_cast<const char*>(from);
  // SSE2's streaming store, which every x86-64 has: the write-combining buffers fill a line
  // whatever the width of the stores.
  const std::size_t head =
      std::min(bytes, (64 - (reinterpret_cast<std::uintptr_t>(out) & 63)) & 63);
  std::memcpy(out, in, head);
  out += head, in += head, bytes -= head;
  for (; bytes >= 64; bytes -= 64, out += 64, in += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
  }
  std::memcpy(out, in, bytes);
#else
  std::memcpy(to, from, bytes);
#endif
}

void finish_streaming() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

void copy_through_vectors(void* to, const void* from, std::size_t bytes) {
  copy_vectors(static_cast<char*>(to), static_cast<const char*>(from), bytes);
}

}  // namespace shmcoll
