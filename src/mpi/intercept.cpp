// The intercepted MPI entry points that are not collectives: set-up and tear-down, and the
// lifetimes of user ops and datatypes, whose handles the layer caches (reductions.cpp and
// movement.cpp hold the collectives).
#include "mpi/layer.hpp"

using namespace shmcoll::mpi;

void shmcoll::mpi::note_thread_level() {
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  set_thread_level(provided);
}

void shmcoll::mpi::finalize_layer() {
  print_statistics();
  release_world_teams();
}

extern "C" {

// Lets a program (and its tests) see that the layer is loaded, and which version.
__attribute__((visibility("default"))) const char* shmcoll_mpi_layer_version(void) {
  return SHMCOLL_VERSION_TEXT;
}

int MPI_Init(int* argc, char*** argv) {
  const int result = PMPI_Init(argc, argv);
  note_thread_level();
  return result;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int result = PMPI_Init_thread(argc, argv, required, provided);
  set_thread_level(*provided);
  return result;
}

int MPI_Finalize(void) {
  finalize_layer();
  return PMPI_Finalize();
}

int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
  const int result = PMPI_Op_create(function, commute, op);
  if (result == MPI_SUCCESS) remember_user_op(*op, function, commute != 0);
  return result;
}

int MPI_Op_free(MPI_Op* op) {
  forget_user_op(*op);
  return PMPI_Op_free(op);
}

int MPI_Type_free(MPI_Datatype* type) {
  forget_datatype(*type);
  forget_reductions_on(*type);
  return PMPI_Type_free(type);
}

}  // extern "C"
