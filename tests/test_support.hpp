// Helpers for tests that run on real forked processes.
#pragma once

#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::testing {

// Runs a shell command; its exit status (-1 if it did not exit) and what it wrote to the
// captured streams.
enum class Capture { stderr_only, both };
struct CommandResult {
  int status;
  std::string output;
};
inline CommandResult run_command(const std::string& command, Capture capture) {
  const std::string file =
      std::filesystem::temp_directory_path() / ("shmcoll-test-output-" + std::to_string(getpid()));
  const std::string redirect =
      capture == Capture::stderr_only ? " 2>" + file : " >" + file + " 2>&1";
  const int raw = std::system((command + redirect).c_str());
  std::stringstream text;
  text << std::ifstream(file).rdbuf();
  std::filesystem::remove(file);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text.str()};
}

// 2x2 matrices of u64, four elements each: out = a x b (out may be a or b). Associative, not
// commutative: the user operation the tests check rank order with.
inline void multiply_2x2(const std::uint64_t* a, const std::uint64_t* b, std::uint64_t* out) {
  const std::uint64_t r[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
                              a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3]};
  std::memcpy(out, r, sizeof(r));
}

// MPI_User_function's shape: inout = in x inout, matrix by matrix.
inline void matrix_product(const void* in, void* inout, std::size_t len, Dtype) {
  const auto* a = static_cast<const std::uint64_t*>(in);
  auto* b = static_cast<std::uint64_t*>(inout);
  for (std::size_t m = 0; m + 4 <= len; m += 4) multiply_2x2(a + m, b + m, b + m);
}

// Memory every forked rank shares with the test process (created before shmcoll::run forks).
template <typename T>
T* shared_block() {
  void* memory =
      mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return new (memory) T{};
}

inline double monotonic_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) names.insert(entry->d_name);
    closedir(dir);
  }
  return names;
}

// Sets an environment variable for the scope (children forked inside inherit it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Forces the tree algorithms (the cost model picks them only from about 64 ranks); they still
// give way to flat ones where they would change a result.
struct ForceTreeAlgorithms {
  ScopedEnv barrier{"SHMCOLL_BARRIER_ALGORITHM", "barrier_tree"};
  ScopedEnv bcast{"SHMCOLL_BCAST_ALGORITHM", "bcast_tree"};
  ScopedEnv reduce{"SHMCOLL_REDUCE_ALGORITHM", "reduce_tree"};
  ScopedEnv allreduce{"SHMCOLL_ALLREDUCE_ALGORITHM", "allreduce_tree"};
  ScopedEnv scan{"SHMCOLL_SCAN_ALGORITHM", "scan_tree"};
};

}  // namespace shmcoll::testing
