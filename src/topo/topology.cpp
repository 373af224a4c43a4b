#include "topo/topology.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>

#include "util/fail.hpp"

namespace shmcoll::topo {

namespace {

constexpr hwloc_obj_type_t kLevelTypes[kLevelCount] = {
    HWLOC_OBJ_PACKAGE, HWLOC_OBJ_NUMANODE, HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_CORE};
constexpr const char* kLevelNames[kLevelCount] = {"package", "numa", "l3", "l2", "core"};

struct Bitmap {
  Bitmap() : set(hwloc_bitmap_alloc()) {}
  ~Bitmap() { hwloc_bitmap_free(set); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  hwloc_bitmap_t set;
};

constexpr std::string_view kSyntheticPrefix = "synthetic:";
constexpr std::string_view kXmlPrefix = "xml:";

}  // namespace

const char* level_name(Level level) {
  return kLevelNames[static_cast<int>(level)];
}

std::optional<Level> level_from_name(std::string_view name) {
  for (int i = 0; i < kLevelCount; ++i) {
    if (name == kLevelNames[i]) return static_cast<Level>(i);
  }
  return std::nullopt;
}

Topology::Topology(const std::string& spec) : spec_(spec) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) fail_errno("hwloc_topology_init");
  handle_.reset(raw, hwloc_topology_destroy);
  const std::string_view text = spec;
  if (text.starts_with(kSyntheticPrefix)) {
    const std::string description(text.substr(kSyntheticPrefix.size()));
    if (hwloc_topology_set_synthetic(raw, description.c_str()) != 0) {
      fail(Errc::invalid_argument, "topology \"", spec,
           "\": hwloc rejects the synthetic description (example: synthetic:\"pack:2 numa:2 "
           "l3:2 core:4 pu:1\"; the last level must be pu)");
    }
  } else if (text.starts_with(kXmlPrefix)) {
    const std::string path(text.substr(kXmlPrefix.size()));
    if (hwloc_topology_set_xml(raw, path.c_str()) != 0) {
      fail_errno("topology \"", spec, "\": hwloc cannot read the XML file ", path);
    }
  } else if (!spec.empty()) {
    fail(Errc::invalid_argument, "topology \"", spec,
         "\" must be empty (this machine), synthetic:<description> or xml:<file>");
  }
  if (hwloc_topology_load(raw) != 0) fail_errno("topology \"", spec, "\": hwloc_topology_load");
  this_system_ = hwloc_topology_is_thissystem(raw) != 0;

  const int cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  for (int i = 0; i < cores; ++i) {
    cores_.push_back(locate(hwloc_get_obj_by_type(raw, HWLOC_OBJ_CORE, i)->cpuset));
  }
  if (cores_.empty()) {  // some virtual machines report PUs only: treat each PU as a core
    const int pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
    for (int i = 0; i < pus; ++i) {
      Location where = locate(hwloc_get_obj_by_type(raw, HWLOC_OBJ_PU, i)->cpuset);
      where.core = where.index[static_cast<int>(Level::core)] = i;
      cores_.push_back(where);
    }
  }
  if (cores_.empty()) fail(Errc::invalid_argument, "topology \"", spec, "\" has no cores");
}

const Topology& Topology::shared(const std::string& spec) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Topology>> loaded;
  std::string key = spec;
  if (key.empty()) {
    const char* env = std::getenv(kEnv);
    key = env ? env : "";
  }
  std::lock_guard lock(mutex);
  auto& slot = loaded[key];
  if (!slot) {
    try {
      slot = std::make_unique<Topology>(key);
    } catch (...) {
      loaded.erase(key);
      throw;
    }
  }
  return *slot;
}

Location Topology::locate(hwloc_const_cpuset_t cpuset) const {
  Location where;
  if (hwloc_bitmap_iszero(cpuset)) return where;
  hwloc_topology_t raw = handle_.get();
  for (int level = 0; level < kLevelCount; ++level) {
    const int objects = hwloc_get_nbobjs_by_type(raw, kLevelTypes[level]);
    for (int i = 0; i < objects; ++i) {
      hwloc_obj_t object = hwloc_get_obj_by_type(raw, kLevelTypes[level], i);
      if (object->cpuset && hwloc_bitmap_isincluded(cpuset, object->cpuset)) {
        where.index[level] = i;
        if (kLevelTypes[level] == HWLOC_OBJ_NUMANODE) {
          where.numa_os_index = static_cast<std::int32_t>(object->os_index);
        }
        if (kLevelTypes[level] == HWLOC_OBJ_CORE) {
          where.core = i;
          where.pu_os_index = hwloc_bitmap_first(object->cpuset);
        }
        break;
      }
    }
  }
  return where;
}

int Topology::count(Level level) const {
  const int objects = hwloc_get_nbobjs_by_type(handle_.get(), kLevelTypes[static_cast<int>(level)]);
  return level == Level::core ? core_count() : objects > 0 ? objects : 0;
}

Location Topology::where_this_process_runs() const {
  if (!this_system_) return Location{};
  Bitmap bound;
  if (hwloc_get_cpubind(handle_.get(), bound.set, HWLOC_CPUBIND_PROCESS) != 0) return Location{};
  return locate(bound.set);
}

bool Topology::bind_to_core(int logical_index) const {
  if (!this_system_ || logical_index < 0 || logical_index >= core_count()) return false;
  hwloc_topology_t raw = handle_.get();
  const int pu = cores_[logical_index].pu_os_index;
  hwloc_obj_t core = hwloc_get_obj_by_type(raw, HWLOC_OBJ_CORE, logical_index);
  if (!core) core = hwloc_get_pu_obj_by_os_index(raw, static_cast<unsigned>(pu));
  return core && hwloc_set_cpubind(raw, core->cpuset, HWLOC_CPUBIND_PROCESS) == 0;
}

std::vector<unsigned> Topology::process_cpus() const {
  std::vector<unsigned> cpus;
  Bitmap bound;
  if (!this_system_ || hwloc_get_cpubind(handle_.get(), bound.set, HWLOC_CPUBIND_PROCESS) != 0) {
    return cpus;
  }
  for (int cpu = hwloc_bitmap_first(bound.set); cpu >= 0; cpu = hwloc_bitmap_next(bound.set, cpu)) {
    cpus.push_back(static_cast<unsigned>(cpu));
  }
  return cpus;
}

bool Topology::bind_to_cpus(const std::vector<unsigned>& cpus) const {
  if (!this_system_ || cpus.empty()) return false;
  Bitmap wanted;
  for (const unsigned cpu : cpus) hwloc_bitmap_set(wanted.set, cpu);
  return hwloc_set_cpubind(handle_.get(), wanted.set, HWLOC_CPUBIND_PROCESS) == 0;
}

std::string Topology::summary() const {
  std::ostringstream out;
  auto plural = [&](int n, const char* one, const char* many) {
    out << n << ' ' << (n == 1 ? one : many);
  };
  plural(count(Level::package), "package", "packages");
  out << ", ";
  plural(count(Level::numa), "NUMA node", "NUMA nodes");
  out << ", " << count(Level::l3) << " L3, " << count(Level::l2) << " L2, ";
  plural(core_count(), "core", "cores");
  out << ", ";
  plural(hwloc_get_nbobjs_by_type(handle_.get(), HWLOC_OBJ_PU), "PU", "PUs");
  const hwloc_obj_t machine = hwloc_get_root_obj(handle_.get());
  out << ", " << machine->total_memory / (1 << 20) << " MiB";
  return out.str();
}

}  // namespace shmcoll::topo
