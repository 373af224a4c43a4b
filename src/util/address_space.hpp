// Addresses as numbers. The most bytes any buffer, offset or span can cover: 64-bit Linux gives a
// process at most 2^56 bytes of address space (with 5-level paging), so anything larger is a wrong
// argument. And offsets applied to addresses that need not lie inside any object (MPI_BOTTOM, a
// derived type's element far from its data), where pointer arithmetic would be undefined.
#pragma once

#include <cstdint>
#include <optional>

namespace shmcoll {

inline constexpr std::int64_t kMostAddressBytes = std::int64_t{1} << 56;

// a * b, when it neither overflows nor leaves [-kMostAddressBytes, kMostAddressBytes].
inline std::optional<std::int64_t> address_product(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product) || product > kMostAddressBytes ||
      product < -kMostAddressBytes) {
    return std::nullopt;
  }
  return product;
}

// `base` moved by `bytes`, as address arithmetic: only the final address must be real memory.
template <typename T>
T* address_plus(T* base, std::int64_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<std::uintptr_t>(base) +
                              static_cast<std::uintptr_t>(bytes));
}

// An address as a signed number, for comparing spans of memory.
inline std::int64_t address_value(const void* address) {
  return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(address));
}

}  // namespace shmcoll
