#!/usr/bin/env bash
# tools/many-core-run's short form, as the lent machine runs the full one: pack this build's
# binaries with their libraries, run the bundle at 2 ranks, and check that every setting came
# back as JSON that tools/perf-tables can make its tables of.
set -euo pipefail
source_dir=$1 build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$source_dir/tools/many-core-run" pack "$work/bundle" "$build_dir"
"$source_dir/tools/many-core-run" run "$work/bundle.tar.gz" "$work/out" --short
for file in log.txt machine.txt many-core.tar.gz; do
  [[ -s $work/out/$file ]] || { echo "no $file in the run's output"; exit 1; }
done
mkdir "$work/runs"
tar -C "$work/runs" -xzf "$work/out/many-core.tar.gz"
for setting in auto flat-small flat-medium tree unplaced unbound; do
  [[ -s $work/runs/$setting-n2-r1.json ]] || { echo "no $setting run came back"; exit 1; }
done
grep -q "online CPUs: $(nproc)" "$work/out/machine.txt"
tables=$("$source_dir/tools/perf-tables" render --layout ranks "$work/runs/auto-*.json")
grep -q '| allreduce | 8 |' <<<"$tables" || { echo "perf-tables made no table: $tables"; exit 1; }
"$source_dir/tools/perf-tables" render --layout settings "$work/runs/auto-*.json" \
  "$work/runs/tree-*.json" | grep -q '| barrier | 0 |'
echo "many-core-run: the short form packed, ran and came back whole"
