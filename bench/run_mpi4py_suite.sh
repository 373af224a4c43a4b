#!/usr/bin/env bash
# mpi4py's own test suite (test/runtests.py at the tag of the installed mpi4py, the spawn tests
# left out) under Open MPI, alone and with the layer preloaded, at each rank count: the layer must
# pass exactly where the MPI alone passes. Every rank's unittest summary (tests run, failures,
# errors, skips) is compared, and each failing test's name; the layer's verbose table shows what
# it served. Not in CI: the suite takes minutes and comes from mpi4py's repository.
#   bench/run_mpi4py_suite.sh LAYER_LIBRARY [MPI4PY_SOURCE] [RANKS...]
# MPI4PY_SOURCE: a checkout of mpi4py at that tag (default: cloned into ~/.cache/shmcoll), e.g.
#   bench/run_mpi4py_suite.sh build/lib/libshmcoll_mpi_openmpi.so "" 2 3
set -uo pipefail
layer=$(realpath "$1")
source_dir=${2:-}
shift $(($# < 2 ? $# : 2))
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(2 3)
python=/usr/bin/python3  # Debian's, which holds python3-mpi4py
version=$("$python" -c 'import mpi4py; print(mpi4py.__version__)') ||
  { echo "run_mpi4py_suite: no mpi4py for $python (apt-get install python3-mpi4py)"; exit 2; }
if [ -z "$source_dir" ]; then
  source_dir=${XDG_CACHE_HOME:-$HOME/.cache}/shmcoll/mpi4py-$version
  [ -d "$source_dir/test" ] ||
    git clone -q --depth 1 --branch "$version" https://github.com/mpi4py/mpi4py "$source_dir" ||
    { echo "run_mpi4py_suite: cannot fetch mpi4py $version's tests"; exit 2; }
fi
[ -f "$source_dir/test/runtests.py" ] || { echo "run_mpi4py_suite: no $source_dir/test/runtests.py"; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The suite's outcome on every rank (each rank writes its own file: the launcher would mix their
# lines): its summary and the tests that failed or erred.
outcome() {
  local file
  for file in "$1".rank*; do
    grep -E '^(Ran [0-9]+ tests|OK|FAILED|FAIL: |ERROR: )' "$file" |
      sed -E "s/ in [0-9.]+s\$//; s/^/${file##*.}: /"
  done | sort
}

status=0
for np in "${ranks[@]}"; do
  for way in alone layer; do
    preload=()
    [ "$way" = layer ] && preload=(LD_PRELOAD="$layer" SHMCOLL_MPI_VERBOSE=1)
    # shellcheck disable=SC2016  # the rank's number is the rank's shell's to expand
    timeout 1200 mpirun.openmpi --oversubscribe --mca btl self,vader -np "$np" \
      bash -c 'exec "$@" >"$0.rank$OMPI_COMM_WORLD_RANK" 2>&1' "$work/$way-$np" \
      env "${preload[@]}" "$python" "$source_dir/test/runtests.py" --no-builddir \
      -e test_spawn -e test_dynproc
    echo "$np ranks, $way: exit $?"
  done
  outcome "$work/alone-$np" >"$work/alone-$np.outcome"
  outcome "$work/layer-$np" >"$work/layer-$np.outcome"
  sed 's/^/  /' "$work/alone-$np.outcome"
  if diff "$work/alone-$np.outcome" "$work/layer-$np.outcome" >"$work/diff-$np"; then
    echo "$np ranks: the layer passes exactly where Open MPI alone does"
  else
    echo "$np ranks: DIFFERENT outcomes (< alone, > with the layer):"
    cat "$work/diff-$np"
    grep -h -A30 '^\(FAIL\|ERROR\): ' "$work/layer-$np".rank* | head -80
    status=1
  fi
  grep -h '^shmcoll:' "$work/layer-$np".rank* | head -40
done
exit $status
