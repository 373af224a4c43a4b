// MPI datatypes as shmcoll Datatypes. A derived type is decoded once, by walking its
// constructor tree with MPI_Type_get_envelope/contents (every combiner MPI 4.0 defines; a newer
// one by probing MPI's packing: datatype_probe.cpp), and cached per handle until the MPI frees
// the type (a freed handle may come back as a different type). Every rank must be able to
// describe its type, or the ranks of one call would take different paths: a type only the probe
// reaches and too large for it is the one case left. Also the layer's reused arrays for
// v-collective arguments.
#include <algorithm>
#include <array>
#include <map>
#include <vector>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

namespace {

std::optional<Datatype> decode(MPI_Datatype type);

// MPI_Type_create_subarray as nested hvectors: dimension by dimension from the slowest, placed
// at the start corner and resized to the whole array, as the standard defines it.
Datatype subarray(const std::vector<int>& ints, const Datatype& old) {
  const int dims = ints[0];
  const bool c_order = ints[1 + 3 * dims] == MPI_ORDER_C;
  // Dimension d of the C-order view, the last one varying fastest.
  auto at = [&](int base, int d) { return ints[1 + base * dims + (c_order ? d : dims - 1 - d)]; };
  std::vector<std::int64_t> stride(dims);
  std::int64_t bytes = old.extent();
  for (int d = dims - 1; d >= 0; --d) {
    stride[d] = bytes;
    bytes *= at(0, d);
  }
  Datatype made = Datatype::contiguous(at(1, dims - 1), old);
  std::int64_t offset = at(2, dims - 1) * stride[dims - 1];
  for (int d = dims - 2; d >= 0; --d) {
    made = Datatype::hvector(at(1, d), 1, stride[d], made);
    offset += at(2, d) * stride[d];
  }
  const std::int64_t one = 1;
  made = Datatype::hindexed({&one, 1}, {&offset, 1}, made);
  return Datatype::resized(made, 0, bytes);
}

// One dimension of a distributed array, as the standard defines it: the elements of a
// dimension of `global` elements of `old` that fall in this process's blocks of `block`, dealt
// out cyclically to `processes` processes (coordinate `coordinate`), in increasing order,
// resized to the whole dimension. Full blocks make one hvector; a last, cut block follows it.
Datatype cyclic_dimension(std::int64_t block, std::int64_t global, std::int64_t coordinate,
                          std::int64_t processes, const Datatype& old) {
  const std::int64_t element = old.extent();
  const std::int64_t first = coordinate * block, period = block * processes;
  const std::int64_t full = first + block <= global ? (global - first - block) / period + 1 : 0;
  const std::int64_t cut_at = first + full * period;
  const std::int64_t cut = cut_at < global ? std::min(block, global - cut_at) : 0;
  std::vector<Datatype> parts{Datatype::hvector(full, block, period * element, old)};
  std::vector<std::int64_t> lengths{1}, displacements{first * element};
  if (cut > 0) {
    parts.push_back(Datatype::contiguous(cut, old));
    lengths.push_back(1);
    displacements.push_back(cut_at * element);
  }
  return Datatype::resized(Datatype::structure(lengths, displacements, parts), 0, global * element);
}

// MPI_Type_create_darray: dimension by dimension from the fastest varying, each a cyclic
// distribution of the last (block: one block of darg, by default ceil(gsize / psize), per
// process; none: the whole dimension). The process grid is numbered in row-major order, whatever
// the array's order.
std::optional<Datatype> darray(const std::vector<int>& ints, const Datatype& old) {
  const int rank = ints[1], dims = ints[2];
  const int* gsizes = &ints[3];
  const int* distribs = &ints[3 + dims];
  const int* dargs = &ints[3 + 2 * dims];
  const int* psizes = &ints[3 + 3 * dims];
  const bool c_order = ints[3 + 4 * dims] == MPI_ORDER_C;
  std::vector<std::int64_t> coordinate(dims);
  for (int d = dims - 1, rest = rank; d >= 0; --d) {
    coordinate[d] = rest % psizes[d];
    rest /= psizes[d];
  }
  Datatype made = old;
  for (int step = 0; step < dims; ++step) {
    const int d = c_order ? dims - 1 - step : step;
    const std::int64_t global = gsizes[d], processes = psizes[d];
    std::int64_t block = dargs[d];
    if (distribs[d] == MPI_DISTRIBUTE_NONE) {
      block = global;
    } else if (block == MPI_DISTRIBUTE_DFLT_DARG) {
      block = distribs[d] == MPI_DISTRIBUTE_BLOCK ? (global + processes - 1) / processes : 1;
    }
    if (block <= 0) return std::nullopt;
    made = cyclic_dimension(block, global, coordinate[d], processes, made);
  }
  return made;
}

std::optional<Datatype> decode_named(MPI_Datatype type) {
  if (const auto dtype = dtype_of(type)) return Datatype(*dtype);
  // Other named types (Fortran's, MPI_PACKED, ...) move as bytes when they are one plain run.
  MPI_Aint lb = 0, extent = 0;
  int size = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_size(type, &size);
  if (lb != 0 || size <= 0 || extent != size) return std::nullopt;
  return Datatype::contiguous(size, Datatype(Dtype::byte));
}

std::optional<Datatype> decode_derived(MPI_Datatype type, int combiner, int int_count,
                                       int address_count, int type_count) {
  std::vector<int> ints(int_count);
  std::vector<MPI_Aint> addresses(address_count);
  std::vector<MPI_Datatype> handles(type_count);
  PMPI_Type_get_contents(type, int_count, address_count, type_count, ints.data(), addresses.data(),
                         handles.data());
  std::vector<Datatype> inner;
  bool decoded = true;
  for (MPI_Datatype handle : handles) {
    if (auto made = decode(handle)) {
      inner.push_back(*made);
    } else {
      decoded = false;
    }
    // get_contents hands out new handles for derived types, which the caller frees.
    int n1, n2, n3, inner_combiner;
    PMPI_Type_get_envelope(handle, &n1, &n2, &n3, &inner_combiner);
    if (inner_combiner != MPI_COMBINER_NAMED) PMPI_Type_free(&handle);
  }
  if (!decoded) return std::nullopt;

  const std::int64_t count = int_count > 0 ? ints[0] : 0;
  auto wide = [](auto first, std::int64_t n) {
    return std::vector<std::int64_t>(first, first + n);
  };
  switch (combiner) {
    case MPI_COMBINER_DUP:
      return inner[0];
    case MPI_COMBINER_CONTIGUOUS:
      return Datatype::contiguous(count, inner[0]);
    case MPI_COMBINER_VECTOR:
      return Datatype::vector(count, ints[1], ints[2], inner[0]);
    case MPI_COMBINER_HVECTOR:
      return Datatype::hvector(count, ints[1], addresses[0], inner[0]);
    case MPI_COMBINER_INDEXED:
      return Datatype::indexed(wide(&ints[1], count), wide(&ints[1 + count], count), inner[0]);
    case MPI_COMBINER_HINDEXED:
      return Datatype::hindexed(wide(&ints[1], count), wide(addresses.data(), count), inner[0]);
    case MPI_COMBINER_INDEXED_BLOCK:
      return Datatype::indexed_block(ints[1], wide(&ints[2], count), inner[0]);
    case MPI_COMBINER_HINDEXED_BLOCK:
      return Datatype::hindexed(std::vector<std::int64_t>(count, ints[1]),
                                wide(addresses.data(), count), inner[0]);
    case MPI_COMBINER_STRUCT:
      return Datatype::structure(wide(&ints[1], count), wide(addresses.data(), count), inner);
    case MPI_COMBINER_RESIZED:
      return Datatype::resized(inner[0], addresses[0], addresses[1]);
    case MPI_COMBINER_SUBARRAY:
      return subarray(ints, inner[0]);
    case MPI_COMBINER_DARRAY:
      return darray(ints, inner[0]);
    default:  // anything newer: probed where the type is committed
      return std::nullopt;
  }
}

// Named types, and Fortran's parameterized ones (MPI_Type_create_f90_*), which are basic types as
// named ones are: neither is made from other types, and neither is ever freed.
bool is_basic(int combiner) {
  return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
         combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}

// The decoded type is held to MPI's own size and bounds: an MPI may pad a struct's extent
// differently, and MPI's word is the one the program was written against.
std::optional<Datatype> decode(MPI_Datatype type) {
  int int_count = 0, address_count = 0, type_count = 0, combiner = 0;
  PMPI_Type_get_envelope(type, &int_count, &address_count, &type_count, &combiner);
  if (is_basic(combiner)) return decode_named(type);
  auto made = decode_derived(type, combiner, int_count, address_count, type_count);
  if (!made) return std::nullopt;
  MPI_Aint lb = 0, extent = 0;
  int size = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  PMPI_Type_size(type, &size);
  if (made->size() != static_cast<std::size_t>(size)) return std::nullopt;
  if (made->lb() != lb || made->extent() != extent) return Datatype::resized(*made, lb, extent);
  return made;
}

std::map<MPI_Datatype, std::optional<Datatype>>& decoded_types() {
  static std::map<MPI_Datatype, std::optional<Datatype>> types;
  return types;
}

// The calls' arrays, reused from call to call by each thread.
thread_local std::array<std::vector<std::int64_t>, 4> wide_arrays;
thread_local std::array<std::vector<Datatype>, 2> type_arrays;

std::vector<std::int64_t>& wide_array(int n, int slot) {
  auto& array = wide_arrays[slot];
  if (array.size() < static_cast<std::size_t>(n)) array.resize(n);
  return array;
}

// The last type this thread found decoded, so a loop over one type takes no lock.
struct LastType {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  std::uint64_t forgotten = 0;  // forgotten_handles() when it was found
  const Datatype* decoded = nullptr;
};
thread_local LastType last_type;

// `type`'s entry (decoded, or not decodable), nullopt when not yet tried. The map's nodes stay
// where they are until the type is freed, so the pointer may be used after the lock is let go.
std::optional<const std::optional<Datatype>*> find_decoded(MPI_Datatype type) {
  SharedTables lock;
  const auto found = decoded_types().find(type);
  if (found == decoded_types().end()) return std::nullopt;
  return &found->second;
}

// The MPI runs this when it frees a type the layer cached, whoever frees it: the program, or an
// MPI's own binding (MPICH's mpi_f08 makes a type for a strided array section, passes it to the C
// entry point and frees it with PMPI_Type_free, and the next section's type gets its handle).
int forget_freed_type(MPI_Datatype type, int, void*, void*) {
  forget_datatype(type);
  forget_reductions_on(type);
  return MPI_SUCCESS;
}

}  // namespace

