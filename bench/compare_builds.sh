#!/usr/bin/env bash
# Two builds of shmcoll measured in the same run: their shmcoll-bench takes turns, RUNS times,
# and each row (collective, bytes) gets the median of each build's medians and their ratio.
# This machine's speed drifts within minutes, so only turns taken in one run compare.
#
#   bench/compare_builds.sh OLD_BUILD NEW_BUILD RUNS [shmcoll-bench options...]
# Example: bench/compare_builds.sh /tmp/base/build build 5 -n 2 --coll allreduce,bcast --sizes 8,1M
# Prints: collective, contender (shmcoll, or an MPI without or with each build's layer under --vs),
# bytes, old and new median (us), new/old (below 1: the new build is faster).
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" || $# -lt 3 ]]; then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
old=$1 new=$2 runs=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for run in $(seq 1 "$runs"); do
  for side in old new; do
    build=$old
    [ "$side" = new ] && build=$new
    "$build/bin/shmcoll-bench" "$@" --csv "$work/$side.$run.csv" > /dev/null
  done
done
# collective,contender,ranks,dtype,op,bytes,median_us,...: one median per run and side.
for side in old new; do
  tail -q -n +2 "$work"/$side.*.csv | awk -F, -v side="$side" '{print side, $1 "/" $2, $6, $7}'
done | sort -k2,2 -k3,3n -k1,1 | awk '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { key = $2 " " $3; samples[key, $1] = samples[key, $1] " " $4; if (!(key in seen)) { seen[key] = 1; order[++rows] = key } }
  END {
    printf "%-36s %10s %12s %12s %9s\n", "collective/contender", "bytes", "old_us", "new_us", "new/old"
    for (r = 1; r <= rows; ++r) {
      split(order[r], k, " ")
      o = median(samples[order[r], "old"]); n = median(samples[order[r], "new"])
      printf "%-36s %10d %12.3f %12.3f %9.2f\n", k[1], k[2], o, n, n / o
    }
  }'
