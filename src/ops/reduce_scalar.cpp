// The kernels of reduce.cpp without SIMD (this file is compiled with -fno-tree-vectorize), so the
// benchmark can show what vectorization buys.
#include <cstring>

#include "ops/kernels.hpp"
#include "ops/reduce.hpp"
#include "util/fail.hpp"

namespace shmcoll::ops::scalar {

namespace {
SHMCOLL_ALL_TYPES(SHMCOLL_DEFINE_KERNEL)
}  // namespace

void reduce_kary(Dtype dtype, const Op& op, void* out, const void* const* inputs, int input_count,
                 std::size_t count) {
  if (op.kind() == Op::user || input_count < 2) {
    return ops::reduce_kary(dtype, op, out, inputs, input_count, count);
  }
  switch (dtype) { SHMCOLL_ALL_TYPES(SHMCOLL_DISPATCH_CASE) }
  fail(Errc::invalid_argument, "reduce: dtype ", static_cast<int>(dtype),
       " is not a shmcoll::Dtype");
}

}  // namespace shmcoll::ops::scalar