void watch_for_free(MPI_Datatype type) {
  int int_count = 0, address_count = 0, type_count = 0, combiner = MPI_COMBINER_NAMED;
  PMPI_Type_get_envelope(type, &int_count, &address_count, &type_count, &combiner);
  if (is_basic(combiner)) return;
  static int keyval = [] {
    int made = MPI_KEYVAL_INVALID;
    PMPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, forget_freed_type, &made, nullptr);
    return made;
  }();
  PMPI_Type_set_attr(type, keyval, nullptr);
}

const Datatype* datatype_of(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) {
    note_pmpi_reason(PmpiReason::null_handle);
    return nullptr;
  }
  const std::uint64_t forgotten = forgotten_handles();
  if (last_type.type == type && last_type.forgotten == forgotten) return last_type.decoded;
  auto found = find_decoded(type);
  if (!found) {
    // Decoded with no lock held (the MPI answers); a thread that decoded it meanwhile wins.
    std::optional<Datatype> made = decode(type);
    if (!made) made = probe_datatype(type);  // (committed: a collective's types are)
    {
      SharedTables lock;
      found = &decoded_types().emplace(type, std::move(made)).first->second;
    }
    watch_for_free(type);
  }
  const std::optional<Datatype>& decoded = **found;
  if (!decoded) {
    note_pmpi_reason(PmpiReason::datatype_unknown);
    return nullptr;
  }
  last_type = {type, forgotten, &*decoded};
  return &*decoded;
}

