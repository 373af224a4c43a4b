// The SIMD kernels of the integer types (see simd_kernels.hpp).
#include "ops/simd_kernels.hpp"

namespace shmcoll::ops::simd {
SHMCOLL_INTEGER_TYPES(SHMCOLL_DEFINE_SIMD_KERNEL)
}  // namespace shmcoll::ops::simd
