// Any committed MPI datatype as a shmcoll Datatype, learned from MPI itself: where walking the
// constructor tree does not reach (MPI_Type_create_darray; a combiner this layer does not know),
// pack a buffer whose bytes spell their own offsets and read the typemap back from the packed
// stream. MPI's packing order is typemap order, so the runs found are the type's, exactly. Each
// pass reads one byte of every offset, so a type spanning N bytes takes ceil(log256 N) packs.
#include <cstdint>
#include <vector>

#include "mpi/layer.hpp"
#include "util/address_space.hpp"

namespace shmcoll::mpi {

std::optional<Datatype> probe_datatype(MPI_Datatype type) {
  MPI_Aint true_lb = 0, true_extent = 0;
  int size = 0;
  if (PMPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS ||
      PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0 || true_extent < 0 ||
      static_cast<std::size_t>(true_extent) > kProbeMaxBytes) {
    return std::nullopt;
  }
  std::vector<std::int64_t> lengths, displacements;
  if (size > 0) {
    std::vector<unsigned char> source(static_cast<std::size_t>(true_extent));
    std::vector<unsigned char> packed(static_cast<std::size_t>(size));
    std::vector<std::uint32_t> offset_of(packed.size(), 0);
    for (int shift = 0; shift < 32 && (MPI_Aint{1} << shift) < true_extent; shift += 8) {
      for (std::size_t i = 0; i < source.size(); ++i) source[i] = (i >> shift) & 0xff;
      int position = 0;
      if (PMPI_Pack(address_plus(source.data(), -true_lb), 1, type, packed.data(), size, &position,
                    MPI_COMM_SELF) != MPI_SUCCESS ||
          position != size) {
        return std::nullopt;
      }
      for (std::size_t j = 0; j < packed.size(); ++j)
        offset_of[j] |= std::uint32_t(packed[j]) << shift;
    }
    for (std::size_t j = 0; j < packed.size(); ++j) {
      if (j > 0 && offset_of[j] == offset_of[j - 1] + 1) {
        ++lengths.back();
      } else {
        lengths.push_back(1);
        displacements.push_back(true_lb + std::int64_t(offset_of[j]));
      }
    }
  }
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  return Datatype::resized(Datatype::hindexed(lengths, displacements, Datatype(Dtype::byte)), lb,
                           extent);
}

}  // namespace shmcoll::mpi
