// MPI's predefined types and ops as shmcoll's, user ops (MPI_Op_create) as shmcoll user ops
// called with the caller's MPI type, and shmcoll errors as MPI error codes.
#include <cstdio>
#include <map>
#include <type_traits>
#include <utility>
#include <vector>

#include "mpi/layer.hpp"
#include "ops/reduce.hpp"

namespace shmcoll::mpi {

namespace {

struct UserOp {
  MPI_User_function* function;
  bool commutative;
  bool fortran;  // called with the datatype's Fortran handle
};

// Handles are pointers in Open MPI and ints in MPICH; both order, so std::map serves either.
std::map<MPI_Op, UserOp>& user_ops() {
  static std::map<MPI_Op, UserOp> ops;
  return ops;
}

// The shmcoll Op made for (user op, MPI type): made once, so a call allocates nothing.
std::map<std::pair<MPI_Op, MPI_Datatype>, Op>& bound_user_ops() {
  static std::map<std::pair<MPI_Op, MPI_Datatype>, Op> ops;
  return ops;
}

using TypeTable = std::pair<MPI_Datatype, Dtype>[36];
const TypeTable& predefined_types() {
  // Not constant expressions in Open MPI (addresses of its globals), so a table made on first use.
  static const TypeTable predefined = {
      {MPI_INT, Dtype::i32},
      {MPI_DOUBLE, Dtype::f64},
      {MPI_FLOAT, Dtype::f32},
      {MPI_LONG, Dtype::i64},
      {MPI_UNSIGNED_LONG, Dtype::u64},
      {MPI_UNSIGNED, Dtype::u32},
      {MPI_LONG_LONG, Dtype::i64},
      {MPI_UNSIGNED_LONG_LONG, Dtype::u64},
      {MPI_SHORT, Dtype::i16},
      {MPI_UNSIGNED_SHORT, Dtype::u16},
      {MPI_SIGNED_CHAR, Dtype::i8},
      {MPI_UNSIGNED_CHAR, Dtype::u8},
      {MPI_CHAR, Dtype::character},
      {MPI_BYTE, Dtype::byte},
      {MPI_INT8_T, Dtype::i8},
      {MPI_INT16_T, Dtype::i16},
      {MPI_INT32_T, Dtype::i32},
      {MPI_INT64_T, Dtype::i64},
      {MPI_UINT8_T, Dtype::u8},
      {MPI_UINT16_T, Dtype::u16},
      {MPI_UINT32_T, Dtype::u32},
      {MPI_UINT64_T, Dtype::u64},
      {MPI_AINT, Dtype::i64},
      {MPI_OFFSET, Dtype::i64},
      {MPI_COUNT, Dtype::i64},
      {MPI_LONG_DOUBLE, Dtype::long_double},
      {MPI_C_BOOL, Dtype::boolean},
      {MPI_WCHAR, Dtype::wchar},
      {MPI_C_FLOAT_COMPLEX, Dtype::complex_f32},
      {MPI_C_DOUBLE_COMPLEX, Dtype::complex_f64},
      {MPI_FLOAT_INT, Dtype::float_int},
      {MPI_DOUBLE_INT, Dtype::double_int},
      {MPI_LONG_INT, Dtype::long_int},
      {MPI_2INT, Dtype::int_int},
      {MPI_SHORT_INT, Dtype::short_int},
      {MPI_LONG_DOUBLE_INT, Dtype::long_double_int},
  };
  return predefined;
}

// Fortran's element types as the element type that holds the same bits in C (gfortran's: a
// LOGICAL is a 4-byte integer, .true. is 1, as the logical operations make it; 2REAL and
// 2DOUBLE_PRECISION are pairs whose index has the value's type). A type whose size
// here differs (a compiler flag such as -fdefault-integer-8 when the MPI was built) or that the
// MPI does not have (MPI_DATATYPE_NULL) is left out. Which operations apply is the MPI's to say
// (reduction_of asks it), so the layer refuses exactly what the MPI refuses.
std::optional<Dtype> fortran_element_of(MPI_Datatype type) {
  static const auto table = [] {
    const std::pair<MPI_Datatype, Dtype> candidates[] = {
        {MPI_INTEGER, Dtype::i32},
        {MPI_INTEGER1, Dtype::i8},
        {MPI_INTEGER2, Dtype::i16},
        {MPI_INTEGER4, Dtype::i32},
        {MPI_INTEGER8, Dtype::i64},
        {MPI_REAL, Dtype::f32},
        {MPI_REAL4, Dtype::f32},
        {MPI_REAL8, Dtype::f64},
        {MPI_DOUBLE_PRECISION, Dtype::f64},
        {MPI_COMPLEX, Dtype::complex_f32},
        {MPI_DOUBLE_COMPLEX, Dtype::complex_f64},
        {MPI_LOGICAL, Dtype::i32},
        {MPI_2INTEGER, Dtype::int_int},
        {MPI_2REAL, Dtype::float_float},
        {MPI_2DOUBLE_PRECISION, Dtype::double_double},
    };
    std::vector<std::pair<MPI_Datatype, Dtype>> usable;
    for (const auto& [handle, dtype] : candidates) {
      int size = 0;
      if (handle == MPI_DATATYPE_NULL || PMPI_Type_size(handle, &size) != MPI_SUCCESS) continue;
      if (static_cast<std::size_t>(size) == dtype_size(dtype)) usable.emplace_back(handle, dtype);
    }
    return usable;
  }();
  for (const auto& [handle, dtype] : table) {
    if (handle == type) return dtype;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Dtype> dtype_of(MPI_Datatype type) {
  for (const auto& [handle, dtype] : predefined_types()) {
    if (handle == type) return dtype;
  }
  return std::nullopt;
}

namespace {

// `type` is the call's MPI type, `dtype` its element type.
std::optional<Op> op_of(MPI_Op op, MPI_Datatype type, Dtype dtype) {
  static const std::pair<MPI_Op, Op::Kind> predefined[] = {
      {MPI_SUM, Op::sum},   {MPI_PROD, Op::prod},     {MPI_MIN, Op::min},
      {MPI_MAX, Op::max},   {MPI_LAND, Op::land},     {MPI_LOR, Op::lor},
      {MPI_LXOR, Op::lxor}, {MPI_BAND, Op::band},     {MPI_BOR, Op::bor},
      {MPI_BXOR, Op::bxor}, {MPI_MAXLOC, Op::maxloc}, {MPI_MINLOC, Op::minloc},
  };
  for (const auto& [handle, kind] : predefined) {
    // An op MPI does not define on the type goes to PMPI, which reports it in MPI's words.
    if (handle == op) {
      return ops::op_undefined_reason(Op(kind), dtype).empty() ? std::optional<Op>(kind)
                                                               : std::nullopt;
    }
  }
  const auto user = user_ops().find(op);
  if (user == user_ops().end()) return std::nullopt;
  auto& bound = bound_user_ops();
  const auto key = std::make_pair(op, type);
  auto found = bound.find(key);
  if (found == bound.end()) {
    MPI_User_function* function = user->second.function;
    const bool fortran = user->second.fortran;
    Op made = Op::create(
        [function, type, fortran](const void* in, void* inout, std::size_t len, Dtype) {
          int length = static_cast<int>(len);
          if (fortran) {
            MPI_Fint fortran_type = MPI_Type_c2f(type);
            reinterpret_cast<void (*)(void*, void*, MPI_Fint*, MPI_Fint*)>(function)(
                const_cast<void*>(in), inout, &length, &fortran_type);
            return;
          }
          MPI_Datatype caller_type = type;
          function(const_cast<void*>(in), inout, &length, &caller_type);
        },
        user->second.commutative);
    found = bound.emplace(key, made).first;
  }
  return found->second;
}

// Whether the MPI underneath accepts `op` on `type` (a one-element PMPI_Reduce_local with errors
// returned, not raised), asked once per pair. Every rank runs the same MPI, so every rank gets
// the same answer and takes the same path.
bool mpi_accepts(MPI_Datatype type, MPI_Op op) {
  static std::map<std::pair<MPI_Datatype, MPI_Op>, bool> answers;
  const auto [found, asked_before] = answers.try_emplace({type, op}, false);
  if (!asked_before) return found->second;
  // Where a call without a communicator reports its errors differs between MPI versions.
  MPI_Errhandler world = MPI_ERRHANDLER_NULL, self = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
  PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  alignas(16) unsigned char in[64] = {}, inout[64] = {};
  found->second = PMPI_Reduce_local(in, inout, 1, type, op) == MPI_SUCCESS;
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
  PMPI_Errhandler_free(&world);
  PMPI_Errhandler_free(&self);
  return found->second;
}

}  // namespace

std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op) {
  // Derived types go to PMPI: the standard defines predefined ops on predefined types only
  // (Open MPI rejects the rest, MPICH extends), and a user op must see whole elements of the
  // caller's type, which shmcoll's chunks do not promise.
  auto as = [&](Dtype dtype) -> std::optional<Reduction> {
    if (auto shm_op = op_of(op, type, dtype)) return Reduction{dtype, *shm_op};
    return std::nullopt;
  };
  if (const auto dtype = dtype_of(type)) {
    if (auto served = as(*dtype)) return served;
    // MPI_CHAR has no operations in the standard, but both MPIs accept the arithmetic ones as C
    // char arithmetic, and it is OSU's default type: served with C's meaning (wrapping, signed or
    // not as char is here) where the MPI accepts the op.
    if (*dtype == Dtype::character && mpi_accepts(type, op)) {
      return as(std::is_signed_v<char> ? Dtype::i8 : Dtype::u8);
    }
    return std::nullopt;
  }
  // Fortran's types, from C or Fortran callers alike: reduced as the C type of the same bits,
  // with the operations the MPI accepts on them (a user op takes any type, and asking the MPI
  // would call the user's function).
  const auto fortran = fortran_element_of(type);
  if (fortran && (user_ops().contains(op) || mpi_accepts(type, op))) return as(*fortran);
  return std::nullopt;
}

void remember_user_op(MPI_Op op, MPI_User_function* function, bool commutative) {
  user_ops()[op] = {function, commutative, false};
}

void remember_fortran_user_op(MPI_Op op, MPI_User_function* function, bool commutative) {
  user_ops()[op] = {function, commutative, true};
}

void forget_user_op(MPI_Op op) {
  user_ops().erase(op);
  std::erase_if(bound_user_ops(), [op](const auto& entry) { return entry.first.first == op; });
}

int raise_error(MPI_Comm comm, const Error& error) {
  return raise_class(comm, error.code() == Errc::invalid_argument ? MPI_ERR_ARG : MPI_ERR_OTHER,
                     error.what());
}

int raise_class(MPI_Comm comm, int error_class, const std::string& message) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(comm, &handler);
  // A fatal handler ends the job with MPI's own words; say ours first.
  if (handler == MPI_ERRORS_ARE_FATAL) std::fprintf(stderr, "shmcoll: %s\n", message.c_str());
  if (handler != MPI_ERRHANDLER_NULL) PMPI_Errhandler_free(&handler);
  PMPI_Comm_call_errhandler(comm, error_class);
  return error_class;
}

int Arguments::raise(MPI_Comm comm, CallTimer& timer) const {
  timer.failed_in_shmcoll();
  char index[16] = "";
  if (index_ >= 0) std::snprintf(index, sizeof index, "[%d]", index_);
  char message[160];
  if (error_class_ == MPI_ERR_ROOT) {
    std::snprintf(message, sizeof message, "%s: %s %d is out of range [0, %d)", call_, name_,
                  value_, size_);
  } else {
    std::snprintf(message, sizeof message, "%s: %s%s must be non-negative, got %d", call_, name_,
                  index, value_);
  }
  return raise_class(comm, error_class_, message);
}

}  // namespace shmcoll::mpi
