// MPI's predefined types and ops as shmcoll's, user ops (MPI_Op_create) as shmcoll user ops
// called with the caller's MPI type, and shmcoll errors as MPI error codes.
#include <cstdio>
#include <map>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "mpi/layer.hpp"

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

// A copy of `table`'s entry for `key` (nullopt when it has none), read under the lock.
template <typename Table, typename Key>
std::optional<typename Table::mapped_type> shared_find(const Table& table, const Key& key) {
  SharedTables lock;
  const auto found = table.find(key);
  if (found == table.end()) return std::nullopt;
  return found->second;
}

using TypeTable = std::pair<MPI_Datatype, Dtype>[36];

// `type`'s element type in a table of (MPI handle, element type) pairs.
std::optional<Dtype> look_up(std::span<const std::pair<MPI_Datatype, Dtype>> table,
                             MPI_Datatype type) {
  for (const auto& [handle, dtype] : table) {
    if (handle == type) return dtype;
  }
  return std::nullopt;
}
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
  return look_up(table, type);
}

}  // namespace

std::optional<Dtype> dtype_of(MPI_Datatype type) {
  return look_up(predefined_types(), type);
}

bool is_predefined_type(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return false;  // (the MPI reports it, where the call goes)
  int integers = 0, addresses = 0, types = 0, combiner = MPI_UNDEFINED;
  PMPI_Type_get_envelope(type, &integers, &addresses, &types, &combiner);
  return combiner == MPI_COMBINER_NAMED;
}

