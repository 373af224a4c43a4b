#!/usr/bin/env bash
# usage: run_small_dev_shm_test.sh SIZE NP MPIRUN PROGRAM LAYER_LIBRARY
# The MPI layer test (run_mpi_layer_test.sh) in a private /dev/shm of SIZE (Docker gives 64 MiB):
# the MPI's own shared memory is backed lazily, so a layer that filled /dev/shm would kill the
# program with SIGBUS where it runs without the layer. Skipped (77) where a private mount is not
# allowed (not root) or the MPI alone does not run in SIZE.
set -euo pipefail
size=$1 np=$2
shift 2
here=$(dirname "$(readlink -f "$0")")
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: a private mount namespace needs root"
  exit 77
fi
exec unshare -m bash -c '
  set -euo pipefail
  mount --make-rprivate /
  mount -t tmpfs -o size="$1" tmpfs /dev/shm
  np=$2 mpirun=$3
  source "$0/mpi_launch.sh"
  if ! "$mpirun" "${extra[@]}" -np "$np" "$4" > /dev/null 2>&1; then
    echo "SKIP: the MPI alone does not run $np ranks in a /dev/shm of $1"
    exit 77
  fi
  "$0/run_mpi_layer_test.sh" "$3" "$4" "$5" "$np"
' "$here" "$size" "$np" "$@"
