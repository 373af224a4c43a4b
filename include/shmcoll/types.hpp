// Element types and reduction operations: every predefined MPI C element type, two 16-bit floats
// beyond MPI, MPI's predefined operations, and user-defined operations.
#pragma once

#include <complex>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

#include "shmcoll/export.h"

namespace shmcoll {

// The MAXLOC/MINLOC pair types, laid out as MPI's MPI_FLOAT_INT ... MPI_LONG_DOUBLE_INT.
struct float_int {
  float value;
  int index;
};
struct double_int {
  double value;
  int index;
};
struct long_int {
  long value;
  int index;
};
struct int_int {  // MPI_2INT
  int value;
  int index;
};
struct short_int {
  short value;
  int index;
};
struct long_double_int {
  long double value;
  int index;
};
// Fortran's MPI_2REAL and MPI_2DOUBLE_PRECISION: the index is stored in the value's type.
struct float_float {
  float value;
  float index;
};
struct double_double {
  double value;
  double index;
};

// IEEE binary16 and bfloat16, stored as their bits. Reductions compute in float per element and
// round once (to nearest even) when they store the result.
struct float16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};
SHMCOLL_API float to_float(float16 value) noexcept;
SHMCOLL_API float to_float(bfloat16 value) noexcept;
SHMCOLL_API float16 to_float16(float value) noexcept;
SHMCOLL_API bfloat16 to_bfloat16(float value) noexcept;

// The numbers are the C API's (shmcoll.h); new types are only ever appended.
enum class Dtype : int {
  i8,
  i16,
  i32,
  i64,
  u8,
  u16,
  u32,
  u64,
  f32,
  f64,
  f16,
  bf16,
  long_double,
  complex_f32,  // std::complex<float>, C float _Complex
  complex_f64,  // std::complex<double>, C double _Complex
  boolean,      // C bool
  character,    // char: moved, never combined (MPI_CHAR is not an integer type)
  wchar,        // wchar_t, likewise
  byte,         // std::byte, for the bitwise operations
  float_int,    // the MAXLOC/MINLOC pairs
  double_int,
  long_int,
  int_int,
  short_int,
  long_double_int,
  float_float,    // MPI_2REAL
  double_double,  // MPI_2DOUBLE_PRECISION
};
inline constexpr int kDtypeCount = static_cast<int>(Dtype::double_double) + 1;

constexpr bool is_valid_dtype(Dtype dtype) noexcept {
  return static_cast<unsigned>(dtype) < static_cast<unsigned>(kDtypeCount);
}
SHMCOLL_API const char* dtype_name(Dtype dtype);

namespace detail {
// Indexed by Dtype; types.cpp checks it against visit_dtype. Inline because every call asks.
inline constexpr unsigned char kDtypeSizes[] = {1,
                                                2,
                                                4,
                                                8,
                                                1,
                                                2,
                                                4,
                                                8,
                                                4,
                                                8,
                                                2,
                                                2,
                                                sizeof(long double),
                                                8,
                                                16,
                                                sizeof(bool),
                                                1,
                                                sizeof(wchar_t),
                                                1,
                                                sizeof(float_int),
                                                sizeof(double_int),
                                                sizeof(long_int),
                                                sizeof(int_int),
                                                sizeof(short_int),
                                                sizeof(long_double_int),
                                                sizeof(float_float),
                                                sizeof(double_double)};
[[noreturn]] SHMCOLL_API void throw_invalid_dtype(Dtype dtype);
}  // namespace detail

// Bytes of one element; throws Error(invalid_argument) for a value that is no Dtype.
inline std::size_t dtype_size(Dtype dtype) {
  if (!is_valid_dtype(dtype)) detail::throw_invalid_dtype(dtype);
  return detail::kDtypeSizes[static_cast<unsigned>(dtype)];
}

template <typename T>
constexpr Dtype dtype_of() {
  if constexpr (std::is_same_v<T, bool>)
    return Dtype::boolean;
  else if constexpr (std::is_same_v<T, char>)
    return Dtype::character;
  else if constexpr (std::is_same_v<T, wchar_t>)
    return Dtype::wchar;
  else if constexpr (std::is_integral_v<T>) {  // long and long long alike, by width and sign
    constexpr int width_index = sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : sizeof(T) == 4 ? 2 : 3;
    return static_cast<Dtype>(width_index + (std::is_signed_v<T> ? 0 : 4));
  } else if constexpr (std::is_same_v<T, float>)
    return Dtype::f32;
  else if constexpr (std::is_same_v<T, double>)
    return Dtype::f64;
  else if constexpr (std::is_same_v<T, long double>)
    return Dtype::long_double;
  else if constexpr (std::is_same_v<T, float16>)
    return Dtype::f16;
  else if constexpr (std::is_same_v<T, bfloat16>)
    return Dtype::bf16;
  else if constexpr (std::is_same_v<T, std::complex<float>>)
    return Dtype::complex_f32;
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return Dtype::complex_f64;
  else if constexpr (std::is_same_v<T, std::byte>)
    return Dtype::byte;
  else if constexpr (std::is_same_v<T, float_int>)
    return Dtype::float_int;
  else if constexpr (std::is_same_v<T, double_int>)
    return Dtype::double_int;
  else if constexpr (std::is_same_v<T, long_int>)
    return Dtype::long_int;
  else if constexpr (std::is_same_v<T, int_int>)
    return Dtype::int_int;
  else if constexpr (std::is_same_v<T, short_int>)
    return Dtype::short_int;
  else if constexpr (std::is_same_v<T, long_double_int>)
    return Dtype::long_double_int;
  else if constexpr (std::is_same_v<T, float_float>)
    return Dtype::float_float;
  else if constexpr (std::is_same_v<T, double_double>)
    return Dtype::double_double;
  else
    static_assert(sizeof(T) == 0, "no shmcoll Dtype for this type");
}

