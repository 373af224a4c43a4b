#!/usr/bin/env bash
# usage: run_barrier_order_test.sh MPIRUN ORDER_PROGRAM LAYER_LIBRARY
# bench/mpi_barrier_order.c at 2 ranks and at 4 (more than this machine's cores), with the layer
# and without: every rank's exit from the timed barrier comes after the last rank's entry on one
# clock, and through the layer the barriers went through shmcoll.
set -euo pipefail
mpirun=$1 program=$2 layer=$3
source "$(dirname "$0")/mpi_launch.sh"
for np in 2 4; do
  for how in alone layer; do
    out=$work/order-$np-$how
    preload=()
    [ "$how" = layer ] && preload=(env LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1)
    "$mpirun" "${extra[@]}" -np "$np" "${preload[@]}" "$program" 500 >"$out" 2>&1 ||
      { cat "$out"; echo "FAIL: $np ranks, $how"; exit 1; }
    grep -q "^$np ranks, 500 samples: slowest .*; left before the last entered: 0$" "$out" ||
      { cat "$out"; echo "FAIL: $np ranks, $how: a rank left a barrier early, or no report"; exit 1; }
    if [ "$how" = layer ]; then
      served=$(awk '$1 == "shmcoll:" && $2 == "barrier" {print $4}' "$out")
      [ "${served:-0}" -ge 1000 ] ||
        { cat "$out"; echo "FAIL: $np ranks: the barriers did not go through shmcoll"; exit 1; }
    fi
  done
done
echo "barrier order: no rank left a barrier before the last entered, at 2 and 4 ranks"
