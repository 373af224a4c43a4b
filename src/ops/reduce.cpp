#include "ops/reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/simd_kernels.hpp"
#include "shmcoll/shmcoll.hpp"
#include "util/address_space.hpp"
#include "util/copy.hpp"
#include "util/fail.hpp"

namespace shmcoll::ops {

namespace {

// A user function computes inoutvec = invec op inoutvec. Folding right to left,
//   acc = in[k-1];  acc = in[k-2] op acc;  ...;  acc = in[0] op acc,
// gives in[0] op (in[1] op (... op in[k-1])), which associativity makes the rank-order result.
// The accumulator is a private block, so `out` may alias any input.
void reduce_user(Dtype dtype, const Op::UserFunction& function, void* out,
                 const void* const* inputs, int input_count, std::size_t count) {
  alignas(64) unsigned char block[kernels::kBlockBytes];
  const std::size_t element = dtype_size(dtype);
  const std::size_t per_block = sizeof(block) / element;
  for (std::size_t first = 0; first < count; first += per_block) {
    const std::size_t n = std::min(per_block, count - first);
    const std::size_t offset = first * element;
    copy_bytes(block, static_cast<const char*>(inputs[input_count - 1]) + offset, n * element);
    for (int k = input_count - 2; k >= 0; --k) {
      function(static_cast<const char*>(inputs[k]) + offset, block, n, dtype);
    }
    copy_bytes(static_cast<char*>(out) + offset, block, n * element);
  }
}

}  // namespace

std::string op_undefined_reason(const Op& op, Dtype dtype) {
  if (!is_valid_dtype(dtype)) {
    return "dtype " + std::to_string(static_cast<int>(dtype)) + " is not a shmcoll::Dtype";
  }
  const Op::Kind kind = op.kind();
  if (static_cast<unsigned>(kind) > static_cast<unsigned>(Op::user)) {
    return "op " + std::to_string(static_cast<int>(kind)) + " is not a shmcoll::Op";
  }
  if (op_defined_on(op, dtype)) return {};
  const char* allowed = "integer types and byte";
  if (kind == Op::maxloc || kind == Op::minloc) allowed = "the pair types (float_int, 2int, ...)";
  if (kind == Op::sum || kind == Op::prod) allowed = "integer, floating and complex types";
  if (kind == Op::min || kind == Op::max) allowed = "integer and floating types";
  if (kind == Op::land || kind == Op::lor || kind == Op::lxor) allowed = "integer types and bool";
  if (kind == Op::user) allowed = "ops made by Op::create";
  return std::string("op ") + op_name(op) + " is not defined on dtype " + dtype_name(dtype) +
         " (MPI allows " + op_name(op) + " only on " + allowed + ")";
}

void reduce_kary(Dtype dtype, const Op& op, void* out, const void* const* inputs, int input_count,
                 std::size_t count) {
  if (count == 0 || input_count <= 0) return;
  if (input_count == 1) {
    if (out != inputs[0]) std::memmove(out, inputs[0], count * dtype_size(dtype));
    return;
  }
  if (op.kind() == Op::user)
    return reduce_user(dtype, *op.user_function(), out, inputs, input_count, count);
  using namespace simd;
  switch (dtype) { SHMCOLL_ALL_TYPES(SHMCOLL_DISPATCH_CASE) }
  fail(Errc::invalid_argument, "reduce: dtype ", static_cast<int>(dtype),
       " is not a shmcoll::Dtype");
}

void reduce_into(Dtype dtype, const Op& op, const void* in, void* inout, std::size_t count) {
  const void* inputs[] = {in, inout};
  reduce_kary(dtype, op, inout, inputs, 2, count);
}

void reduce_pair(Dtype dtype, const Op& op, const void* a, const void* b, void* out,
                 std::size_t count) {
  const void* inputs[] = {a, b};
  reduce_kary(dtype, op, out, inputs, 2, count);
}

const char* simd_level() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    return "x86-64-v4 (AVX-512)";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
      __builtin_cpu_supports("fma")) {
    return "x86-64-v3 (AVX2)";
  }
  return "x86-64 baseline (SSE2)";
#else
  return "target default";
#endif
}

}  // namespace shmcoll::ops

namespace shmcoll {

void reduce_local(const void* in, void* inout, std::int64_t count, Dtype dtype, const Op& op) {
  const std::string reason = ops::op_undefined_reason(op, dtype);
  if (!reason.empty()) fail(Errc::invalid_argument, "reduce_local: ", reason);
  if (count < 0)
    fail(Errc::invalid_argument, "reduce_local: count must be non-negative, got ", count);
  if (static_cast<std::uint64_t>(count) > kMostAddressBytes / dtype_size(dtype)) {
    fail(Errc::invalid_argument, "reduce_local: count ", count, " of ", dtype_name(dtype),
         " is more bytes than any address space");
  }
  if (count > 0 && (in == nullptr || inout == nullptr)) {
    fail(Errc::invalid_argument, "reduce_local: ", in == nullptr ? "in" : "inout",
         " is null with count ", count);
  }
  ops::reduce_into(dtype, op, in, inout, static_cast<std::size_t>(count));
}

}  // namespace shmcoll
