// Throwing shmcoll::Error with a formatted message, from any layer.
#pragma once

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>

#include "shmcoll/shmcoll.hpp"

namespace shmcoll {

template <typename... Parts>
[[noreturn]] void fail(Errc code, Parts&&... parts) {
  std::ostringstream message;
  (message << ... << std::forward<Parts>(parts));
  throw Error(code, message.str());
}

// For a failed system call: appends strerror(errno).
template <typename... Parts>
[[noreturn]] void fail_errno(Parts&&... parts) {
  const int saved = errno;
  fail(Errc::system_error, std::forward<Parts>(parts)..., ": ", std::strerror(saved));
}

}  // namespace shmcoll
