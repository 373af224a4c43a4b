#!/usr/bin/env bash
# The process-grid pattern (bench/mpi_subcomm_pattern.c: row and column communicators' small
# collectives between point-to-point steps) under Open MPI alone and with the layer preloaded,
# interleaved: the median over RUNS runs of each one's time per step, and the ratio (above 1: the
# layer is slower), at each rank count. Oversubscribed on small machines, as users run it.
#   bench/run_subcomm_vs.sh BUILD_DIR [RUNS] [STEPS] [RANKS...]
# e.g. bench/run_subcomm_vs.sh build 9 3000 4 8
set -euo pipefail
build=$(realpath "$1") runs=${2:-9} steps=${3:-3000}
shift $(($# < 3 ? $# : 3))
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(4 8)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
program=$build/bin/mpi_subcomm_pattern_openmpi layer=$build/lib/libshmcoll_mpi_openmpi.so
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%6s %14s %14s %8s\n" ranks "alone (us)" "layer (us)" "ratio"
for np in "${ranks[@]}"; do
  : >/tmp/subcomm-alone.$$ && : >/tmp/subcomm-layer.$$
  for ((run = 0; run < runs; ++run)); do
    for way in alone layer; do
      preload=()
      [ "$way" = layer ] && preload=(LD_PRELOAD="$layer")
      mpirun.openmpi --oversubscribe -np "$np" env "${preload[@]}" "$program" "$steps" |
        awk '/us per step/ { print $3 }' >>"/tmp/subcomm-$way.$$"
    done
  done
  alone=$(median </tmp/subcomm-alone.$$) layered=$(median </tmp/subcomm-layer.$$)
  printf "%6d %14.2f %14.2f %8.2f\n" "$np" "$alone" "$layered" "$(echo "$layered / $alone" | bc -l)"
done
rm -f /tmp/subcomm-alone.$$ /tmp/subcomm-layer.$$
