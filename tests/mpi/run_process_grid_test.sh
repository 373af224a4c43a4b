#!/usr/bin/env bash
# usage: run_process_grid_test.sh MPIRUN GRID_PROGRAM LAYER_LIBRARY
# A process grid's row and column communicators (bench/mpi_subcomm_pattern.c, which checks every
# result) through the layer at 4 and 6 ranks, more than this machine's cores: the results are
# right and the row and column calls went through shmcoll.
set -euo pipefail
mpirun=$1 program=$2 layer=$3
source "$(dirname "$0")/mpi_launch.sh"
for np in 4 6; do
  "$mpirun" "${extra[@]}" -np "$np" env LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1 \
    "$program" 500 >"$work/grid-$np" 2>&1 || { cat "$work/grid-$np"; echo "FAIL: $np ranks"; exit 1; }
  grep -q " 0 wrong" "$work/grid-$np" || { cat "$work/grid-$np"; echo "FAIL: wrong results"; exit 1; }
  served=$(awk '$1 == "shmcoll:" && $2 == "allreduce" {print $4}' "$work/grid-$np")
  [ "${served:-0}" -ge 500 ] ||
    { cat "$work/grid-$np"; echo "FAIL: the row and column allreduces did not go through shmcoll"; exit 1; }
done
echo "process grid: right results through the layer at 4 and 6 ranks"
