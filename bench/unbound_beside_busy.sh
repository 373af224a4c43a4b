#!/usr/bin/env bash
# Two ranks that nobody bound, beside busy processes (a shared node, a laptop running a build):
# 8-byte allreduce, unbound against bound, interleaved, in several trials per load. Linux's
# wake-up placement can put two unbound ranks on one CPU, where each call pays a sleep; this
# measures whether shmcoll gets them apart again.
#
#   bench/unbound_beside_busy.sh [BUILD_DIR] [TRIALS] [BUSY_COUNTS...]
# Example: bench/unbound_beside_busy.sh build 6 2 3 4
# Prints one line per trial: busy processes, unbound and bound median (us), their ratio.
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
build=${1:-build}
trials=${2:-6}
shift 2 || true
busy_counts=("${@:-2 3 4}")
bench="$build/bin/shmcoll-bench"

median_us() {  # median latency of one 2-rank 8-byte allreduce run, bound or not
  "$bench" -n 2 --coll allreduce --sizes 8 --iters 9 --bind-to "$1" | awk '$1 == 8 {print $2}'
}

busy=()
stop_busy() {
  if [ ${#busy[@]} -gt 0 ]; then
    kill "${busy[@]}" 2>/dev/null || true
    wait "${busy[@]}" 2>/dev/null || true  # (killed: a non-zero status)
  fi
  busy=()
}
trap stop_busy EXIT

echo "# busy  trial  unbound_us  bound_us  unbound/bound"
for count in ${busy_counts[@]}; do
  for trial in $(seq 1 "$trials"); do
    for _ in $(seq 1 "$count"); do
      bash -c 'while :; do :; done' &
      busy+=($!)
    done
    sleep 0.5
    unbound=$(median_us none)
    bound=$(median_us core)
    stop_busy
    awk -v c="$count" -v t="$trial" -v u="$unbound" -v b="$bound" \
      'BEGIN {printf "%6d %6d %11.3f %9.3f %14.2f\n", c, t, u, b, u / b}'
  done
done
