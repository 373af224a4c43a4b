// The derived datatype engine. A type is a tree: leaves are predefined element types; an inner
// node places runs of `blocklength` copies of a child at byte displacements. Strided runs (the
// vector family) are stored as a formula, not a list, so a vector of a million blocks costs one
// node. Packing walks the tree in typemap order and copies whole runs where the child is compact.
#include "shmcoll/datatype.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <vector>

#include "util/address_space.hpp"
#include "util/copy.hpp"
#include "util/fail.hpp"

namespace shmcoll {

struct Datatype::Node {
  struct Run {  // `blocklength` consecutive children (each one child extent apart) at
                // `displacement`
    std::int64_t displacement;
    std::int64_t blocklength;
    std::shared_ptr<const Node> child;
  };
  // Strided: runs[0] repeated at i * stride for i < stride_count. Listed: each run once. A leaf
  // has no runs (it is compact, so packing never looks at them).
  std::vector<Run> runs;
  // Listed: where each run's data starts in one element's packed bytes, so a window into a long
  // element finds its first run by binary search.
  std::vector<std::size_t> run_starts;
  bool strided = false;
  std::int64_t stride_count = 0;
  std::int64_t stride = 0;

  std::size_t size = 0;
  std::int64_t lb = 0, ub = 0, true_lb = 0, true_ub = 0;
  std::size_t alignment = 1;
  // Bounds set by a resized type inside are sticky: they override the bounds of plain data around
  // them, and stop a struct's alignment padding (MPI's lb/ub markers, as Open MPI 4.1 computes
  // them; MPICH 4.0 pads such a struct anyway).
  bool sticky_lb = false, sticky_ub = false;
  bool compact = true;  // one element's data is one run from true_lb, in typemap order
  std::optional<Dtype> element_type;
  std::int64_t element_count = 0;

  bool contiguous() const { return compact && lb == true_lb && ub - lb == std::int64_t(size); }
  std::int64_t extent() const { return ub - lb; }
};

namespace {

using Node = Datatype::Node;

std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(Errc::invalid_argument, what, " overflows");
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(Errc::invalid_argument, what, " overflows");
  return r;
}

std::int64_t checked_sub(std::int64_t a, std::int64_t b, const char* what) {
  std::int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail(Errc::invalid_argument, what, " overflows");
  return r;
}

void check_count(const char* call, const char* name, std::int64_t value) {
  if (value < 0)
    fail(Errc::invalid_argument, call, ": ", name, " must be non-negative, got ", value);
}

std::size_t alignment_of(Dtype dtype) {
  return visit_dtype(dtype, [](auto zero) { return alignof(decltype(zero)); });
}

// Accumulates a node's bounds and properties run by run. add() takes the displacements of the
// lowest and highest child copy in the run and how many copies it holds.
struct Builder {
  struct Bound {
    bool sticky = false;
    std::optional<std::int64_t> value;
  };
  template <typename Pick>
  static void merge(Bound& bound, std::int64_t value, bool sticky, Pick pick) {
    if (sticky && !bound.sticky)
      bound = {true, value};
    else if (sticky == bound.sticky)
      bound.value = bound.value ? pick(*bound.value, value) : value;
  }

  Node node;
  Bound lb, ub;
  bool any = false;
  std::int64_t expected_next = 0;  // where the next run must start for the node to stay compact

  void add(std::int64_t first_disp, std::int64_t last_disp, std::int64_t copies, const Node& child,
           bool in_order) {
    if (copies == 0) return;
    const auto lo = std::min(first_disp, last_disp), hi = std::max(first_disp, last_disp);
    merge(lb, checked_add(lo, child.lb, "lower bound"), child.sticky_lb,
          [](auto a, auto b) { return std::min(a, b); });
    merge(ub, checked_add(hi, child.ub, "upper bound"), child.sticky_ub,
          [](auto a, auto b) { return std::max(a, b); });
    const std::int64_t tlb = checked_add(lo, child.true_lb, "true lower bound");
    const std::int64_t tub = checked_add(hi, child.true_ub, "true upper bound");
    const std::size_t bytes = static_cast<std::size_t>(checked_mul(copies, child.size, "size"));
    if (!any) {
      node.true_lb = tlb, node.true_ub = tub;
      node.element_type = child.element_type;
      expected_next = first_disp + child.true_lb;
    } else {
      node.true_lb = std::min(node.true_lb, tlb), node.true_ub = std::max(node.true_ub, tub);
      if (node.element_type != child.element_type) node.element_type.reset();
    }
    // Compact: this run continues exactly where the previous one ended, and its copies follow
    // each other without gaps.
    const bool run_compact =
        in_order && child.contiguous() && first_disp + child.true_lb == expected_next;
    node.compact = node.compact && run_compact;
    expected_next = checked_add(first_disp + child.true_lb, std::int64_t(bytes), "size");
    node.size =
        static_cast<std::size_t>(checked_add(std::int64_t(node.size), std::int64_t(bytes), "size"));
    node.element_count =
        checked_add(node.element_count, checked_mul(copies, child.element_count, "element count"),
                    "element count");
    node.alignment = std::max(node.alignment, child.alignment);
    any = true;
  }

