// Elementwise reductions: the three forms the collectives need, for every element type and
// operation, on any CPU (the best SIMD level is chosen at load time), and user operations.
// Operands combine left to right in the order given (rank order), whether or not `op` commutes.
// Integer sums and products wrap as in C (two's complement).
#pragma once

#include <cstddef>
#include <string>

#include "shmcoll/types.hpp"

namespace shmcoll::ops {

// Why `op` cannot reduce `dtype` (MPI's table, in words), or an empty string when it can.
std::string op_undefined_reason(const Op& op, Dtype dtype);

// out = in[0] op in[1] op ... op in[k-1], reading each input once. `out` may alias any input.
void reduce_kary(Dtype dtype, const Op& op, void* out, const void* const* inputs, int input_count,
                 std::size_t count);
// inout = in op inout (MPI_Reduce_local's form).
void reduce_into(Dtype dtype, const Op& op, const void* in, void* inout, std::size_t count);
// out = a op b, which saves the copy the in-place form would need.
void reduce_pair(Dtype dtype, const Op& op, const void* a, const void* b, void* out,
                 std::size_t count);

// The x86 level whose kernel clones the loader picked on this CPU ("x86-64-v4 (AVX-512)", ...),
// by the rules GCC's target_clones resolver follows; "target default" elsewhere.
const char* simd_level();

// The same kernels compiled without SIMD: the benchmark's scalar baseline.
namespace scalar {
void reduce_kary(Dtype dtype, const Op& op, void* out, const void* const* inputs, int input_count,
                 std::size_t count);
}

}  // namespace shmcoll::ops
