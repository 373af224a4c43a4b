#!/usr/bin/env bash
# usage: run_mpi_layer_test.sh MPIRUN PROGRAM LAYER_LIBRARY NP [FAKE_NODES]
# (SHMCOLL_TEST_NO_PMPI=1: also fail when any call went to PMPI; SHMCOLL_TEST_PMPI_REASONS: reasons
# the verbose table must name; SHMCOLL_TEST_COLLECTIVES: the collectives that must have gone
# through shmcoll, when the program does not call every one; SHMCOLL_TEST_LAYER_DEFAULTS=1:
# communicators warm up through PMPI as by default, and only results are compared, else each gets
# its team at its first call; SHMCOLL_TEST_NEEDS_MIB: memory each rank needs, else the test is
# skipped: exit 77; SHMCOLL_TEST_LAYER_ONLY=1: the program checks its results against references of
# its own, and the run without the layer, which would only repeat that, is left out.)
# Runs PROGRAM under MPIRUN with NP ranks twice, without the layer and with it preloaded, and
# passes when both runs pass their own checks, every rank's digest is the same in both, and the
# layer really took the shmcoll path (SHMCOLL_MPI_VERBOSE's counts on rank 0): every intercepted
# collective, on pretend nodes too (node by node).
set -euo pipefail
mpirun=$1 program=$2 layer=$3 np=$4 fake_nodes=${5:-0}
source "$(dirname "$0")/mpi_launch.sh"

if [ -n "${SHMCOLL_TEST_NEEDS_MIB:-}" ]; then
  available=$(awk '$1 == "MemAvailable:" {print int($2 / 1024)}' /proc/meminfo)
  if [ "$available" -lt $((SHMCOLL_TEST_NEEDS_MIB * np + 1024)) ]; then
    echo "SKIP: $np ranks need ${SHMCOLL_TEST_NEEDS_MIB} MiB each; $available MiB available"
    exit 77
  fi
fi

if [ "${SHMCOLL_TEST_LAYER_ONLY:-0}" = 1 ]; then
  : > "$work/plain"
else
  "$mpirun" "${extra[@]}" -np "$np" "$program" > "$work/plain" 2> "$work/plain.err" ||
    { cat "$work/plain" "$work/plain.err"; echo "FAIL: the program fails without the layer"; exit 1; }
fi
# The preload goes on the program only, not on the launcher.
defaults=${SHMCOLL_TEST_LAYER_DEFAULTS:-0}
first_call=(SHMCOLL_MPI_TEAM_AFTER_CALLS=0 SHMCOLL_MPI_NEW_TEAM_AFTER_CALLS=0)
[ "$defaults" = 1 ] && first_call=()
"$mpirun" "${extra[@]}" -np "$np" env LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1 "${first_call[@]}" \
  SHMCOLL_MPI_FAKE_NODES="$fake_nodes" "$program" > "$work/layer" 2> "$work/layer.err" ||
  { cat "$work/layer" "$work/layer.err"; echo "FAIL: the program fails with the layer"; exit 1; }
# The ranks' digest lines, wherever they are: Open MPI 5's mpirun (PRRTE) has been seen to put a
# piece of a rank's stderr on its stdout, in front of the next line.
digests() { grep -oE 'rank [0-9]+ digest [0-9a-fA-F]+ failures [0-9]+' "$1" | sort || true; }
digests "$work/plain" > "$work/plain.sorted"
digests "$work/layer" > "$work/layer.sorted"
cat "$work/layer.sorted" "$work/layer.err"
if [ "${SHMCOLL_TEST_LAYER_ONLY:-0}" != 1 ] && ! diff "$work/plain.sorted" "$work/layer.sorted"; then
  echo "FAIL: results differ with the layer"
  exit 1
fi
[ "$(grep -c digest "$work/layer.sorted")" -eq "$np" ] || { echo "FAIL: not every rank reported"; exit 1; }
collectives="barrier bcast reduce allreduce reduce_local reduce_scatter reduce_scatter_block scatter
  scatterv gather gatherv allgather allgatherv scan exscan alltoall alltoallv alltoallw"
[ "$np" -eq 1 ] && collectives="reduce_local"  # one rank's communicators are the MPI's
[ "$defaults" = 1 ] && collectives="allreduce"  # most communicators here are used a few times
collectives=${SHMCOLL_TEST_COLLECTIVES:-$collectives}
for name in $collectives; do
  count=$(awk -v name="$name" '$1 == "shmcoll:" && $2 == name {print $4}' "$work/layer.err")
  if [ "${count:-0}" -eq 0 ]; then
    echo "FAIL: no $name call went through shmcoll"
    exit 1
  fi
done
# Every call that went to PMPI has its reason named, and (SHMCOLL_TEST_PMPI_REASONS, separated by
# ';') the reasons this program provokes are among them.
if grep -q "to PMPI: unexplained" "$work/layer.err"; then
  echo "FAIL: a call went to PMPI without a reason in the verbose table"
  exit 1
fi
IFS=';' read -ra reasons <<< "${SHMCOLL_TEST_PMPI_REASONS:-}"
for reason in "${reasons[@]}"; do
  grep -qF "to PMPI: $reason" "$work/layer.err" || { echo "FAIL: no PMPI call for: $reason"; exit 1; }
done
# SHMCOLL_TEST_NO_PMPI=1: nothing may go to PMPI (a program whose every call the layer serves).
if [ "${SHMCOLL_TEST_NO_PMPI:-0}" = 1 ]; then
  if awk '$1 == "shmcoll:" && $5 == "pmpi" && $6 > 0 {found = 1} END {exit !found}' "$work/layer.err"; then
    echo "FAIL: calls went to PMPI"
    exit 1
  fi
fi
through_shmcoll=$(awk '$1 == "shmcoll:" && $2 == "allreduce" {print $4}' "$work/layer.err")
echo "PASS: $np ranks, identical results with and without the layer, $through_shmcoll allreduce calls through shmcoll on rank 0"
