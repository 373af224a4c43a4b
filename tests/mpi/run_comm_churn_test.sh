#!/usr/bin/env bash
# usage: run_comm_churn_test.sh MPIRUN CHURN_PROGRAM LAYER_LIBRARY NP
# Communicators that come and go through the layer (bench/mpi_comm_churn.c, which checks every
# result): dup/free, split/free and create_group/free loops take their teams from the pool of freed ones instead of
# making one each, leave no descriptor, mapping or /dev/shm file behind, and with
# SHMCOLL_MPI_TEAM_AFTER_CALLS a communicator's first calls go to PMPI under that reason.
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

run dup -- dup 1000
run split -- split 200 3
run group -- group 200 3
cat "$work/dup" "$work/split" "$work/group"
kept_nothing dup
kept_nothing split
kept_nothing group
# A team per distinct live group at most: MPI_COMM_WORLD's and the first loop communicator's.
[ "$(taken dup)" -ge 990 ] || { echo "FAIL: dup/free made teams instead of reusing"; exit 1; }
[ "$(taken split)" -ge 190 ] || { echo "FAIL: split/free made teams instead of reusing"; exit 1; }
[ "$(taken group)" -ge 190 ] || { echo "FAIL: create_group/free made teams instead of reusing"; exit 1; }

# (MPI_COMM_WORLD's own team is made late here, at its third call, so mappings grow once.)
run warm SHMCOLL_MPI_TEAM_AFTER_CALLS=2 -- split 50 4
grep -q "to PMPI: the communicator's first calls" "$work/warm" ||
  { cat "$work/warm"; echo "FAIL: no call went to PMPI while warming up"; exit 1; }
run no_pool SHMCOLL_MPI_POOL_TEAMS=0 -- dup 50
[ "$(taken no_pool)" -eq 0 ] || { echo "FAIL: SHMCOLL_MPI_POOL_TEAMS=0 still reused"; exit 1; }

[ "$(shmcoll_files)" -eq "$shm_before" ] || { echo "FAIL: shmcoll files left in /dev/shm"; exit 1; }
echo "PASS: $np ranks, teams from the pool: $(taken dup) of 1000 dup/free, $(taken split) of 200 split/free, $(taken group) of 200 create_group/free"