namespace {

const std::pair<MPI_Op, Op::Kind> kPredefinedOps[] = {
    {MPI_SUM, Op::sum},   {MPI_PROD, Op::prod}, {MPI_MIN, Op::min},       {MPI_MAX, Op::max},
    {MPI_LAND, Op::land}, {MPI_LOR, Op::lor},   {MPI_LXOR, Op::lxor},     {MPI_BAND, Op::band},
    {MPI_BOR, Op::bor},   {MPI_BXOR, Op::bxor}, {MPI_MAXLOC, Op::maxloc}, {MPI_MINLOC, Op::minloc},
};

// `type` is the call's MPI type, `dtype` its element type.
std::optional<Op> op_of(MPI_Op op, MPI_Datatype type, Dtype dtype) {
  for (const auto& [handle, kind] : kPredefinedOps) {
    // An op MPI does not define on the type goes to PMPI, which reports it in MPI's words.
    if (handle == op) {
      return op_defined_on(Op(kind), dtype) ? std::optional<Op>(kind) : std::nullopt;
    }
  }
  const auto user = shared_find(user_ops(), op);
  if (!user) return std::nullopt;
  const auto key = std::make_pair(op, type);
  auto found = shared_find(bound_user_ops(), key);
  if (!found) {
    MPI_User_function* function = user->function;
    const bool fortran = user->fortran;
    const MPI_Fint fortran_handle = fortran ? MPI_Type_c2f(type) : 0;  // converted once
    Op made = Op::create(
        [function, type, fortran, fortran_handle](const void* in, void* inout, std::size_t len,
                                                  Dtype) {
          int length = static_cast<int>(len);
          if (fortran) {
            MPI_Fint fortran_type = fortran_handle;
            reinterpret_cast<void (*)(void*, void*, MPI_Fint*, MPI_Fint*)>(function)(
                const_cast<void*>(in), inout, &length, &fortran_type);
            return;
          }
          MPI_Datatype caller_type = type;
          function(const_cast<void*>(in), inout, &length, &caller_type);
        },
        user->commutative);
    SharedTables lock;
    found = bound_user_ops().emplace(key, made).first->second;
  }
  return found;
}

// Answers asked of the MPI once per (type, op), forgotten with the type (a freed handle may come
// back as another type).
std::map<std::pair<MPI_Datatype, MPI_Op>, bool>& accepted_pairs() {
  static std::map<std::pair<MPI_Datatype, MPI_Op>, bool> answers;
  return answers;
}
std::map<MPI_Datatype, Dtype>& byte_arithmetic_types() {
  static std::map<MPI_Datatype, Dtype> types;
  return types;
}

// Runs a one-element PMPI_Reduce_local of `type` with `op` on `in` and `inout` (at least the
// type's true extent), with errors returned, not raised. Returns whether the MPI accepted it.
bool reduce_local_returning(const void* in, void* inout, MPI_Datatype type, MPI_Op op) {
  // Where a call without a communicator reports its errors differs between MPI versions. Threads
  // swap the handlers one at a time, so each puts back what the program had set.
  static std::mutex swapping;
  const std::lock_guard one_at_a_time(swapping);
  MPI_Errhandler world = MPI_ERRHANDLER_NULL, self = MPI_ERRHANDLER_NULL;
  PMPI_Comm_get_errhandler(MPI_COMM_WORLD, &world);
  PMPI_Comm_get_errhandler(MPI_COMM_SELF, &self);
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  const bool accepted = PMPI_Reduce_local(in, inout, 1, type, op) == MPI_SUCCESS;
  PMPI_Comm_set_errhandler(MPI_COMM_WORLD, world);
  PMPI_Comm_set_errhandler(MPI_COMM_SELF, self);
  PMPI_Errhandler_free(&world);
  PMPI_Errhandler_free(&self);
  return accepted;
}

// Runs the one-element reduction that tells whether the MPI accepts `op` on `type`.
bool ask_mpi_accepts(MPI_Datatype type, MPI_Op op) {
  MPI_Aint true_lb = 0, true_extent = 0;
  PMPI_Type_get_true_extent(type, &true_lb, &true_extent);
  if (true_extent < 0 || true_extent > (MPI_Aint{1} << 20)) return false;  // not asked: PMPI
  std::vector<std::max_align_t> in(static_cast<std::size_t>(true_extent) / 16 + 1);
  std::vector<std::max_align_t> inout(in.size());
  auto at = [&](auto& buffer) { return reinterpret_cast<char*>(buffer.data()) - true_lb; };
  return reduce_local_returning(at(in), at(inout), type, op);
}

// Whether the MPI underneath accepts `op` on `type` (a one-element PMPI_Reduce_local of zeros),
// asked once per pair. Every rank runs the same MPI with the same type, so every rank gets the
// same answer and takes the same path.
bool mpi_accepts(MPI_Datatype type, MPI_Op op) {
  if (const auto answer = shared_find(accepted_pairs(), std::make_pair(type, op))) return *answer;
  const bool accepted = ask_mpi_accepts(type, op);
  {
    SharedTables lock;
    accepted_pairs().emplace(std::make_pair(type, op), accepted);
  }
  watch_for_free(type);
  return accepted;
}

// One-byte types the standard gives no arithmetic (MPI_CHAR, MPI_CHARACTER, MPI_BYTE) but an MPI
// may accept it on: reduced as 1-byte integers, wrapping as C does, and compared signed or not as
// the MPI compares them (asked once: the larger of 0x80 and 0x01). Open MPI compares MPI_CHARACTER
// unsigned, MPICH signed; both compare MPI_CHAR as x86-64's signed char.
bool is_untyped_byte(MPI_Datatype type) {
  return type == MPI_CHAR || type == MPI_BYTE ||
         (type == MPI_CHARACTER && type != MPI_DATATYPE_NULL);
}
Dtype byte_arithmetic_of(MPI_Datatype type) {
  if (const auto known = shared_find(byte_arithmetic_types(), type)) return *known;
  const unsigned char in = 0x80;
  unsigned char inout = 0x01;
  const bool compares_unsigned =
      reduce_local_returning(&in, &inout, type, MPI_MAX) && inout == 0x80;
  const Dtype dtype = compares_unsigned ? Dtype::u8 : Dtype::i8;
  SharedTables lock;
  byte_arithmetic_types().emplace(type, dtype);
  return dtype;
}

std::optional<Reduction> refused(PmpiReason reason) {
  note_pmpi_reason(reason);
  return std::nullopt;
}

std::optional<Reduction> decide_reduction(MPI_Datatype type, MPI_Op op) {
  auto as = [&](Dtype dtype) -> std::optional<Reduction> {
    if (auto shm_op = op_of(op, type, dtype)) return Reduction{dtype, *shm_op};
    return refused(PmpiReason::op_refused);
  };
  if (const auto dtype = dtype_of(type)) {
    if (auto served = op_of(op, type, *dtype)) return Reduction{*dtype, *served};
    if (is_untyped_byte(type) && mpi_accepts(type, op)) return as(byte_arithmetic_of(type));
    return refused(PmpiReason::op_refused);
  }
  const bool user_op = shared_find(user_ops(), op).has_value();
  // Fortran's types, from C or Fortran callers alike: reduced as the C type of the same bits,
  // with the operations the MPI accepts on them (a user op takes any type, and asking the MPI
  // would call the user's function).
  if (const auto fortran = fortran_element_of(type)) {
    if (user_op || mpi_accepts(type, op)) return as(*fortran);
    return refused(PmpiReason::op_refused);
  }
  if (is_untyped_byte(type)) {  // MPI_CHARACTER
    if (user_op) return as(Dtype::byte);
    if (mpi_accepts(type, op)) return as(byte_arithmetic_of(type));
    return refused(PmpiReason::op_refused);
  }
  // Derived types go to PMPI. A user op must see whole elements in the caller's layout, which
  // shmcoll's chunks do not promise. The predefined ops are defined on predefined types only:
  // Open MPI 4.1 and MPICH 4.0 refuse them on derived ones, even a contiguous run of floats with
  // MPI_SUM, and report the error in their own words.
  if (type == MPI_DATATYPE_NULL) return refused(PmpiReason::null_handle);
  int envelope[3], combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(type, &envelope[0], &envelope[1], &envelope[2], &combiner);
  if (combiner == MPI_COMBINER_NAMED) return refused(PmpiReason::not_reducible);
  if (user_op) return refused(PmpiReason::user_op_derived);
  return refused(mpi_accepts(type, op) ? PmpiReason::derived_type : PmpiReason::op_refused);
}

// The last pair this thread served, so a loop of one reduction decides in two compares whatever
// the type (a Fortran type is otherwise found after C's whole table and a map lookup). Stale once
// a type or op is forgotten.
struct LastReduction {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  std::uint64_t forgotten = 0;  // forgotten_handles() when it was decided
  std::optional<Reduction> reduction;
};
thread_local LastReduction last_reduction;

}  // namespace

