// Sizes, names and classes of the element types; which operation MPI defines on which type.
#include "ops/element.hpp"
#include "util/fail.hpp"

namespace shmcoll {

static_assert(std::size(detail::kDtypeSizes) == kDtypeCount);

void detail::throw_invalid_dtype(Dtype dtype) {
  fail(Errc::invalid_argument, "dtype ", static_cast<int>(dtype), " is not a shmcoll::Dtype");
}

namespace {
constexpr bool sizes_match_types() {
  for (int d = 0; d < kDtypeCount; ++d) {
    const auto dtype = static_cast<Dtype>(d);
    if (visit_dtype(dtype, [](auto zero) { return sizeof(zero); }) != detail::kDtypeSizes[d]) {
      return false;
    }
  }
  return true;
}
static_assert(sizes_match_types(), "detail::kDtypeSizes disagrees with visit_dtype");
}  // namespace

const char* dtype_name(Dtype dtype) {
  static const char* const names[] = {
      "i8",         "i16",      "i32",         "i64",         "u8",
      "u16",        "u32",      "u64",         "f32",         "f64",
      "f16",        "bf16",     "long_double", "complex_f32", "complex_f64",
      "bool",       "char",     "wchar",       "byte",        "float_int",
      "double_int", "long_int", "2int",        "short_int",   "long_double_int",
      "2float",     "2double"};
  static_assert(std::size(names) == kDtypeCount);
  return is_valid_dtype(dtype) ? names[static_cast<unsigned>(dtype)] : "?";
}

float to_float(float16 value) noexcept {
  return ops::widen(value);
}
float to_float(bfloat16 value) noexcept {
  return ops::widen(value);
}
float16 to_float16(float value) noexcept {
  return ops::narrow<float16>(value);
}
bfloat16 to_bfloat16(float value) noexcept {
  return ops::narrow<bfloat16>(value);
}

Op Op::create(UserFunction function, bool commutative) {
  if (!function) fail(Errc::invalid_argument, "Op::create: function is empty");
  Op op(user);
  op.commutative_ = commutative;
  op.function_ = std::make_shared<const UserFunction>(std::move(function));
  return op;
}

const char* op_name(const Op& op) {
  static const char* const names[] = {"sum",    "prod",   "min",     "max",   "land",
                                      "lor",    "lxor",   "band",    "bor",   "bxor",
                                      "maxloc", "minloc", "replace", "no_op", "user"};
  const auto index = static_cast<unsigned>(op.kind());
  return index < std::size(names) ? names[index] : "?";
}

bool op_defined_on(const Op& op, Dtype dtype) noexcept {
  if (!is_valid_dtype(dtype)) return false;
  if (op.kind() == Op::user) return op.user_function() != nullptr;
  return ops::defined_on(op.kind(), ops::type_class(dtype));
}

}  // namespace shmcoll
