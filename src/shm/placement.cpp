#include "shm/placement.hpp"

#include <numa.h>
#include <numaif.h>

#include <charconv>
#include <vector>

#include "util/fail.hpp"

namespace shmcoll {

Placement Placement::parse(const std::string& text) {
  if (text == "local") return {Kind::local};
  if (text == "interleave") return {Kind::interleave};
  if (text == "none") return {Kind::none};
  if (text.starts_with("node:")) {
    Placement placement{Kind::node};
    const char* first = text.data() + 5;
    const char* last = text.data() + text.size();
    const auto [end, error] = std::from_chars(first, last, placement.node);
    if (error == std::errc{} && end == last && first != last && placement.node >= 0) {
      return placement;
    }
  }
  fail(Errc::invalid_argument, "placement \"", text,
       "\" must be local, interleave, node:<n> (n >= 0) or none");
}

std::string Placement::to_string() const {
  switch (kind) {
    case Kind::local:
      return "local";
    case Kind::interleave:
      return "interleave";
    case Kind::node:
      return "node:" + std::to_string(node);
    case Kind::none:
      return "none";
  }
  return "?";
}

}  // namespace shmcoll

namespace shmcoll::shm {

namespace {

bool node_exists(int node) {
  return node >= 0 && node <= numa_max_node() && numa_bitmask_isbitset(numa_all_nodes_ptr, node);
}

std::string bind_preferred(void* memory, std::size_t bytes, int node) {
  std::vector<unsigned long> mask(static_cast<std::size_t>(node) / (8 * sizeof(long)) + 1, 0);
  mask[static_cast<std::size_t>(node) / (8 * sizeof(long))] = 1ul << (node % (8 * sizeof(long)));
  if (mbind(memory, bytes, MPOL_PREFERRED, mask.data(), mask.size() * 8 * sizeof(long), 0) != 0) {
    return std::string("mbind to node ") + std::to_string(node) +
           " failed: " + std::strerror(errno);
  }
  return {};
}

}  // namespace

std::string place_pages(void* memory, std::size_t bytes, const Placement& placement,
                        int local_node) {
  using Kind = Placement::Kind;
  if (placement.kind == Kind::none || bytes == 0) return {};
  if (placement.kind == Kind::local && local_node < 0) return {};  // the owner's first touch
  if (numa_available() < 0) return "this kernel has no NUMA support";
  switch (placement.kind) {
    case Kind::interleave:
      if (mbind(memory, bytes, MPOL_INTERLEAVE, numa_all_nodes_ptr->maskp, numa_all_nodes_ptr->size,
                0) != 0) {
        return std::string("mbind interleave failed: ") + std::strerror(errno);
      }
      return {};
    case Kind::local:
    case Kind::node: {
      const int node = placement.kind == Kind::local ? local_node : placement.node;
      if (!node_exists(node)) {
        return "NUMA node " + std::to_string(node) + " does not exist here (nodes 0-" +
               std::to_string(numa_max_node()) + ")";
      }
      return bind_preferred(memory, bytes, node);
    }
    case Kind::none:
      break;
  }
  return {};
}

int node_of_page(const void* address) {
  int node = -1;
  if (get_mempolicy(&node, nullptr, 0, const_cast<void*>(address), MPOL_F_NODE | MPOL_F_ADDR) !=
      0) {
    return -1;
  }
  return node;
}

int policy_of_page(const void* address) {
  int mode = -1;
  if (get_mempolicy(&mode, nullptr, 0, const_cast<void*>(address), MPOL_F_ADDR) != 0) return -1;
  return mode;
}

}  // namespace shmcoll::shm