  // A struct pads its extent to its strictest alignment, unless explicit bounds are inside.
  std::shared_ptr<const Node> finish(bool pad_to_alignment = false) {
    if (!any) node.element_type.reset();
    node.lb = lb.value.value_or(0), node.sticky_lb = lb.sticky;
    node.ub = ub.value.value_or(0), node.sticky_ub = ub.sticky;
    // Extents are differences of bounds: they must fit too.
    checked_sub(node.ub, node.lb, "extent");
    checked_sub(node.true_ub, node.true_lb, "true extent");
    if (pad_to_alignment && any && !lb.sticky && !ub.sticky) {
      const auto align = static_cast<std::int64_t>(node.alignment);
      const std::int64_t padded = checked_add(node.extent(), align - 1, "extent") / align * align;
      node.ub = checked_add(node.lb, padded, "extent");
    }
    return std::make_shared<const Node>(std::move(node));
  }
};

std::shared_ptr<const Node> make_strided(const char* call, std::int64_t count,
                                         std::int64_t blocklength, std::int64_t stride_bytes,
                                         const std::shared_ptr<const Node>& child) {
  check_count(call, "count", count);
  check_count(call, "blocklength", blocklength);
  Builder builder;
  const std::int64_t extent = child->extent();
  if (count > 0 && blocklength > 0) {
    // The extremes of i * stride + j * extent lie at the corners.
    const std::int64_t last_block = checked_mul(count - 1, stride_bytes, "stride");
    const std::int64_t last_in_block = checked_mul(blocklength - 1, extent, "blocklength");
    const std::int64_t corners[] = {0, last_block, last_in_block,
                                    checked_add(last_block, last_in_block, "stride")};
    const auto [lo, hi] = std::minmax_element(std::begin(corners), std::end(corners));
    std::int64_t block_bytes = 0;
    const bool in_order =
        extent >= 0 && (count == 1 || (!__builtin_mul_overflow(blocklength, extent, &block_bytes) &&
                                       stride_bytes == block_bytes));
    builder.add(*lo, *hi, checked_mul(count, blocklength, "count"), *child, in_order);
  }
  builder.node.runs.push_back({0, blocklength, child});
  builder.node.strided = true;
  builder.node.stride_count = count;
  builder.node.stride = stride_bytes;
  return builder.finish();
}

std::shared_ptr<const Node> make_listed(const char* call,
                                        std::span<const std::int64_t> blocklengths,
                                        std::span<const std::int64_t> displacements,
                                        std::span<const std::shared_ptr<const Node>> children,
                                        bool pad_to_alignment) {
  if (blocklengths.size() != displacements.size()) {
    fail(Errc::invalid_argument, call, ": ", blocklengths.size(), " blocklengths but ",
         displacements.size(), " displacements");
  }
  Builder builder;
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    check_count(call, "blocklength", blocklengths[i]);
    const std::shared_ptr<const Node>& child = children[children.size() == 1 ? 0 : i];
    const std::int64_t last = checked_add(
        displacements[i],
        checked_mul(std::max<std::int64_t>(blocklengths[i] - 1, 0), child->extent(), "blocklength"),
        "displacement");
    builder.node.run_starts.push_back(builder.node.size);
    builder.add(displacements[i], last, blocklengths[i], *child, child->extent() >= 0);
    builder.node.runs.push_back({displacements[i], blocklengths[i], child});
  }
  return builder.finish(pad_to_alignment);
}

Node build_leaf(Dtype dtype) {
  Node node;
  node.size = dtype_size(dtype);
  node.ub = node.true_ub = static_cast<std::int64_t>(node.size);
  node.alignment = alignment_of(dtype);
  node.element_type = dtype;
  node.element_count = 1;
  return node;
}

