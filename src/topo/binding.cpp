#include "topo/binding.hpp"

#include <hwloc.h>

namespace shmcoll::topo {

namespace {

struct Topology {
  Topology() {
    hwloc_topology_init(&handle);
    hwloc_topology_load(handle);
  }
  ~Topology() { hwloc_topology_destroy(handle); }
  hwloc_topology_t handle;
};

}  // namespace

int core_count() {
  Topology topology;
  const int cores = hwloc_get_nbobjs_by_type(topology.handle, HWLOC_OBJ_CORE);
  return cores > 0 ? cores : 1;
}

bool bind_process_to_core(int index) {
  Topology topology;
  const int cores = hwloc_get_nbobjs_by_type(topology.handle, HWLOC_OBJ_CORE);
  if (cores <= 0) return false;
  hwloc_obj_t core = hwloc_get_obj_by_type(topology.handle, HWLOC_OBJ_CORE, index % cores);
  return core && hwloc_set_cpubind(topology.handle, core->cpuset, HWLOC_CPUBIND_PROCESS) == 0;
}

}  // namespace shmcoll::topo
