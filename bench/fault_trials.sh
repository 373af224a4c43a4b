#!/usr/bin/env bash
# usage: bench/fault_trials.sh [BUILD_DIR] [TRIALS] [PARTS]
# Faults from outside a team, tried on real processes many times over (the tests try each a few
# times): the launcher killed with SIGKILL, the caller of shmcoll::run killed with SIGKILL, a
# rank stopped with SIGSTOP, and every program in a small /dev/shm (64 MiB as Docker gives it, and
# 256 KiB) at 2 to 64 ranks. Prints one line per trial set and a table; needs root for the private
# /dev/shm mounts (skipped otherwise). Takes about 10 minutes. PARTS: a comma list of kill, stop,
# small-shm and smallest-shm (default: all).
set -uo pipefail
build=${1:-build}
trials=${2:-20}
parts=${3:-kill,stop,small-shm,smallest-shm}
part() { [[ ",$parts," == *",$1,"* ]]; }
bin=$build/bin
child=$bin/launcher_child
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

shm_entries() { ls /dev/shm 2>/dev/null | grep -c '^shmcoll-'; }
# A process counts as gone once it no longer exists or is a zombie nobody reaped yet.
alive() { [ -e "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
wait_for_files() {  # DIR COUNT: until COUNT rank files exist (10 s at most)
  for _ in $(seq 1000); do
    [ "$(ls "$1" 2>/dev/null | grep -c '^rank\.[0-9]*$')" -ge "$2" ] && return 0
    sleep 0.01
  done
  return 1
}

if part kill; then
echo "== the launcher killed with SIGKILL: shmcoll-run -n 8, ranks in random collectives"
survivors=0 left=0 failed_starts=0
for trial in $(seq "$trials"); do
  dir=$(mktemp -d)
  before=$(shm_entries)
  "$bin/shmcoll-run" -n 8 "$child" random-forever "$dir" "$trial" 2>/dev/null &
  launcher=$!
  if ! wait_for_files "$dir" 8; then failed_starts=$((failed_starts + 1)); fi
  kill -KILL "$launcher"
  wait "$launcher" 2>/dev/null
  sleep 1
  for file in "$dir"/rank.*; do alive "$(cat "$file")" && survivors=$((survivors + 1)); done
  left=$((left + $(shm_entries) - before))
  for file in "$dir"/rank.*; do kill -KILL "$(cat "$file")" 2>/dev/null; done
  rm -rf "$dir"
done
echo "launcher killed: $trials trials, ranks alive 1 s later: $survivors, /dev/shm entries left: $left, failed starts: $failed_starts"

echo "== the caller of shmcoll::run killed with SIGKILL: shmcoll-soak -n 8 (the fork API)"
survivors=0 left=0
for trial in $(seq "$trials"); do
  before=$(shm_entries)
  "$bin/shmcoll-soak" -n 8 --ops 100000000 --seed "$trial" >/dev/null 2>&1 &
  caller=$!
  for _ in $(seq 1000); do
    [ "$(pgrep -P "$caller" | wc -l)" -ge 7 ] && break
    sleep 0.01
  done
  sleep 0.2  # into the calls
  ranks=$(pgrep -P "$caller")
  kill -KILL "$caller"
  wait "$caller" 2>/dev/null
  sleep 1
  for pid in $ranks; do alive "$pid" && survivors=$((survivors + 1)); done
  left=$((left + $(shm_entries) - before))
  for pid in $ranks; do kill -KILL "$pid" 2>/dev/null; done
done
echo "run() caller killed: $trials trials, ranks alive 1 s later: $survivors, /dev/shm entries left: $left"
fi

if part stop; then
echo "== a rank stopped with SIGSTOP, SHMCOLL_TIMEOUT=2: shmcoll-run -n 4"
stop_trials=$((trials < 5 ? trials : 5))
for trial in $(seq "$stop_trials"); do
  dir=$(mktemp -d)
  SHMCOLL_TIMEOUT=2 "$bin/shmcoll-run" -n 4 "$child" random-forever "$dir" "$trial" \
    2>"$dir/stderr" &
  launcher=$!
  wait_for_files "$dir" 4
  start=$(date +%s.%N)
  kill -STOP "$(cat "$dir/rank.1")"
  wait "$launcher"
  status=$?
  took=$(echo "$(date +%s.%N) - $start" | bc)
  printf 'stopped rank: trial %d, shmcoll-run exited %d after %.2f s: %s\n' "$trial" "$status" \
    "$took" "$(grep -m1 'shmcoll-run' "$dir/stderr" | cut -c1-150)"
  for file in "$dir"/rank.*; do kill -KILL "$(cat "$file")" 2>/dev/null; done
  rm -rf "$dir"
done
fi

# One program at N ranks in the current /dev/shm: "ran", "message" (stopped, saying why) or
# "SIGNAL"/"OTHER" (the failures this exists to find).
verdict() {
  local out status
  out=$(timeout 300 "$@" 2>&1)
  status=$?
  if [ $status -eq 0 ]; then
    # The MPI layer runs such a communicator's calls through PMPI, and says so.
    if echo "$out" | grep -q '/dev/shm has'; then echo ran/pmpi; else echo ran; fi
  elif echo "$out" | grep -qiE 'bus error|killed by signal|signal [0-9]|core dumped' ||
    [ $status -gt 128 ]; then echo SIGNAL
  elif echo "$out" | grep -q '/dev/shm'; then echo message
  else echo "OTHER($status): $(echo "$out" | tail -n1 | cut -c1-100)"
  fi
}
export -f verdict

if ! unshare -m true 2>/dev/null; then
  echo "== small /dev/shm: skipped (a private mount namespace needs root)"
  exit 0
fi

if part small-shm; then
echo "== small /dev/shm (a private tmpfs over /dev/shm): every program, 2 to 64 ranks"
layer_openmpi=$build/lib/libshmcoll_mpi_openmpi.so
for size in 64m 256k; do
  unshare -m bash -c '
    set -uo pipefail
    mount --make-rprivate /
    mount -t tmpfs -o size="$1" tmpfs /dev/shm
    bin=$2 build=$3 child=$4 layer=$5 size=$1
    printf "%-6s %-44s" "size" "program"
    for n in 2 8 16 32 64; do printf " %8s" "$n"; done
    echo
    row() {  # NAME COMMAND... with NP for the rank count
      local name=$1
      shift
      printf "%-6s %-44s" "$size" "$name"
      for n in 2 8 16 32 64; do
        printf " %8s" "$(verdict "${@//NP/$n}")"
      done
      echo
    }
    row "shmcoll-run launcher_child allreduce" "$bin/shmcoll-run" -n NP "$child" allreduce
    row "shmcoll-bench alltoall 8 B, 1 MiB" "$bin/shmcoll-bench" -n NP --coll alltoall \
      --sizes 8,1M --iters 1 --bind-to none
    row "shmcoll-bench alltoall 1 MiB --heap" "$bin/shmcoll-bench" -n NP --coll alltoall \
      --sizes 1M --iters 1 --heap --bind-to none
    row "shmcoll-soak 300 calls" "$bin/shmcoll-soak" -n NP --ops 300 --warmup 0
    row "examples/monte_carlo_pi" "$build/examples/monte_carlo_pi" -n NP
    # The MPI alone first: where it cannot run in this /dev/shm either, the layer is not judged.
    mpi_row() {  # NAME PROGRAM ARGS...
      local name=$1
      shift
      printf "%-6s %-44s" "$size" "$name"
      for n in 2 8 16 32 64; do
        local mpi=(mpirun.openmpi --oversubscribe --mca btl self,vader -np "$n")
        if [ "$(verdict "${mpi[@]}" "$@")" != ran ]; then
          printf " %8s" "mpi-fails"
        else
          printf " %8s" "$(verdict "${mpi[@]}" env LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1 "$@")"
        fi
      done
      echo
    }
    mpi_row "Open MPI + layer: mpi_coll_bench, 8 B-64 KiB" "$bin/mpi_coll_bench_openmpi" \
      allreduce,alltoall 8,65536 3
  ' bash "$size" "$bin" "$build" "$child" "$layer_openmpi"
done

fi

if part smallest-shm; then
echo "== the smallest /dev/shm a team needs by default (shmcoll-run launcher_child allreduce)"
for n in 2 8 64; do
  low=0 high=$((256 * 1024))  # KiB
  while [ $((high - low)) -gt 16 ]; do
    mid=$(((low + high) / 2))
    if unshare -m bash -c 'mount --make-rprivate / && mount -t tmpfs -o size="$1k" tmpfs /dev/shm &&
      "$2" -n "$3" "$4" allreduce >/dev/null 2>&1' bash "$mid" "$bin/shmcoll-run" "$n" "$child"; then
      high=$mid
    else
      low=$mid
    fi
  done
  echo "$n ranks: $high KiB of /dev/shm"
done
fi
