#!/usr/bin/env bash
# usage: run_mpmd_tunables_test.sh MPIRUN PROGRAM LAYER_LIBRARY
# An MPMD launch whose two ranks have different team-wide tunables (the algorithm allreduce is
# forced to, the tree's hierarchy): with the layer preloaded, PROGRAM must pass its checks with
# the same digests as without the layer, and one line must say which variables differ and that
# the team runs with rank 0's values.
set -euo pipefail
mpirun=$1 program=$2 layer=$3
source "$(dirname "$0")/mpi_launch.sh"
first_call=(SHMCOLL_MPI_TEAM_AFTER_CALLS=0 SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS=0)  # a team for each

# Open MPI 5.0.7's mpirun (Debian 13) crashes on any MPMD launch, with or without the layer: then
# there is nothing to compare, and the test says so (exit 77: skipped).
if ! "$mpirun" "${extra[@]}" -np 1 true : -np 1 true > "$work/mpmd" 2>&1; then
  tail -n 5 "$work/mpmd"
  echo "SKIP: $mpirun cannot launch an MPMD program (two commands), even without the layer"
  exit 77
fi

"$mpirun" "${extra[@]}" -np 2 "$program" > "$work/plain" 2> "$work/plain.err" ||
  { cat "$work/plain" "$work/plain.err"; echo "FAIL: the program fails without the layer"; exit 1; }
"$mpirun" "${extra[@]}" \
  -np 1 env LD_PRELOAD="$layer" "${first_call[@]}" SHMCOLL_ALLREDUCE_ALGORITHM=allreduce_tree \
  "$program" : \
  -np 1 env LD_PRELOAD="$layer" "${first_call[@]}" SHMCOLL_ALLREDUCE_ALGORITHM=allreduce_all_read \
  SHMCOLL_HIERARCHY=core "$program" > "$work/layer" 2> "$work/layer.err" ||
  { cat "$work/layer" "$work/layer.err"; echo "FAIL: the MPMD program fails with the layer"; exit 1; }
if ! diff <(sort "$work/plain") <(sort "$work/layer"); then
  cat "$work/layer.err"
  echo "FAIL: results differ with the layer"
  exit 1
fi
warning='SHMCOLL_ALLREDUCE_ALGORITHM=allreduce_all_read (rank 0: allreduce_tree)'
grep -qF "$warning" "$work/layer.err" || { cat "$work/layer.err"; echo "FAIL: no line names the differing variables"; exit 1; }
grep -qF "the team uses rank 0's values" "$work/layer.err" || { echo "FAIL: no line says which values run"; exit 1; }
echo "PASS: MPMD ranks with different tunables, identical results with and without the layer"
