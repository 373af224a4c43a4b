// The layer under MPI_THREAD_MULTIPLE (layer.hpp, SharedTables).
#include <atomic>
#include <mutex>

#include "mpi/layer.hpp"

namespace shmcoll::mpi {

namespace {

// Set once, at MPI's initialisation, before the program can start threads that call MPI.
bool threads_call_at_once = false;
std::mutex tables_mutex;
std::atomic<std::uint64_t> forgotten{0};

}  // namespace

void set_thread_level(int provided) {
  threads_call_at_once = provided == MPI_THREAD_MULTIPLE;
}

bool mpi_thread_multiple() {
  return threads_call_at_once;
}

SharedTables::SharedTables() : held_(threads_call_at_once) {
  if (held_) tables_mutex.lock();
}

SharedTables::~SharedTables() {
  if (held_) tables_mutex.unlock();
}

std::uint64_t forgotten_handles() {
  return forgotten.load(std::memory_order_acquire);
}

void note_forgotten_handle() {
  forgotten.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace shmcoll::mpi