void forget_datatype(MPI_Datatype type) {
  SharedTables lock;
  decoded_types().erase(type);
  note_forgotten_handle();
}

const Datatype& unused_type() {
  static const Datatype unused(Dtype::byte);
  return unused;
}

namespace {

template <typename Value>
std::span<const std::int64_t> widen_any(const Value* values, int n, int slot) {
  if (!values || n <= 0) return {};
  auto& array = wide_array(n, slot);
  for (int i = 0; i < n; ++i) array[i] = static_cast<std::int64_t>(values[i]);
  return {array.data(), static_cast<std::size_t>(n)};
}

}  // namespace

std::span<const std::int64_t> widen(const int* values, int n, int slot) {
  return widen_any(values, n, slot);
}

std::span<const std::int64_t> widen(const long long* values, int n, int slot) {
  return widen_any(values, n, slot);
}

std::span<const std::int64_t> widen(const long* values, int n, int slot) {
  return widen_any(values, n, slot);
}

std::span<const std::int64_t> repeat(std::int64_t value, int n, int slot) {
  auto& array = wide_array(n, slot);
  std::fill_n(array.begin(), n, value);
  return {array.data(), static_cast<std::size_t>(n)};
}

std::optional<std::span<const Datatype>> datatypes_of(const MPI_Datatype* types,
                                                      std::span<const std::int64_t> counts, int n,
                                                      int slot) {
  if (!types || counts.size() < static_cast<std::size_t>(n)) return std::span<const Datatype>{};
  auto& array = type_arrays[slot];
  if (array.size() < static_cast<std::size_t>(n)) array.resize(n, unused_type());
  for (int i = 0; i < n; ++i) {
    // A peer that moves nothing may name any handle, even MPI_DATATYPE_NULL.
    const Datatype* type = counts[i] == 0 ? &unused_type() : datatype_of(types[i]);
    if (!type) return std::nullopt;
    array[i] = *type;
  }
  return std::span<const Datatype>{array.data(), static_cast<std::size_t>(n)};
}

}  // namespace shmcoll::mpi
