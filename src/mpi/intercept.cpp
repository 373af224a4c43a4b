// The intercepted MPI entry points that are not collectives: set-up and tear-down, and the
// lifetimes of user ops, whose handles the layer caches (reductions.cpp and
// movement.cpp hold the collectives).
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mpi/layer.hpp"

using namespace shmcoll::mpi;

void shmcoll::mpi::refuse_the_wrong_mpi() {
#ifdef OPEN_MPI
  constexpr bool built_for_open_mpi = true;
#else
  constexpr bool built_for_open_mpi = false;
#endif
  // The library the program's PMPI calls (and so the layer's) reach, and this layer's own file.
  Dl_info mpi{}, layer{};
  if (dladdr(reinterpret_cast<void*>(&PMPI_Init), &mpi) == 0 || mpi.dli_fname == nullptr) return;
  if (dladdr(reinterpret_cast<void*>(&refuse_the_wrong_mpi), &layer) == 0 ||
      layer.dli_fname == nullptr) {
    return;
  }
  void* library = dlopen(mpi.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (library == nullptr) return;
  const bool open_mpi = dlsym(library, "ompi_mpi_comm_world") != nullptr;
  dlclose(library);
  if (open_mpi == built_for_open_mpi) return;
  // Its handles are not this layer's: any call through it would misread them. Nothing has run yet.
  std::string right = layer.dli_fname;
  const char* ours = built_for_open_mpi ? "openmpi" : "mpich";
  const char* theirs = open_mpi ? "openmpi" : "mpich";
  if (const auto at = right.rfind(ours); at != std::string::npos)
    right.replace(at, std::strlen(ours), theirs);
  std::fprintf(stderr,
               "shmcoll: %s is the MPI layer for %s, but this program runs on %s (%s): preload %s "
               "instead\n",
               layer.dli_fname, built_for_open_mpi ? "Open MPI" : "MPICH",
               open_mpi ? "Open MPI" : "MPICH", mpi.dli_fname, right.c_str());
  std::_Exit(1);
}

void shmcoll::mpi::start_layer() {
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (!initialized) return;  // the MPI's init failed: its error stands
  int provided = MPI_THREAD_SINGLE;
  PMPI_Query_thread(&provided);
  set_thread_level(provided);
  agree_world_team();
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
  refuse_the_wrong_mpi();
  const int result = PMPI_Init(argc, argv);
  start_layer();
  return result;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  refuse_the_wrong_mpi();
  const int result = PMPI_Init_thread(argc, argv, required, provided);
  start_layer();
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

}  // extern "C"
