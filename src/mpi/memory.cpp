// MPI_Alloc_mem and MPI_Free_mem: memory a program asks MPI for is shared pages from the start
// (shm/shared_pages.hpp), which the collectives read in one copy from its first call, with no
// move. Below SHMCOLL_SHARE_PAGES_MIN (where no block of it would be shared), with the layer off,
// for alignments beyond a page, or when the shared memory is not there, the MPI allocates as it
// would have. Open MPI's Fortran bindings call PMPI_Alloc_mem, so its Fortran names are here too,
// as is MPICH's mpi_f08 MPI_Alloc_mem (its mpif.h and `use mpi`, and all its MPI_Free_mem, call
// the C entry points).
#include <cstdlib>
#include <cstring>

#include "api/environment.hpp"
#include "coll/tunables.hpp"
#include "mpi/fortran.hpp"
#include "shm/shared_pages.hpp"

namespace {

// Whether `info` asks for an alignment beyond a page (mpi_minimum_memory_alignment, MPI 4.1).
bool needs_more_than_a_page(MPI_Info info) {
  if (info == MPI_INFO_NULL) return false;
  char value[64] = {};
  int found = 0;
  char key[] = "mpi_minimum_memory_alignment";
  if (PMPI_Info_get(info, key, sizeof value - 1, value, &found) != MPI_SUCCESS || !found) {
    return false;
  }
  return std::strtoull(value, nullptr, 0) > 4096;
}

bool shares(MPI_Aint size, MPI_Info info) {
  static const std::uint64_t least = shmcoll::coll::Tunables::from_env().team.share_pages_min;
  return !shmcoll::detail::mpi_layer_settings().disabled && least > 0 && size > 0 &&
         std::uint64_t(size) >= least && !needs_more_than_a_page(info);
}

}  // namespace

extern "C" {

int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  if (shares(size, info)) {
    if (void* memory = shmcoll::shm::allocate_shared_pages(std::size_t(size))) {
      std::memcpy(baseptr, &memory, sizeof memory);
      return MPI_SUCCESS;
    }
  }
  return PMPI_Alloc_mem(size, info, baseptr);
}

int MPI_Free_mem(void* base) {
  return shmcoll::shm::free_shared_pages(base) ? MPI_SUCCESS : PMPI_Free_mem(base);
}

}  // extern "C"

#if defined(OPEN_MPI)

using F = MPI_Fint;
using shmcoll::mpi::set_error;

// `baseptr` is where the address goes: an INTEGER(KIND=MPI_ADDRESS_KIND) or a TYPE(C_PTR).
SHMCOLL_FORTRAN(alloc_mem, ALLOC_MEM, (MPI_Aint * size, F* info, void* baseptr, F* ierror),
                (size, info, baseptr, ierror)) {
  set_error(ierror, MPI_Alloc_mem(*size, MPI_Info_f2c(*info), baseptr));
}

SHMCOLL_FORTRAN(alloc_mem_cptr, ALLOC_MEM_CPTR,
                (MPI_Aint * size, F* info, void* baseptr, F* ierror),
                (size, info, baseptr, ierror)) {
  set_error(ierror, MPI_Alloc_mem(*size, MPI_Info_f2c(*info), baseptr));
}

SHMCOLL_FORTRAN(free_mem, FREE_MEM, (void* base, F* ierror), (base, ierror)) {
  set_error(ierror, MPI_Free_mem(base));
}

#elif defined(MPICH_VERSION)

extern "C" void mpi_alloc_mem_f08_(MPI_Aint* size, MPI_Fint* info, void* baseptr,
                                   MPI_Fint* ierror) {
  shmcoll::mpi::set_error(ierror, MPI_Alloc_mem(*size, MPI_Info_f2c(*info), baseptr));
}

#endif  // OPEN_MPI, MPICH_VERSION
