// Derived datatypes: MPI's layouts of elements in memory, and packing them into contiguous bytes.
//
// A Datatype describes where the bytes of one element lie relative to the element's address, as
// MPI's typemap does. `count` elements of a type start at buffer + i * extent(). Displacements may
// be negative. Datatypes are immutable values, cheap to copy (they share their description).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "shmcoll/types.hpp"

namespace shmcoll {

class SHMCOLL_API Datatype {
 public:
  Datatype(Dtype element);  // implicit: every predefined element type is a datatype

  // MPI_Type_contiguous, _vector (stride in extents of old), _create_hvector (stride in bytes).
  static Datatype contiguous(std::int64_t count, const Datatype& old);
  static Datatype vector(std::int64_t count, std::int64_t blocklength, std::int64_t stride,
                         const Datatype& old);
  static Datatype hvector(std::int64_t count, std::int64_t blocklength, std::int64_t stride_bytes,
                          const Datatype& old);
  // MPI_Type_indexed (displacements in extents of old), _create_hindexed (in bytes),
  // _create_indexed_block (one block length).
  static Datatype indexed(std::span<const std::int64_t> blocklengths,
                          std::span<const std::int64_t> displacements, const Datatype& old);
  static Datatype hindexed(std::span<const std::int64_t> blocklengths,
                           std::span<const std::int64_t> byte_displacements, const Datatype& old);
  static Datatype indexed_block(std::int64_t blocklength,
                                std::span<const std::int64_t> displacements, const Datatype& old);
  // MPI_Type_create_struct. Unless a member was resized, the extent is padded up to the strictest
  // alignment of its elements, as C pads a struct (MPI's "epsilon").
  static Datatype structure(std::span<const std::int64_t> blocklengths,
                            std::span<const std::int64_t> byte_displacements,
                            std::span<const Datatype> types);
  // MPI_Type_create_resized: same data, new lower bound and extent.
  static Datatype resized(const Datatype& old, std::int64_t lb, std::int64_t extent);

  // Read on every call's path, so kept beside the description and inline.
  std::size_t size() const noexcept { return size_; }  // bytes of data in one element
  std::int64_t lb() const noexcept { return lb_; }
  std::int64_t ub() const noexcept { return lb_ + extent_; }
  // ub - lb: the distance between consecutive elements
  std::int64_t extent() const noexcept { return extent_; }
  std::int64_t true_lb() const noexcept;  // the first and last byte actually holding data
  std::int64_t true_extent() const noexcept;
  // count elements are one run of count * size() bytes at buffer + lb(), in typemap order.
  bool is_contiguous() const noexcept { return contiguous_; }
  // The predefined element type, when every element of the typemap has the same one, and how
  // many of those one element of this type holds (what predefined reductions need).
  std::optional<Dtype> element_type() const noexcept;
  std::int64_t element_count() const noexcept;

  // Copies `count` elements at `buffer` into `packed` in typemap order, or back; each returns
  // count * size() bytes.
  std::size_t pack(const void* buffer, std::int64_t count, void* packed) const;
  std::size_t unpack(const void* packed, std::int64_t count, void* buffer) const;
  // The same for the packed bytes [offset, offset + bytes) only, so a long message can move in
  // pieces; each returns the bytes copied (fewer when the packed data ends inside the window).
  std::size_t pack_range(const void* buffer, std::int64_t count, std::size_t offset,
                         std::size_t bytes, void* packed) const;
  std::size_t unpack_range(const void* packed, std::int64_t count, std::size_t offset,
                           std::size_t bytes, void* buffer) const;

  struct Node;  // the description, defined in src/ops/datatype.cpp

 private:
  explicit Datatype(std::shared_ptr<const Node> node);
  std::shared_ptr<const Node> node_;
  std::size_t size_;
  std::int64_t lb_, extent_;
  bool contiguous_;
};

}  // namespace shmcoll
