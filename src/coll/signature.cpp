#include "coll/signature.hpp"

#include <string_view>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll {

const char* collective_name(Collective collective) {
  static constexpr const char* names[] = {
      "barrier",   "bcast",      "reduce",   "allreduce", "reduce_scatter", "reduce_scatter_block",
      "scan",      "exscan",     "scatter",  "scatterv",  "gather",         "gatherv",
      "allgather", "allgatherv", "alltoall", "alltoallv", "alltoallw"};
  static_assert(std::size(names) == kCollectiveCount);
  const auto index = static_cast<unsigned>(collective);
  return index < std::size(names) ? names[index] : "?";
}

namespace coll {

namespace {

// Bit fields of the call word, high to low; a field holds its value + 1, so 0 means "absent".
constexpr int kKindShift = 59;   // 5 bits
constexpr int kOpShift = 54;     // 5 bits
constexpr int kDtypeShift = 48;  // 6 bits
constexpr int kRootShift = 0;    // 32 bits: every int root + 1
// The count word: a presence bit above the count itself.
constexpr std::uint64_t kCountPresent = 1ull << 63;
constexpr std::uint64_t kCountMask = kCountPresent - 1;

std::uint64_t field(std::optional<int> value, int shift, std::uint64_t modulus) {
  return value ? (static_cast<std::uint64_t>(*value) % modulus + 1) << shift : 0;
}

std::optional<int> unfield(std::uint64_t bits, int shift, std::uint64_t width_mask) {
  const std::uint64_t value = (bits >> shift) & width_mask;
  if (value == 0) return std::nullopt;
  return static_cast<int>(value - 1);
}

// What the count field means for each kind of call.
const char* count_label(Collective kind) {
  switch (kind) {
    case Collective::bcast:
      return "bytes";
    case Collective::scatter:
    case Collective::gather:
    case Collective::allgather:
    case Collective::alltoall:
      return "block bytes";
    case Collective::reduce_scatter:
    case Collective::allgatherv:
      return "recvcounts hash";
    case Collective::reduce_scatter_block:
      return "recvcount";
    default:
      return "count";
  }
}

std::string describe(const CallSignature& call) {
  std::string text = collective_name(call.kind);
  std::string_view separator = "(";
  auto add = [&](std::string_view part) {
    text.append(separator).append(part);
    separator = ", ";
  };
  if (call.root) add("root " + std::to_string(*call.root));
  if (call.count) add(std::string(count_label(call.kind)) + " " + std::to_string(*call.count));
  if (call.dtype) add(std::string("dtype ") + dtype_name(static_cast<Dtype>(*call.dtype)));
  if (call.op) add(std::string("op ") + op_name(Op(static_cast<Op::Kind>(*call.op))));
  return separator == "(" ? text + "()" : text + ")";
}

}  // namespace

shm::Signature CallSignature::encode() const {
  std::uint64_t bits = (static_cast<std::uint64_t>(kind) + 1) << kKindShift;  // never 0
  bits |= field(root, kRootShift, 0xffffffff);
  bits |= field(op, kOpShift, 0x1f);
  bits |= field(dtype, kDtypeShift, 0x3f);
  return {bits, count ? kCountPresent | (*count & kCountMask) : 0};
}

CallSignature CallSignature::decode(const shm::Signature& signature) {
  const std::uint64_t bits = signature.call;
  CallSignature call{static_cast<Collective>((bits >> kKindShift) - 1)};
  call.root = unfield(bits, kRootShift, 0xffffffff);
  call.op = unfield(bits, kOpShift, 0x1f);
  call.dtype = unfield(bits, kDtypeShift, 0x3f);
  if (signature.count & kCountPresent) call.count = signature.count & kCountMask;
  return call;
}

std::uint64_t hash_counts(std::span<const std::int64_t> counts, std::size_t unit_bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the byte counts
  for (std::int64_t count : counts) {
    hash ^= static_cast<std::uint64_t>(count) * unit_bytes;
    hash *= 0x100000001b3ull;
  }
  return (hash ^ (hash >> 63)) & kCountMask;  // the count word holds 63 bits
}

std::string describe_mismatch(std::uint32_t rank_a, const shm::Signature& signature_a,
                              std::uint32_t rank_b, const shm::Signature& signature_b) {
  if (!signature_a.checked() || !signature_b.checked()) {  // one of them is no longer on record
    const bool a_known = signature_a.checked();
    return "rank " + std::to_string(a_known ? rank_a : rank_b) + " called " +
           describe(CallSignature::decode(a_known ? signature_a : signature_b)) + " but rank " +
           std::to_string(a_known ? rank_b : rank_a) + " made a different call";
  }
  const CallSignature a = CallSignature::decode(signature_a);
  const CallSignature b = CallSignature::decode(signature_b);
  const char* differs = "the calls differ";
  if (a.kind != b.kind) {
    differs = "the collective differs";
  } else if (a.root != b.root) {
    differs = "the root differs";
  } else if (a.op != b.op) {
    differs = "the op differs";
  } else if (a.dtype != b.dtype) {
    differs = "the datatype differs";
  } else if (a.count != b.count) {
    differs = a.kind == Collective::reduce_scatter || a.kind == Collective::allgatherv
                  ? "recvcounts differ"
                  : "the count differs";
  }
  return "rank " + std::to_string(rank_a) + " called " + describe(a) + " but rank " +
         std::to_string(rank_b) + " called " + describe(b) + ": " + differs;
}

}  // namespace coll
}  // namespace shmcoll
