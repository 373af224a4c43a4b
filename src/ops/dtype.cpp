#include "util/fail.hpp"

namespace shmcoll {

std::size_t dtype_size(Dtype dtype) {
  switch (dtype) {
    case Dtype::i8:
    case Dtype::u8:
      return 1;
    case Dtype::i16:
    case Dtype::u16:
      return 2;
    case Dtype::i32:
    case Dtype::u32:
    case Dtype::f32:
      return 4;
    case Dtype::i64:
    case Dtype::u64:
    case Dtype::f64:
      return 8;
  }
  fail(Errc::invalid_argument, "dtype ", static_cast<int>(dtype), " is not a shmcoll::Dtype");
}

const char* dtype_name(Dtype dtype) {
  static const char* const names[] = {"i8",  "i16", "i32", "i64", "u8",
                                      "u16", "u32", "u64", "f32", "f64"};
  const auto index = static_cast<unsigned>(dtype);
  return index < std::size(names) ? names[index] : "?";
}

const char* op_name(Op op) {
  static const char* const names[] = {"sum", "prod", "min", "max"};
  const auto index = static_cast<unsigned>(op);
  return index < std::size(names) ? names[index] : "?";
}

}  // namespace shmcoll
