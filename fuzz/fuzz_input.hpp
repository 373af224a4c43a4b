// Reads a fuzzer's bytes as a stream of small decisions; past the end every read is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shmcoll::fuzz {

class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  bool empty() const { return used_ >= size_; }
  std::uint8_t byte() { return used_ < size_ ? data_[used_++] : 0; }
  std::uint64_t word() {
    std::uint64_t value = 0;
    for (int i = 0; i < 8; ++i) value = value << 8 | byte();
    return value;
  }
  // One of n choices.
  int pick(int n) { return byte() % n; }
  // Mostly small counts, sometimes negative, sometimes far too large to address: the values that
  // argument checks must sort out.
  std::int64_t count(std::int64_t small_limit) {
    switch (pick(8)) {
      case 0:
        return -1 - static_cast<std::int64_t>(byte());
      case 1:
        return static_cast<std::int64_t>(word() | (1ull << 62)) & INT64_MAX;  // >= 2^62
      case 2:
        return INT64_MIN + static_cast<std::int64_t>(byte());
      default:
        return static_cast<std::int64_t>(word() % static_cast<std::uint64_t>(small_limit + 1));
    }
  }

  // As count, but a small one is moved down by `shift` (displacements that may be negative).
  std::int64_t shifted_count(std::int64_t small_limit, std::int64_t shift) {
    const std::int64_t value = count(small_limit);
    return value >= 0 && value <= small_limit ? value - shift : value;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t used_ = 0;
};

}  // namespace shmcoll::fuzz