// Calls fn with a value-initialised object of the C++ type `dtype` names (the inverse of
// dtype_of), e.g. visit_dtype(d, [](auto zero) { using T = decltype(zero); ... }). `dtype` must be
// valid (is_valid_dtype).
template <typename Fn>
constexpr decltype(auto) visit_dtype(Dtype dtype, Fn&& fn) {
  switch (dtype) {
    case Dtype::i8:
      return fn(std::int8_t{});
    case Dtype::i16:
      return fn(std::int16_t{});
    case Dtype::i32:
      return fn(std::int32_t{});
    case Dtype::i64:
      return fn(std::int64_t{});
    case Dtype::u8:
      return fn(std::uint8_t{});
    case Dtype::u16:
      return fn(std::uint16_t{});
    case Dtype::u32:
      return fn(std::uint32_t{});
    case Dtype::u64:
      return fn(std::uint64_t{});
    case Dtype::f32:
      return fn(float{});
    case Dtype::f64:
      return fn(double{});
    case Dtype::f16:
      return fn(float16{});
    case Dtype::bf16:
      return fn(bfloat16{});
    case Dtype::long_double:
      return fn(static_cast<long double>(0));
    case Dtype::complex_f32:
      return fn(std::complex<float>{});
    case Dtype::complex_f64:
      return fn(std::complex<double>{});
    case Dtype::boolean:
      return fn(bool{});
    case Dtype::character:
      return fn(char{});
    case Dtype::wchar:
      return fn(wchar_t{});
    case Dtype::byte:
      return fn(std::byte{});
    case Dtype::float_int:
      return fn(float_int{});
    case Dtype::double_int:
      return fn(double_int{});
    case Dtype::long_int:
      return fn(long_int{});
    case Dtype::int_int:
      return fn(int_int{});
    case Dtype::short_int:
      return fn(short_int{});
    case Dtype::long_double_int:
      return fn(long_double_int{});
    case Dtype::float_float:
      return fn(float_float{});
    case Dtype::double_double:
      break;
  }
  return fn(double_double{});
}

// A reduction operation: one of MPI's predefined operations, or a user function.
//
// Every collective combines its inputs in rank order, out = in[0] op in[1] op ... op in[p-1],
// whether or not the operation commutes, so results never depend on timing.
class SHMCOLL_API Op {
 public:
  enum Kind : int {
    sum,
    prod,
    min,
    max,
    land,  // logical and, or, xor: the result is 0 or 1
    lor,
    lxor,
    band,  // bitwise and, or, xor
    bor,
    bxor,
    maxloc,  // on the pair types: the extreme value and, on a tie, the lowest index
    minloc,
    replace,  // a op b = b
    no_op,    // a op b = a
    user,
  };
  // MPI_User_function's shape: inoutvec[i] = invec[i] op inoutvec[i] for i < len, where invec
  // holds the operand from the lower rank. `dtype` is the element type of both vectors.
  using UserFunction =
      std::function<void(const void* invec, void* inoutvec, std::size_t len, Dtype dtype)>;

  Op(Kind kind) noexcept : kind_(kind) {}  // implicit, so `Op op = Op::sum;` reads naturally
  static Op create(UserFunction function, bool commutative);

  Kind kind() const noexcept { return kind_; }
  bool commutative() const noexcept { return commutative_; }
  const UserFunction* user_function() const noexcept { return function_.get(); }

  friend bool operator==(const Op& a, const Op& b) noexcept {
    return a.kind_ == b.kind_ && a.function_ == b.function_;
  }

 private:
  Kind kind_;
  bool commutative_ = true;
  std::shared_ptr<const UserFunction> function_;
};
inline constexpr int kPredefinedOpCount = Op::user;

// The collectives, for names in messages (mismatched_call) and for tools and tests that pick one.
enum class Collective {
  barrier,
  bcast,
  reduce,
  allreduce,
  reduce_scatter,
  reduce_scatter_block,
  scan,
  exscan,
  scatter,
  scatterv,
  gather,
  gatherv,
  allgather,
  allgatherv,
  alltoall,
  alltoallv,
  alltoallw,
};
inline constexpr int kCollectiveCount = static_cast<int>(Collective::alltoallw) + 1;
SHMCOLL_API const char* collective_name(Collective collective);

SHMCOLL_API const char* op_name(const Op& op);
// Whether MPI defines `op` on `dtype` (user operations accept every type). The table:
//   integers              max min sum prod land lor lxor band bor bxor
//   f16 bf16 f32 f64 long double        max min sum prod
//   complex                             sum prod
//   bool                                land lor lxor
//   byte                                band bor bxor
//   pair types                          maxloc minloc
//   every type, char and wchar too      replace no_op
SHMCOLL_API bool op_defined_on(const Op& op, Dtype dtype) noexcept;

}  // namespace shmcoll
