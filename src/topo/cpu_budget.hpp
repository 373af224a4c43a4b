// The CPUs a process may use, which is not the machine's CPU count: its affinity mask (taskset,
// a launcher's binding, a cpuset) and its cgroup's CPU quota (docker --cpus, Kubernetes limits,
// systemd CPUQuota). Ranks that outnumber them share CPUs whatever the machine has.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

namespace shmcoll::topo {

inline constexpr int kMaxCpus = 1024;  // CPUs numbered beyond this count as this many minus one

struct CpuBudget {
  std::bitset<kMaxCpus> allowed;  // the affinity mask
  std::int32_t quota_cpus = 0;    // the cgroup quota in whole CPUs, rounded up; 0: no quota

  // The calling process's.
  static CpuBudget of_this_process();
  // CPUs usable at once: the mask, capped by the quota.
  int usable() const;
  // The (n mod the mask's size)-th CPU of the mask, in CPU order; -1 for an empty mask.
  int nth_allowed(std::uint32_t n) const;
};

// The tightest cgroup CPU quota along the calling process's cgroup path, in whole CPUs rounded
// up (0: none), from `proc_self_cgroup` (the text of /proc/self/cgroup) and the cgroup file
// systems under `cgroup_root` (/sys/fs/cgroup): v2's cpu.max, or v1's cpu.cfs_quota_us over
// cpu.cfs_period_us. Separate from of_this_process so tests can hand it a made-up tree.
std::int32_t cgroup_quota_cpus(std::string_view proc_self_cgroup, const std::string& cgroup_root);

}  // namespace shmcoll::topo