// One leaf per element type, made once and never freed, so passing a Dtype where a Datatype is
// expected (as every collective call does) never allocates. The pointers share no ownership
// (aliasing an empty shared_ptr): copying and dropping them touches no reference count, which
// costs two atomic operations per temporary Datatype otherwise.
const std::shared_ptr<const Node>& make_leaf(Dtype dtype) {
  static const auto leaves = [] {
    std::array<std::shared_ptr<const Node>, kDtypeCount> all;
    for (int d = 0; d < kDtypeCount; ++d) {
      const Node* immortal = new Node(build_leaf(static_cast<Dtype>(d)));
      all[d] = std::shared_ptr<const Node>(std::shared_ptr<const Node>(), immortal);
    }
    return all;
  }();
  if (!is_valid_dtype(dtype)) {
    fail(Errc::invalid_argument, "Datatype: dtype ", static_cast<int>(dtype),
         " is not a shmcoll::Dtype");
  }
  return leaves[static_cast<std::size_t>(dtype)];
}

// Copies one run of a type map. Runs of one small element (a matrix column, an array of
// structs' field) are the common case of non-contiguous types, and a library memcpy call per
// 4-byte run cost 4-5x its bytes: those sizes are copied inline.
inline void copy_run(char* to, const char* from, std::size_t bytes) {
  switch (bytes) {
    case 4: {
      std::uint32_t word;
      std::memcpy(&word, from, 4);
      std::memcpy(to, &word, 4);
      return;
    }
    case 8: {
      std::uint64_t word;
      std::memcpy(&word, from, 8);
      std::memcpy(to, &word, 8);
      return;
    }
    case 16: {
      std::uint64_t words[2];
      std::memcpy(words, from, 16);
      std::memcpy(to, words, 16);
      return;
    }
    default:
      copy_bytes(to, from, bytes);
  }
}

// Displacements apply to addresses that need not lie inside any object (address_space.hpp).
inline const char* at(const char* base, std::int64_t bytes) {
  return address_plus(base, bytes);
}

// Calls copy(address, bytes) for each run of data of one element at `base`, in typemap order.
template <typename Copy>
void for_each_run(const Node& node, const char* base, Copy& copy) {
  if (node.compact) return copy(at(base, node.true_lb), node.size);
  const auto visit_run = [&](const Node::Run& run, std::int64_t displacement) {
    const Node& child = *run.child;
    const char* first = at(base, displacement);
    if (child.contiguous())
      return copy(at(first, child.lb), child.size * std::size_t(run.blocklength));
    for (std::int64_t j = 0; j < run.blocklength; ++j)
      for_each_run(child, at(first, j * child.extent()), copy);
  };
  if (node.strided) {
    for (std::int64_t i = 0; i < node.stride_count; ++i) visit_run(node.runs[0], i * node.stride);
    return;
  }
  for (const Node::Run& run : node.runs) visit_run(run, run.displacement);
}

template <typename Copy>
void for_each_element_run(const char* call, const Node& node, const void* buffer,
                          std::int64_t count, Copy& copy) {
  check_count(call, "count", count);
  // Nothing to move: the other side may be a null pointer, which memcpy may not see.
  if (count == 0 || node.size == 0) return;
  const auto* base = static_cast<const char*>(buffer);
  if (node.contiguous()) return copy(at(base, node.lb), node.size * std::size_t(count));
  for (std::int64_t i = 0; i < count; ++i) for_each_run(node, at(base, i * node.extent()), copy);
}

// The packed bytes [start, start + bytes) of something, clipped to the window [lo, hi): calls
// copy(data + skipped, clipped bytes) when anything is left.
template <typename Copy>
void copy_clipped(const char* data, std::size_t start, std::size_t bytes, std::size_t lo,
                  std::size_t hi, Copy& copy) {
  const std::size_t from = std::max(start, lo), to = std::min(start + bytes, hi);
  if (from < to) copy(data + (from - start), to - from);
}

