#!/usr/bin/env bash
# The NUMA experiment: shmcoll-bench under every placement of the ranks' memory
# (SHMCOLL_PLACEMENT: local, interleave, each NUMA node, none) and both bindings (core, none),
# then one plot of latency against message size for every combination.
#
# Usage: examples/numa_experiment.sh [--help] [BUILD_DIR [OUT_DIR]]
#   RANKS (default: every core), COLL (allreduce), MAX (4M), ITERS (11) tune the runs.
# Example: RANKS=8 COLL=alltoall examples/numa_experiment.sh build /tmp/numa
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
out=${2:-$build/numa}
ranks=${RANKS:-$(nproc)}
coll=${COLL:-allreduce}
mkdir -p "$out"

nodes=$("$build/bin/shmcoll-info" --json | sed -n 's/.*"numa_nodes": \([0-9]*\).*/\1/p')
placements="local interleave none"
for ((node = 0; node < ${nodes:-1}; ++node)); do placements+=" node:$node"; done

plot_lines=()
for placement in $placements; do
  for bind in core none; do
    name=${placement/:/}-$bind
    echo "== SHMCOLL_PLACEMENT=$placement, --bind-to $bind"
    SHMCOLL_PLACEMENT=$placement "$build/bin/shmcoll-bench" -n "$ranks" --coll "$coll" \
      --min 8 --max "${MAX:-4M}" --iters "${ITERS:-11}" --bind-to "$bind" \
      --csv "$out/$name.csv" | tee "$out/$name.txt" | grep -E '^ +[0-9]' || true
    plot_lines+=("'$out/$name.csv' using 6:7 with linespoints title '$placement, bind $bind'")
  done
done

joined=$(IFS=,; echo "${plot_lines[*]}")
gnuplot <<GNUPLOT
set terminal pngcairo size 1000,650
set output '$out/numa.png'
set datafile separator ','
set key autotitle columnhead
set logscale xy
set xlabel 'message bytes'
set ylabel 'median latency (us)'
set title '$coll on $ranks ranks: placement of rank memory and binding'
set key left top
plot $joined
GNUPLOT
echo "tables and CSVs in $out, plot in $out/numa.png"
