// The SIMD kernels of the pair types (see simd_kernels.hpp).
#include "ops/simd_kernels.hpp"

namespace shmcoll::ops::simd {
SHMCOLL_PAIR_TYPES(SHMCOLL_DEFINE_SIMD_KERNEL)
}  // namespace shmcoll::ops::simd
