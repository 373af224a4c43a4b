#include "topo/cpu_budget.hpp"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace shmcoll::topo {

namespace {

// ceil(quota / period) for a positive quota, else 0 (no quota).
std::int32_t whole_cpus(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return 0;
  return static_cast<std::int32_t>(std::min<long long>((quota + period - 1) / period, kMaxCpus));
}

// v2: "max 100000" (no quota) or "150000 100000".
std::int32_t read_cpu_max(const std::filesystem::path& dir) {
  std::ifstream file(dir / "cpu.max");
  std::string quota;
  long long period = 0;
  if (!(file >> quota >> period) || quota == "max") return 0;
  return whole_cpus(std::atoll(quota.c_str()), period);
}

// v1: cpu.cfs_quota_us (-1: no quota) over cpu.cfs_period_us.
std::int32_t read_cfs_quota(const std::filesystem::path& dir) {
  long long quota = -1, period = 0;
  std::ifstream(dir / "cpu.cfs_quota_us") >> quota;
  std::ifstream(dir / "cpu.cfs_period_us") >> period;
  return whole_cpus(quota, period);
}

// The tightest quota from `mount` + `path` up to `mount` itself (a container may see its own
// cgroup at the mount's root while /proc/self/cgroup names the host's path).
template <typename Read>
std::int32_t tightest_along(const std::filesystem::path& mount, const std::string& path,
                            Read read) {
  std::int32_t tightest = 0;
  auto consider = [&](std::int32_t cpus) {
    if (cpus > 0 && (tightest == 0 || cpus < tightest)) tightest = cpus;
  };
  std::filesystem::path relative = std::filesystem::path(path).relative_path();
  for (;;) {
    const std::filesystem::path dir = mount / relative;
    if (std::filesystem::is_directory(dir)) consider(read(dir));
    if (relative.empty()) break;
    relative = relative.parent_path();
  }
  return tightest;
}

bool lists_controller(const std::string& controllers, std::string_view wanted) {
  std::stringstream list(controllers);
  for (std::string name; std::getline(list, name, ',');) {
    if (name == wanted) return true;
  }
  return false;
}

}  // namespace

std::int32_t cgroup_quota_cpus(std::string_view proc_self_cgroup, const std::string& cgroup_root) {
  std::int32_t tightest = 0;
  auto consider = [&](std::int32_t cpus) {
    if (cpus > 0 && (tightest == 0 || cpus < tightest)) tightest = cpus;
  };
  const std::filesystem::path root(cgroup_root);
  std::stringstream lines{std::string(proc_self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    // hierarchy-id:controllers:path
    const std::size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string id = line.substr(0, first);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (id == "0" && controllers.empty()) {
      // A pure v2 system mounts it at the root; a hybrid one at unified/.
      const bool pure = std::filesystem::exists(root / "cgroup.controllers");
      consider(tightest_along(pure ? root : root / "unified", path, read_cpu_max));
    } else if (lists_controller(controllers, "cpu")) {
      for (const char* mount : {"cpu,cpuacct", "cpu", "cpuacct,cpu"}) {
        if (std::filesystem::is_directory(root / mount)) {
          consider(tightest_along(root / mount, path, read_cfs_quota));
          break;
        }
      }
    }
  }
  return tightest;
}

CpuBudget CpuBudget::of_this_process() {
  CpuBudget budget;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &mask)) budget.allowed.set(std::min(cpu, kMaxCpus - 1));
    }
  }
  std::stringstream text;
  text << std::ifstream("/proc/self/cgroup").rdbuf();
  budget.quota_cpus = cgroup_quota_cpus(text.str(), "/sys/fs/cgroup");
  return budget;
}

int CpuBudget::nth_allowed(std::uint32_t n) const {
  const std::size_t count = allowed.count();
  if (count == 0) return -1;
  std::size_t wanted = n % count;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (allowed.test(cpu) && wanted-- == 0) return cpu;
  }
  return -1;
}

int CpuBudget::usable() const {
  const int mask = std::max<int>(static_cast<int>(allowed.count()), 1);
  return quota_cpus > 0 ? std::min<int>(mask, quota_cpus) : mask;
}

}  // namespace shmcoll::topo
