#!/usr/bin/env bash
# tools/shmcoll-tune --quick: the file it writes names this machine and the two settings, the
# library applies it here (shmcoll-info says so), and collectives on what it chose check out.
set -euo pipefail
source_dir=$1 bench=$2 info=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$source_dir/tools/shmcoll-tune" --quick --bench "$bench" --info "$info" --out "$work/tuning"
grep -qx "machine=$("$info" --machine)" "$work/tuning"
grep -qE '^SHMCOLL_CMA_MIN=[0-9]+$' "$work/tuning"
grep -qE '^SHMCOLL_STREAM_MIN=[0-9]+$' "$work/tuning"
described=$(SHMCOLL_TUNING=$work/tuning "$info")  # not piped: grep -q would cut it short
grep -q "tuning:    applied: $work/tuning" <<<"$described" || { echo "$described"; exit 1; }
SHMCOLL_TUNING=$work/tuning "$bench" -n 2 --coll scatter,alltoall,allgather,gather,bcast,reduce \
  --sizes 8,64K,1M --iters 3 --check >/dev/null
echo "shmcoll-tune: measured, wrote a file this machine applies, and its choice checks out"
