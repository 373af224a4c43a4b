// Elementwise reduction kernels. The k-ary form reads each input once and writes the output once:
//   out[i] = in[0][i] op in[1][i] op ... op in[k-1][i]     (left to right: rank order)
// `out` may alias any input. Integer sums and products wrap as in C (two's complement).
#pragma once

#include <cstddef>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::ops {

void reduce_kary(Dtype dtype, Op op, void* out, const void* const* inputs, int input_count,
                 std::size_t count);

}  // namespace shmcoll::ops
