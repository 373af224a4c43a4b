#!/usr/bin/env bash
# mpi4py's Allreduce with and without the MPI layer, interleaved: medians over RUNS runs of
# bench/mpi4py_allreduce.py (each a median over its iterations), and the ratio, per size.
#   bench/run_mpi4py_vs.sh LAYER_LIBRARY [NP] [RUNS] [MPIRUN ARGS...]
# e.g. bench/run_mpi4py_vs.sh build/lib/libshmcoll_mpi_openmpi.so 2 5 --bind-to core
set -euo pipefail
layer=$(realpath "$1") np=${2:-2} runs=${3:-5}
shift $(($# < 3 ? $# : 3))
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
program=$(dirname "$0")/mpi4py_allreduce.py
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((run = 0; run < runs; ++run)); do
  for way in alone layer; do
    preload=()
    [ "$way" = layer ] && preload=(-x LD_PRELOAD="$layer")
    mpirun.openmpi --oversubscribe --mca btl self,vader -np "$np" "$@" "${preload[@]}" \
      /usr/bin/python3 "$program" | sed "s/^/$way /" >> "$out"
  done
done
awk '{ key = $3; t[$1, key] = t[$1, key] " " $6; sizes[key] = 1 }
  function median(list,   n, v, i, j, x) {
    n = split(list, v, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  END {
    printf "%-10s %14s %14s %8s\n", "bytes", "alone (us)", "layer (us)", "ratio"
    for (key in sizes) {
      a = median(t["alone", key]); l = median(t["layer", key])
      printf "%-10s %14.2f %14.2f %8.2f\n", key, a, l, a / l
    }
  }' "$out" | sort -n
