// Settings measured on one kind of machine (tools/shmcoll-tune) and kept in a file, which stand in
// for the built-in defaults on machines of that kind: which way large blocks move (the kernel's
// copy or the slots, SHMCOLL_CMA_MIN) and how slots are written (SHMCOLL_STREAM_MIN) measured
// 2x apart between this project's hosts (docs/tunables.md, Tuned per machine). The environment
// still wins; rank 0's values still become the team's (TeamTunables).
#pragma once

#include <map>
#include <string>

namespace shmcoll::coll {

// What identifies a kind of machine for its tuning: the CPU model and how many CPUs it has.
std::string machine_kind();

struct MachineTuning {
  std::string path;    // the file looked at ("" when SHMCOLL_TUNING is none)
  std::string status;  // whether it applies here and why not, for shmcoll-info
  std::map<std::string, std::string> values;  // variable -> value; empty unless it applies

  // Reads SHMCOLL_TUNING (default: $XDG_CACHE_HOME, else $HOME/.cache, then /shmcoll/tuning). A
  // missing file, or one measured on another kind of machine, applies nothing; a malformed one
  // is an invalid_argument error naming the file and line.
  static MachineTuning load();
  // The file's value of `name`, or null.
  const char* value(const char* name) const;
};

// The variables a tuning file may set (the ones tools/shmcoll-tune measures).
bool tunable_by_machine(const std::string& name);

}  // namespace shmcoll::coll