// As for_each_run, for the part of one element (whose packed bytes start at `start`) that falls
// in the window [lo, hi): runs and child elements wholly before the window are skipped by their
// sizes, and the walk stops at its end, so a window costs its own bytes plus the type's depth
// wherever it lies in an element, however long the element is.
template <typename Copy>
void for_each_run_clipped(const Node& node, const char* base, std::size_t start, std::size_t lo,
                          std::size_t hi, Copy& copy) {
  if (node.compact) return copy_clipped(at(base, node.true_lb), start, node.size, lo, hi, copy);
  const auto visit_run = [&](const Node::Run& run, std::int64_t displacement,
                             std::size_t run_start) {
    const Node& child = *run.child;
    const char* first = at(base, displacement);
    if (child.contiguous()) {
      const std::size_t bytes = child.size * std::size_t(run.blocklength);
      return copy_clipped(at(first, child.lb), run_start, bytes, lo, hi, copy);
    }
    if (child.size == 0) return;
    const std::int64_t skipped = lo > run_start ? std::int64_t((lo - run_start) / child.size) : 0;
    for (std::int64_t j = skipped; j < run.blocklength; ++j) {
      const std::size_t child_start = run_start + std::size_t(j) * child.size;
      if (child_start >= hi) return;
      for_each_run_clipped(child, at(first, j * child.extent()), child_start, lo, hi, copy);
    }
  };
  if (node.strided) {
    const Node::Run& run = node.runs[0];
    const std::size_t run_bytes = run.child->size * std::size_t(run.blocklength);
    if (run_bytes == 0) return;
    const std::int64_t skipped = lo > start ? std::int64_t((lo - start) / run_bytes) : 0;
    for (std::int64_t i = skipped; i < node.stride_count; ++i) {
      const std::size_t run_start = start + std::size_t(i) * run_bytes;
      if (run_start >= hi) return;
      visit_run(run, i * node.stride, run_start);
    }
    return;
  }
  // The last run starting at or before the window (runs before it end before the window).
  const std::size_t relative = lo > start ? lo - start : 0;
  auto k = std::size_t(std::upper_bound(node.run_starts.begin(), node.run_starts.end(), relative) -
                       node.run_starts.begin());
  for (k = k > 0 ? k - 1 : 0; k < node.runs.size(); ++k) {
    const std::size_t run_start = start + node.run_starts[k];
    if (run_start >= hi) return;
    visit_run(node.runs[k], node.runs[k].displacement, run_start);
  }
}

// As for_each_element_run, but only for the packed bytes [offset, offset + bytes). Returns the
// bytes visited.
template <typename Copy>
std::size_t for_each_run_in_window(const char* call, const Node& node, const void* buffer,
                                   std::int64_t count, std::size_t offset, std::size_t bytes,
                                   Copy& copy) {
  check_count(call, "count", count);
  const std::size_t total = node.size * std::size_t(count);
  const std::size_t end = offset + std::min(bytes, total - std::min(offset, total));
  if (offset >= end) return 0;
  const auto* base = static_cast<const char*>(buffer);
  if (node.contiguous()) {
    copy(at(base, node.lb + std::int64_t(offset)), end - offset);
    return end - offset;
  }
  // Only the elements cut by the window's edges need clipping: the ones wholly inside take the
  // plain walk, which costs no bounds per run (most of a window's elements, when they are short).
  const auto first = std::int64_t(offset / node.size);
  const auto last = std::int64_t((end - 1) / node.size);
  auto whole = [&](std::int64_t i) {
    return std::size_t(i) * node.size >= offset && std::size_t(i + 1) * node.size <= end;
  };
  for (std::int64_t i = first; i <= last; ++i) {
    const char* element = at(base, i * node.extent());
    if ((i == first || i == last) && !whole(i)) {
      for_each_run_clipped(node, element, std::size_t(i) * node.size, offset, end, copy);
    } else {
      for_each_run(node, element, copy);
    }
  }
  return end - offset;
}

}  // namespace

Datatype::Datatype(std::shared_ptr<const Node> node)
    : node_(std::move(node)),
      size_(node_->size),
      lb_(node_->lb),
      extent_(node_->extent()),
      contiguous_(node_->contiguous()) {}

Datatype::Datatype(Dtype element) : Datatype(make_leaf(element)) {}

Datatype Datatype::contiguous(std::int64_t count, const Datatype& old) {
  return Datatype(make_strided("Datatype::contiguous", count, 1, old.extent(), old.node_));
}

Datatype Datatype::vector(std::int64_t count, std::int64_t blocklength, std::int64_t stride,
                          const Datatype& old) {
  return Datatype(make_strided("Datatype::vector", count, blocklength,
                               checked_mul(stride, old.extent(), "stride"), old.node_));
}

Datatype Datatype::hvector(std::int64_t count, std::int64_t blocklength, std::int64_t stride_bytes,
                           const Datatype& old) {
  return Datatype(make_strided("Datatype::hvector", count, blocklength, stride_bytes, old.node_));
}

