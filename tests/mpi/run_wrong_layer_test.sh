#!/usr/bin/env bash
# usage: run_wrong_layer_test.sh MPIRUN PROGRAM WRONG_LAYER RIGHT_LAYER
# The layer built for the other MPI preloaded into PROGRAM (built for MPIRUN's MPI): every rank
# stops before the MPI initialises with one line naming the layer to preload instead; no crash,
# no hang, no misread handle.
set -euo pipefail
mpirun=$1 program=$2 wrong=$3 right=$4
source "$(dirname "$0")/mpi_launch.sh"
set +e
timeout 120 "$mpirun" "${extra[@]}" -np 2 env LD_PRELOAD="$wrong" "$program" > "$work/out" 2>&1
status=$?
set -e
cat "$work/out"
[ "$status" -ne 124 ] || { echo "FAIL: the job hung"; exit 1; }
[ "$status" -ne 0 ] || { echo "FAIL: the job ran with the wrong layer"; exit 1; }
grep -qF "preload $right instead" "$work/out" || { echo "FAIL: no line names $right"; exit 1; }
if grep -qiE "segmentation|invalid communicator|signal [0-9]|core dumped" "$work/out"; then
  echo "FAIL: the wrong layer crashed or misread a handle"
  exit 1
fi
echo "PASS: the wrong layer stops with a line naming $right"
