// The SIMD build's per-type kernels, defined in simd_integer.cpp, simd_floating.cpp and
// simd_pair.cpp (one translation unit per type group, so a parallel build compiles them side by
// side) and called by reduce.cpp. Each is compiled for AVX-512 (x86-64-v4), AVX2 (v3) and the
// baseline; the loader picks the best the CPU supports (GCC function multiversioning through an
// ifunc). Elsewhere (ARM) the baseline vectorizes for the target's own SIMD unit.
#pragma once

#include "ops/kernels.hpp"

#if defined(__x86_64__)
#define SHMCOLL_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SHMCOLL_SIMD_CLONES
#endif

// The clones live in an anonymous namespace, called through a plain kernel: GCC gives a clone's
// ifunc symbol default visibility whatever the preset, and libshmcoll.so must not export it.
#define SHMCOLL_DEFINE_SIMD_KERNEL(name, T)                                                    \
  namespace {                                                                                  \
  SHMCOLL_SIMD_CLONES void clones_##name(Op::Kind op, void* out, const void* const* inputs,   \
                                         int input_count, std::size_t count) {                 \
    kernels::reduce_typed<T>(op, out, inputs, input_count, count);                             \
  }                                                                                            \
  }                                                                                            \
  SHMCOLL_KERNEL_SIGNATURE(name) { clones_##name(op, out, inputs, input_count, count); }

namespace shmcoll::ops::simd {
SHMCOLL_ALL_TYPES(SHMCOLL_DECLARE_KERNEL)
}  // namespace shmcoll::ops::simd
