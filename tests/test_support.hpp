// Helpers for tests that run on real forked processes.
#pragma once

#include <dirent.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll::testing {

// Runs a shell command; its exit status (-1 if it did not exit) and what it wrote to the
// captured streams.
enum class Capture { stderr_only, stdout_only, both };
struct CommandResult {
  int status;
  std::string output;
};
inline CommandResult run_command(const std::string& command, Capture capture) {
  const std::string file =
      std::filesystem::temp_directory_path() / ("shmcoll-test-output-" + std::to_string(getpid()));
  const std::string redirect = capture == Capture::stderr_only   ? " 2>" + file
                               : capture == Capture::stdout_only ? " >" + file
                                                                 : " >" + file + " 2>&1";
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

// Private anonymous memory of `bytes`, at `at` where given (never over a mapping already there).
inline std::byte* map_private(std::size_t bytes, void* at = nullptr) {
  void* memory = mmap(at, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
  return memory == MAP_FAILED ? nullptr : static_cast<std::byte*>(memory);
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

// For teams the test process joins itself (Team::join, as rank 0): forks ranks 1 .. size - 1,
// each running `member(rank)` and exiting with what it returns (1, after printing it, when it
// throws). Returns their pids.
inline std::vector<pid_t> fork_members(int size, const std::function<int(int)>& member) {
  std::vector<pid_t> children;
  for (int rank = 1; rank < size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = member(rank);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "member %d: %s\n", rank, error.what());
      }
      _exit(status);
    }
    children.push_back(pid);
  }
  return children;
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

// shmcoll-run started in the background with `args` (a launcher_child mode that writes each
// rank's pid to dir/rank.N), its stderr going to dir/stderr. `ranks` holds the rank pids once all
// `rank_count` have started (empty if they did not within 10 s).
struct BackgroundLaunch {
  pid_t launcher = -1;
  std::vector<pid_t> ranks;
  std::filesystem::path dir;
  std::string stderr_text() const {
    std::ifstream in(dir / "stderr");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

inline BackgroundLaunch launch_in_background(const std::string& launcher_path,
                                             const std::vector<std::string>& args, int rank_count,
                                             const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  BackgroundLaunch launch;
  launch.dir = dir;
  launch.launcher = fork();
  if (launch.launcher == 0) {
    const std::string err = (dir / "stderr").string();
    if (std::FILE* file = std::fopen(err.c_str(), "w")) dup2(fileno(file), STDERR_FILENO);
    std::vector<char*> argv{const_cast<char*>(launcher_path.c_str())};
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  for (int waited_ms = 0; waited_ms < 10'000; waited_ms += 2) {
    std::vector<pid_t> ranks;
    for (int rank = 0; rank < rank_count; ++rank) {
      pid_t pid = 0;
      std::ifstream(dir / ("rank." + std::to_string(rank))) >> pid;
      if (pid > 0) ranks.push_back(pid);
    }
    if (static_cast<int>(ranks.size()) == rank_count) {
      launch.ranks = ranks;
      break;
    }
    usleep(2000);
  }
  return launch;
}

// Waits for the launcher at most `limit` seconds; its wait status, or -1 after killing it
// when it overran. `seconds` gets the time waited.
inline int wait_for_launcher(pid_t launcher, double limit, double& seconds) {
  const double start = monotonic_seconds();
  int status = 0;
  while (waitpid(launcher, &status, WNOHANG) == 0) {
    if (monotonic_seconds() - start > limit) {
      kill(launcher, SIGKILL);
      waitpid(launcher, &status, 0);
      seconds = monotonic_seconds() - start;
      return -1;
    }
    usleep(500);
  }
  seconds = monotonic_seconds() - start;
  return status;
}

// Whether a process is gone: no such pid, or a zombie nobody has reaped yet.
inline bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

// Makes process_vm_readv and process_vm_writev fail with EPERM in this process from now on, as
// Docker's default seccomp profile does (without CAP_SYS_PTRACE). False where it cannot.
inline bool refuse_cross_memory_copies() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

}  // namespace shmcoll::testing
