#include "coll/machine_tuning.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string_view>

#include "util/fail.hpp"

namespace shmcoll::coll {

namespace {

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

// The variables a tuning file may set (the ones tools/shmcoll-tune measures).
constexpr const char* kMachineTunables[] = {"SHMCOLL_CMA_MIN", "SHMCOLL_STREAM_MIN"};

bool tunable_by_machine(const std::string& name) {
  return std::find(std::begin(kMachineTunables), std::end(kMachineTunables), name) !=
         std::end(kMachineTunables);
}

std::string read_machine_kind() {
  std::string model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && trimmed(line.substr(0, colon)) == "model name") {
      model = trimmed(std::string_view(line).substr(colon + 1));
      break;
    }
  }
  return model + "; " + std::to_string(sysconf(_SC_NPROCESSORS_CONF)) + " CPUs";
}

}  // namespace

// Read once per process: every team made reads the tuning file again, and /proc/cpuinfo grows
// with the CPUs (the kernel writes an entry for each as it is read).
const std::string& machine_kind() {
  static const std::string kind = read_machine_kind();
  return kind;
}

std::string tuning_file_path() {
  const char* chosen = std::getenv("SHMCOLL_TUNING");
  if (chosen) return !*chosen || std::string_view(chosen) == "none" ? "" : chosen;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache) {
    return std::string(cache) + "/shmcoll/tuning";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/shmcoll/tuning";
  }
  return {};
}

MachineTuning MachineTuning::load() {
  MachineTuning tuning;
  tuning.path = tuning_file_path();
  if (tuning.path.empty()) {
    tuning.status = std::getenv("SHMCOLL_TUNING") ? "none (SHMCOLL_TUNING=none)"
                                                  : "none (no XDG_CACHE_HOME or HOME)";
    return tuning;
  }
  std::ifstream file(tuning.path);
  if (!file) {
    tuning.status = "none (no file " + tuning.path + "; tools/shmcoll-tune writes it)";
    return tuning;
  }
  std::string kind;
  std::map<std::string, std::string> values;
  int number = 0;
  for (std::string line; std::getline(file, line);) {
    ++number;
    const std::string text = trimmed(line);
    if (text.empty() || text.front() == '#') continue;
    const auto equals = text.find('=');
    const std::string name = equals == std::string::npos ? text : trimmed(text.substr(0, equals));
    const std::string value = equals == std::string::npos ? "" : trimmed(text.substr(equals + 1));
    if (equals == std::string::npos || (name != "machine" && !tunable_by_machine(name))) {
      std::string allowed = "machine=<kind>";
      for (const char* tunable : kMachineTunables) allowed += std::string(" or ") + tunable;
      fail(Errc::invalid_argument, "SHMCOLL_TUNING file ", tuning.path, ", line ", number, ": \"",
           text, "\" is not ", allowed, "=<number> (tools/shmcoll-tune writes this file)");
    }
    if (name == "machine") {
      kind = value;
    } else {
      values[name] = value;
    }
  }
  if (const std::string& here = machine_kind(); kind != here) {
    tuning.status = "not applied: " + tuning.path + " was measured on \"" + kind +
                    "\", this machine is \"" + here + "\"";
    return tuning;
  }
  tuning.values = std::move(values);
  tuning.status = "applied: " + tuning.path;
  for (const auto& [name, value] : tuning.values) tuning.status += ", " + name + "=" + value;
  return tuning;
}

const char* MachineTuning::value(const char* name) const {
  const auto found = values.find(name);
  return found == values.end() ? nullptr : found->second.c_str();
}

}  // namespace shmcoll::coll
