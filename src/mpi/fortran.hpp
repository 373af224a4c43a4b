// What the layer's Fortran entry points share (fortran.cpp: set-up, ops and the blocking
// collectives; fortran_requests.cpp: nonblocking collectives and the completion calls).
#pragma once

#include <vector>

#include "mpi/layer.hpp"

static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran integers are C ints here");

namespace shmcoll::mpi {

inline void set_error(MPI_Fint* ierror, int result) {
  if (ierror) *ierror = result;  // optional in mpi_f08
}

// Fortran's LOGICAL as gfortran stores it (both MPIs here are built for gfortran: 1 is .true.).
inline void set_logical(MPI_Fint* flag, int value) {
  *flag = value ? 1 : 0;
}

}  // namespace shmcoll::mpi

#if defined(OPEN_MPI)

namespace shmcoll::mpi {

// Open MPI's Fortran constants (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE) are the addresses
// of variables of its Fortran support, which an Open MPI built without Fortran does not have: they
// are looked up at the first Fortran call, not linked, so that the layer loads into such an MPI
// too (where no Fortran program calls these entry points). One that is missing is an address no
// argument can have.
struct FortranSentinels {
  const void* in_place;
  const void* bottom;
  const void* status_ignore;
  const void* statuses_ignore;
};
const FortranSentinels& fortran_sentinels();

inline const void* send_buffer(const void* buffer) {
  if (buffer == fortran_sentinels().in_place) return MPI_IN_PLACE;
  return buffer == fortran_sentinels().bottom ? MPI_BOTTOM : buffer;
}
inline void* recv_buffer(void* buffer) {
  return buffer == fortran_sentinels().bottom ? MPI_BOTTOM : buffer;
}
inline MPI_Comm comm_of(const MPI_Fint* comm) {
  return MPI_Comm_f2c(*comm);
}
inline MPI_Datatype type_of(const MPI_Fint* type) {
  return MPI_Type_f2c(*type);
}
inline MPI_Op op_of(const MPI_Fint* op) {
  return MPI_Op_f2c(*op);
}

// Alltoallw's per-peer types (slot 0 send, 1 receive), in arrays reused from call to call.
inline const MPI_Datatype* types_of(const MPI_Fint* types, MPI_Comm comm, int slot) {
  thread_local std::vector<MPI_Datatype> converted[2];
  int size = 0;
  PMPI_Comm_size(comm, &size);
  converted[slot].resize(static_cast<std::size_t>(size));
  for (int i = 0; i < size; ++i) converted[slot][i] = MPI_Type_f2c(types[i]);
  return converted[slot].data();
}

}  // namespace shmcoll::mpi

// One implementation under every name a Fortran caller may use: gfortran's and the other common
// compilers' (mpi_allreduce_, mpi_allreduce__, mpi_allreduce, MPI_ALLREDUCE) and Open MPI's
// ompi_allreduce_f, which its mpi_f08 module calls.
#define SHMCOLL_FORTRAN(lower, upper, parameters, arguments) \
  static void fortran_##lower parameters;                    \
  extern "C" {                                               \
  void mpi_##lower##_ parameters {                           \
    fortran_##lower arguments;                               \
  }                                                          \
  void mpi_##lower##__ parameters {                          \
    fortran_##lower arguments;                               \
  }                                                          \
  void mpi_##lower parameters {                              \
    fortran_##lower arguments;                               \
  }                                                          \
  void MPI_##upper parameters {                              \
    fortran_##lower arguments;                               \
  }                                                          \
  void ompi_##lower##_f parameters {                         \
    fortran_##lower arguments;                               \
  }                                                          \
  }                                                          \
  static void fortran_##lower parameters

#endif  // OPEN_MPI
