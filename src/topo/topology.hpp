// The machine as hwloc sees it (or a machine described by SHMCOLL_TOPOLOGY), reduced to what the
// hierarchy needs: for every core, which package, NUMA node, L3, L2 and core holds it.
#pragma once

#include <hwloc.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shmcoll::topo {

// The levels a hierarchy can split on, widest first.
enum class Level : std::uint8_t { package, numa, l3, l2, core };
inline constexpr int kLevelCount = 5;
const char* level_name(Level level);
std::optional<Level> level_from_name(std::string_view name);

// Where a core, or a running process, sits: per level the logical index of the one object that
// contains it, or kUnknown when it spans several (an unbound process) or nothing is known.
struct Location {
  static constexpr std::int32_t kUnknown = -1;
  std::array<std::int32_t, kLevelCount> index{kUnknown, kUnknown, kUnknown, kUnknown, kUnknown};
  std::int32_t core = kUnknown;           // logical core index (lstopo's "Core L#")
  std::int32_t pu_os_index = kUnknown;    // the core's first PU (lstopo's "PU P#")
  std::int32_t numa_os_index = kUnknown;  // the NUMA node's OS number, as libnuma counts nodes

  std::int32_t at(Level level) const { return index[static_cast<int>(level)]; }
  bool operator==(const Location&) const = default;
};

class Topology {
 public:
  // `spec` is "" (this machine), "synthetic:<hwloc synthetic description>" or "xml:<file>".
  // A spec hwloc rejects is an invalid_argument error quoting it.
  explicit Topology(const std::string& spec);
  // The topology `spec` names (SHMCOLL_TOPOLOGY when empty; this machine when that is unset too),
  // loaded once per process per spec and inherited by forked children.
  static const Topology& shared(const std::string& spec = {});
  static constexpr const char* kEnv = "SHMCOLL_TOPOLOGY";

  const std::string& spec() const { return spec_; }
  // False for synthetic and XML topologies: their cores cannot be bound to.
  bool is_this_system() const { return this_system_; }
  int core_count() const { return static_cast<int>(cores_.size()); }
  // Objects of `level` (0 for a cache level the machine does not have).
  int count(Level level) const;
  const Location& core(int logical_index) const { return cores_.at(logical_index); }
  // From the calling process's CPU binding; every level unknown on a loaded topology.
  Location where_this_process_runs() const;
  // Binds the calling process to a core; false when hwloc cannot (or the topology is loaded).
  bool bind_to_core(int logical_index) const;
  // The CPUs (OS indexes) the calling process is bound to, and binding it back to them: run()
  // binds its caller, its rank 0, for the call only. Empty, and false, on a loaded topology.
  std::vector<unsigned> process_cpus() const;
  bool bind_to_cpus(const std::vector<unsigned>& cpus) const;
  // One line, e.g. "1 package, 1 NUMA node, 2 L3, 2 L2, 2 cores, 2 PUs, 5722 MiB".
  std::string summary() const;

 private:
  Location locate(hwloc_const_cpuset_t cpuset) const;
  std::string spec_;
  std::shared_ptr<hwloc_topology> handle_;
  bool this_system_ = true;
  std::vector<Location> cores_;
};

}  // namespace shmcoll::topo
