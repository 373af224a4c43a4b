// The measurement behind the SIMD dispatch choice (docs/performance-details.md, Operators): a k-ary f32 sum and i16 max
// written for Google Highway's dynamic dispatch, timed beside shmcoll's kernels (plain loops that
// GCC vectorizes under target_clones) at 2 and 8 inputs. Built only when libhwy-dev is installed:
//   apt-get install -y libhwy-dev && cmake --preset release && build/bin/shmcoll-simd-probe
#include <algorithm>
#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd_probe.cpp"
#include "hwy/foreach_target.h"  // re-includes this file once per Highway target
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace probe::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Highway: each vector of the result accumulates all k inputs in a register. The probe's sizes
// are multiples of every vector width, so there is no tail.
template <typename T, class F>
void kary(T* out, const T* const* in, int k, std::size_t n, F f) {
  const hn::ScalableTag<T> d;
  for (std::size_t i = 0; i + hn::Lanes(d) <= n; i += hn::Lanes(d)) {
    auto acc = f(hn::LoadU(d, in[0] + i), hn::LoadU(d, in[1] + i));
    for (int j = 2; j < k; ++j) acc = f(acc, hn::LoadU(d, in[j] + i));
    hn::StoreU(acc, d, out + i);
  }
}
void SumF32(float* out, const float* const* in, int k, std::size_t n) {
  kary(out, in, k, n, [](auto a, auto b) { return hn::Add(a, b); });
}
void MaxI16(std::int16_t* out, const std::int16_t* const* in, int k, std::size_t n) {
  kary(out, in, k, n, [](auto a, auto b) { return hn::Max(a, b); });
}
}  // namespace probe::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <benchmark/benchmark.h>

#include <vector>

#include "ops/reduce.hpp"

namespace probe {
HWY_EXPORT(SumF32);
HWY_EXPORT(MaxI16);
void hwy_sum_f32(float* o, const float* const* in, int k, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(SumF32)(o, in, k, n);
}
void hwy_max_i16(std::int16_t* o, const std::int16_t* const* in, int k, std::size_t n) {
  HWY_DYNAMIC_DISPATCH(MaxI16)(o, in, k, n);
}

// shmcoll's own kernels (GCC auto-vectorization under target_clones).
void loops_sum_f32(float* o, const float* const* in, int k, std::size_t n) {
  shmcoll::ops::reduce_kary(shmcoll::Dtype::f32, shmcoll::Op::sum, o,
                            reinterpret_cast<const void* const*>(in), k, n);
}
void loops_max_i16(std::int16_t* o, const std::int16_t* const* in, int k, std::size_t n) {
  shmcoll::ops::reduce_kary(shmcoll::Dtype::i16, shmcoll::Op::max, o,
                            reinterpret_cast<const void* const*>(in), k, n);
}

// Bytes moved per second: k inputs read, one output written.
template <typename T, void (*Kernel)(T*, const T* const*, int, std::size_t)>
void run(benchmark::State& state) {
  const std::size_t bytes = state.range(0), n = bytes / sizeof(T);
  const int k = static_cast<int>(state.range(1));
  std::vector<std::vector<T>> in(k, std::vector<T>(n, T(1)));
  std::vector<T> out(n);
  std::vector<const T*> pointers;
  for (auto& v : in) pointers.push_back(v.data());
  for (auto _ : state) {
    Kernel(out.data(), pointers.data(), k, n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes * (k + 1)));
}
#define PROBE_ARGS ->ArgsProduct({{4096, 262144, 16 << 20}, {2, 8}})
BENCHMARK(run<float, hwy_sum_f32>) PROBE_ARGS;
BENCHMARK(run<float, loops_sum_f32>) PROBE_ARGS;
BENCHMARK(run<std::int16_t, hwy_max_i16>) PROBE_ARGS;
BENCHMARK(run<std::int16_t, loops_max_i16>) PROBE_ARGS;
}  // namespace probe

BENCHMARK_MAIN();
#endif
