#!/usr/bin/env bash
# usage: run_comm_churn_test.sh MPIRUN CHURN_PROGRAM LAYER_LIBRARY NP
# Communicators that come and go through the layer (bench/mpi_comm_churn.c, which checks every
# result): dup/free, split/free and create_group/free loops take their teams from the pool of freed
# ones instead of making one each, leave no descriptor, mapping or /dev/shm file behind; by default
# a communicator gets a team only once busy, a busy one gets the place a freed one leaves under
# the team cap, and idle ones never get one.
set -euo pipefail
mpirun=$1 program=$2 layer=$3 np=$4
source "$(dirname "$0")/mpi_launch.sh"
shmcoll_files() { find /dev/shm -maxdepth 1 -name 'shmcoll-*' | wc -l; }
shm_before=$(shmcoll_files)

run() {  # run NAME ENV... -- ARGS...: the program with the layer; output in $work/NAME
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  "$mpirun" "${extra[@]}" -np "$np" env LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1 "${envs[@]}" \
    "$program" "$@" > "$work/$name" 2>&1 || { cat "$work/$name"; echo "FAIL: $name"; exit 1; }
  grep -q " 0 wrong," "$work/$name" || { cat "$work/$name"; echo "FAIL: $name: wrong results"; exit 1; }
}
kept_nothing() {
  grep -q "+0 fds +0 mappings" "$work/$1" || { echo "FAIL: $1: descriptors or mappings kept"; exit 1; }
}
taken() { awk '/communicator teams:/ {print $9}' "$work/$1"; }

# The pool: every communicator wants a team from its first call.
first_call=(SHMCOLL_MPI_TEAM_AFTER_CALLS=0 SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS=0)
run dup "${first_call[@]}" -- dup 1000
run split "${first_call[@]}" -- split 200 3
run group "${first_call[@]}" -- group 200 3
cat "$work/dup" "$work/split" "$work/group"
kept_nothing dup
kept_nothing split
kept_nothing group
# A team per distinct live group at most: MPI_COMM_WORLD's and the first loop communicator's.
[ "$(taken dup)" -ge 990 ] || { echo "FAIL: dup/free made teams instead of reusing"; exit 1; }
[ "$(taken split)" -ge 190 ] || { echo "FAIL: split/free made teams instead of reusing"; exit 1; }
[ "$(taken group)" -ge 190 ] || { echo "FAIL: create_group/free made teams instead of reusing"; exit 1; }
run no_pool "${first_call[@]}" SHMCOLL_MPI_POOL_TEAMS=0 -- dup 50
[ "$(taken no_pool)" -eq 0 ] || { echo "FAIL: SHMCOLL_MPI_POOL_TEAMS=0 still reused"; exit 1; }

# By default a communicator used once (after MPI_COMM_WORLD's first call) never gets a team, and
# the split loop takes the pool's from its second call on.
made() { awk '/communicator teams:/ {print $4}' "$work/$1"; }
through() { awk -v name="$2" '$1 == "shmcoll:" && $2 == name {print $4}' "$work/$1"; }
run dup_default -- dup 200
[ "$(made dup_default)" -eq 1 ] || { cat "$work/dup_default"; echo "FAIL: a dup used once got a team"; exit 1; }
grep -q "to PMPI: the communicator's first calls" "$work/dup_default" ||
  { cat "$work/dup_default"; echo "FAIL: no call went to PMPI while warming up"; exit 1; }
# Busy and idle: 30 communicators used once (as a library's setup call), then 5 of them busy. A
# new team once these ranks made 200 calls through PMPI: the 5 busy ones get one, the idle ones
# none. A threshold out of reach: no communicator but MPI_COMM_WORLD gets one.
run busy SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS=200 -- kept 30 5 3000 1
[ "$(made busy)" -eq 6 ] || { cat "$work/busy"; echo "FAIL: not exactly the 5 busy ones (and MPI_COMM_WORLD) got teams"; exit 1; }
run never SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS=2000000000 -- kept 30 5 300 2
[ "$(made never)" -eq 1 ] || { cat "$work/never"; echo "FAIL: teams made under an unreachable threshold"; exit 1; }
# The same path on every run: whether a communicator is served depends on how many calls it made,
# never on how long they took (rank 0 sleeping 3 ms before each call changes nothing).
run quick -- paced 400 0
run slow -- paced 400 3000
split_of() { awk '$1 == "shmcoll:" && $2 == "allreduce" {print $4, $6}' "$work/$1"; }
[ "$(split_of quick)" == "$(split_of slow)" ] ||
  { cat "$work/quick" "$work/slow"; echo "FAIL: slower calls changed which calls shmcoll served"; exit 1; }
# The rule's old name is refused aloud, not dropped.
run old_name SHMCOLL_MPI_NEW_TEAM_AFTER_US=5 -- dup 10
grep -q "SHMCOLL_MPI_NEW_TEAM_AFTER_US is ignored" "$work/old_name" ||
  { cat "$work/old_name"; echo "FAIL: the old name was dropped silently"; exit 1; }
# The team cap decided by use: with room for two teams (MPI_COMM_WORLD's and one more), the second
# communicator is refused while the first holds one, and gets the first's (from the pool) once
# that one is freed.
run handover "${first_call[@]}" SHMCOLL_MPI_MAX_TEAMS=2 -- handover 200
grep -q "to PMPI: SHMCOLL_MPI_MAX_TEAMS" "$work/handover" ||
  { cat "$work/handover"; echo "FAIL: the cap refused no call"; exit 1; }
[ "$(through handover allreduce)" -ge 300 ] ||
  { cat "$work/handover"; echo "FAIL: the second communicator got no team once the first was freed"; exit 1; }

# A rank killed in the middle of a split loop (its communicator's team from the pool): the job
# ends (the survivor waiting on it is told, or the launcher ends it first), nothing is left.
set +e
timeout 120 "$mpirun" "${extra[@]}" -np "$np" env LD_PRELOAD="$layer" "${first_call[@]}" \
  "$program" die 100 4 50 > "$work/die" 2>&1
status=$?
set -e
[ "$status" -ne 124 ] || { cat "$work/die"; echo "FAIL: the job hung after a rank died"; exit 1; }
[ "$status" -ne 0 ] || { cat "$work/die"; echo "FAIL: the job ended well although a rank died"; exit 1; }
sleep 1
! pgrep -f "$program die" > /dev/null || { echo "FAIL: ranks outlived the job"; exit 1; }
died=$(grep -c "peer_failed" "$work/die" || true)

[ "$(shmcoll_files)" -eq "$shm_before" ] || { echo "FAIL: shmcoll files left in /dev/shm"; exit 1; }
echo "PASS: $np ranks, teams from the pool: $(taken dup) of 1000 dup/free, $(taken split) of 200 split/free, $(taken group) of 200 create_group/free; teams made for the 5 busy of 30 communicators: $(($(made busy) - 1)); handed over under the cap: $(through handover allreduce) of 600 calls through shmcoll; a rank killed mid-loop: the job ended ($status), $died survivor(s) told by shmcoll first"