bool is_predefined_op(MPI_Op op) {
  for (const auto& entry : kPredefinedOps) {
    if (entry.first == op) return true;
  }
  return false;
}

std::optional<Reduction> reduction_of(MPI_Datatype type, MPI_Op op) {
  const std::uint64_t forgotten = forgotten_handles();
  if (last_reduction.reduction && last_reduction.type == type && last_reduction.op == op &&
      last_reduction.forgotten == forgotten) {
    return last_reduction.reduction;
  }
  auto decided = decide_reduction(type, op);
  if (decided) last_reduction = {type, op, forgotten, decided};
  return decided;
}

void forget_reductions_on(MPI_Datatype type) {
  SharedTables lock;
  note_forgotten_handle();
  std::erase_if(accepted_pairs(), [type](const auto& entry) { return entry.first.first == type; });
  std::erase_if(bound_user_ops(), [type](const auto& entry) { return entry.first.second == type; });
  byte_arithmetic_types().erase(type);
}

void remember_user_op(MPI_Op op, MPI_User_function* function, bool commutative) {
  SharedTables lock;
  user_ops()[op] = {function, commutative, false};
}

void remember_fortran_user_op(MPI_Op op, MPI_User_function* function, bool commutative) {
  SharedTables lock;
  user_ops()[op] = {function, commutative, true};
}

void forget_user_op(MPI_Op op) {
  SharedTables lock;
  note_forgotten_handle();
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
    std::snprintf(message, sizeof message, "%s: %s %lld is out of range [0, %d)", call_, name_,
                  static_cast<long long>(value_), size_);
  } else {
    std::snprintf(message, sizeof message, "%s: %s%s must be non-negative, got %lld", call_, name_,
                  index, static_cast<long long>(value_));
  }
  return raise_class(comm, error_class_, message);
}

}  // namespace shmcoll::mpi
