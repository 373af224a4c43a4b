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
const std::string& machine_kind();

// The tuning file the library reads: SHMCOLL_TUNING, else $XDG_CACHE_HOME/shmcoll/tuning, else
// $HOME/.cache/shmcoll/tuning; "" where there is none (SHMCOLL_TUNING=none, or no home).
std::string tuning_file_path();

struct MachineTuning {
  std::string path;    // the file looked at ("" when SHMCOLL_TUNING is none)
  std::string status;  // whether it applies here and why not, for shmcoll-info
  std::map<std::string, std::string> values;  // variable -> value; empty unless it applies

  // Reads tuning_file_path(). A missing file, or one measured on another kind of machine, applies
  // nothing; a malformed one is an invalid_argument error naming the file and line.
  static MachineTuning load();
  // The file's value of `name`, or null.
  const char* value(const char* name) const;
};

}  // namespace shmcoll::coll
