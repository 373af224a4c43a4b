#include "shmcoll/shmcoll.h"
#include "shmcoll/shmcoll.hpp"

namespace shmcoll {

const char* version() noexcept {
  return SHMCOLL_VERSION_STRING;  // the project version, from CMake
}

}  // namespace shmcoll

extern "C" const char* shmcoll_version(void) {
  return shmcoll::version();
}