Datatype Datatype::indexed(std::span<const std::int64_t> blocklengths,
                           std::span<const std::int64_t> displacements, const Datatype& old) {
  std::vector<std::int64_t> bytes(displacements.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = checked_mul(displacements[i], old.extent(), "displacement");
  }
  return Datatype(make_listed("Datatype::indexed", blocklengths, bytes, {&old.node_, 1}, false));
}

Datatype Datatype::hindexed(std::span<const std::int64_t> blocklengths,
                            std::span<const std::int64_t> byte_displacements, const Datatype& old) {
  return Datatype(
      make_listed("Datatype::hindexed", blocklengths, byte_displacements, {&old.node_, 1}, false));
}

Datatype Datatype::indexed_block(std::int64_t blocklength,
                                 std::span<const std::int64_t> displacements, const Datatype& old) {
  check_count("Datatype::indexed_block", "blocklength", blocklength);
  const std::vector<std::int64_t> blocklengths(displacements.size(), blocklength);
  return indexed(blocklengths, displacements, old);
}

Datatype Datatype::structure(std::span<const std::int64_t> blocklengths,
                             std::span<const std::int64_t> byte_displacements,
                             std::span<const Datatype> types) {
  if (types.size() != blocklengths.size()) {
    fail(Errc::invalid_argument, "Datatype::structure: ", blocklengths.size(), " blocklengths but ",
         types.size(), " types");
  }
  std::vector<std::shared_ptr<const Node>> children;
  for (const Datatype& type : types) children.push_back(type.node_);
  if (children.empty()) children.push_back(make_leaf(Dtype::byte));  // a type with no elements
  return Datatype(
      make_listed("Datatype::structure", blocklengths, byte_displacements, children, true));
}

Datatype Datatype::resized(const Datatype& old, std::int64_t lb, std::int64_t extent) {
  if (extent < 0)
    fail(Errc::invalid_argument, "Datatype::resized: extent must be non-negative, got ", extent);
  Node node = *old.node_;  // the same data description under new bounds
  node.lb = lb;
  node.ub = checked_add(lb, extent, "Datatype::resized: lb + extent");
  node.sticky_lb = node.sticky_ub = true;
  return Datatype(std::make_shared<const Node>(std::move(node)));
}

std::int64_t Datatype::true_lb() const noexcept {
  return node_->true_lb;
}
std::int64_t Datatype::true_extent() const noexcept {
  return node_->true_ub - node_->true_lb;
}
std::optional<Dtype> Datatype::element_type() const noexcept {
  return node_->element_type;
}
std::int64_t Datatype::element_count() const noexcept {
  return node_->element_count;
}

std::size_t Datatype::pack(const void* buffer, std::int64_t count, void* packed) const {
  auto* out = static_cast<char*>(packed);
  auto copy = [&out](const char* from, std::size_t bytes) {
    copy_run(out, from, bytes);
    out += bytes;
  };
  for_each_element_run("Datatype::pack", *node_, buffer, count, copy);
  return static_cast<std::size_t>(out - static_cast<char*>(packed));
}

std::size_t Datatype::pack_range(const void* buffer, std::int64_t count, std::size_t offset,
                                 std::size_t bytes, void* packed) const {
  auto* out = static_cast<char*>(packed);
  auto copy = [&out](const char* from, std::size_t n) {
    copy_run(out, from, n);
    out += n;
  };
  return for_each_run_in_window("Datatype::pack_range", *node_, buffer, count, offset, bytes, copy);
}

std::size_t Datatype::unpack_range(const void* packed, std::int64_t count, std::size_t offset,
                                   std::size_t bytes, void* buffer) const {
  const auto* in = static_cast<const char*>(packed);
  auto copy = [&in](const char* to, std::size_t n) {
    copy_run(const_cast<char*>(to), in, n);
    in += n;
  };
  return for_each_run_in_window("Datatype::unpack_range", *node_, buffer, count, offset, bytes,
                                copy);
}

std::size_t Datatype::unpack(const void* packed, std::int64_t count, void* buffer) const {
  const auto* in = static_cast<const char*>(packed);
  auto copy = [&in](const char* to, std::size_t bytes) {
    copy_run(const_cast<char*>(to), in, bytes);
    in += bytes;
  };
  for_each_element_run("Datatype::unpack", *node_, buffer, count, copy);
  return static_cast<std::size_t>(in - static_cast<const char*>(packed));
}

}  // namespace shmcoll
