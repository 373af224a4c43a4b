// Binding a process to a core, through hwloc.
#pragma once

namespace shmcoll::topo {

// Binds the calling process to the (index mod cores)-th core in hwloc order. Returns false (and
// leaves the process unbound) when hwloc cannot bind on this system.
bool bind_process_to_core(int index);

// Cores hwloc sees on this machine.
int core_count();

}  // namespace shmcoll::topo
