#include "shmcoll/shmcoll.hpp"

namespace shmcoll {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::ok:
      return "ok";
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::peer_failed:
      return "peer_failed";
    case Errc::rank_failed:
      return "rank_failed";
    case Errc::segment_mismatch:
      return "segment_mismatch";
    case Errc::system_error:
      return "system_error";
    case Errc::timeout:
      return "timeout";
    case Errc::mismatched_call:
      return "mismatched_call";
    case Errc::out_of_memory:
      return "out_of_memory";
  }
  return "unknown";
}

Error::Error(Errc code, const std::string& message)
    : std::runtime_error(std::string(errc_name(code)) + ": " + message), code_(code) {}

}  // namespace shmcoll
