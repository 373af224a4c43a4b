#!/usr/bin/env bash
# usage: run_find_mpi_test.sh SOURCE_DIR
# How the build finds an MPI the way a site's module offers it (cmake/shmcoll_mpis.cmake), here
# with Debian's two MPIs standing in (configured only: tools/check-debian13 builds such a layer
# and runs its tests, which would take CI's two cores 10 minutes):
# 1. only an mpicc (and its mpirun, mpifort) in PATH, Debian's pkg-config skipped: one layer, for
#    that MPI's ABI (MPICH's), launched by the mpirun beside that mpicc, its Fortran checks built
#    by the mpifort there;
# 2. -DMPI_C_COMPILER=mpicc.openmpi: Open MPI's layer alone, launched by mpirun.openmpi.
set -euo pipefail
source_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
only="$work/module/bin"
mkdir -p "$only"
ln -s /usr/bin/mpicc.mpich "$only/mpicc"
printf '#!/bin/sh\nexec /usr/bin/mpirun.mpich "$@"\n' > "$only/mpirun"  # hydra finds its proxy
chmod +x "$only/mpirun"                                                    # by the name it runs as
ln -s /usr/bin/mpif90.mpich "$only/mpifort"
options=(-DCMAKE_BUILD_TYPE=Release -DSHMCOLL_BUILD_TESTS=OFF -DSHMCOLL_BUILD_BENCH=OFF)

cached() {  # cached BUILD_DIR NAME: a CMake cache entry's value
  sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt"
}

PATH="$only:$PATH" cmake -S "$source_dir" -B "$work/in-path" "${options[@]}" \
  -DSHMCOLL_MPI_PKG_CONFIG=OFF > "$work/in-path.log" 2>&1 ||
  { cat "$work/in-path.log"; echo "FAIL: configure with mpicc in PATH"; exit 1; }
[ "$(cached "$work/in-path" SHMCOLL_MPI_FROM_mpich)" = FindMPI ] ||
  { cat "$work/in-path.log"; echo "FAIL: the mpicc in PATH was not taken as MPICH's ABI"; exit 1; }
[ -z "$(cached "$work/in-path" SHMCOLL_MPI_FROM_openmpi)" ] ||
  { echo "FAIL: a layer for Open MPI too, with only MPICH's mpicc in PATH"; exit 1; }
[ "$(cached "$work/in-path" SHMCOLL_MPIRUN_mpich)" = "$only/mpirun" ] ||
  { echo "FAIL: launcher $(cached "$work/in-path" SHMCOLL_MPIRUN_mpich), not the one beside mpicc"; exit 1; }
[ "$(cached "$work/in-path" SHMCOLL_MPIFORT_mpich)" = "$only/mpifort" ] ||
  { echo "FAIL: Fortran wrapper $(cached "$work/in-path" SHMCOLL_MPIFORT_mpich)"; exit 1; }

cmake -S "$source_dir" -B "$work/pointed" "${options[@]}" \
  -DMPI_C_COMPILER=/usr/bin/mpicc.openmpi > "$work/pointed.log" 2>&1 ||
  { cat "$work/pointed.log"; echo "FAIL: configure with MPI_C_COMPILER"; exit 1; }
[ "$(cached "$work/pointed" SHMCOLL_MPI_FROM_openmpi)" = FindMPI ] &&
  [ "$(cached "$work/pointed" SHMCOLL_MPIRUN_openmpi)" = /usr/bin/mpirun.openmpi ] ||
  { cat "$work/pointed.log"; echo "FAIL: MPI_C_COMPILER=mpicc.openmpi did not give Open MPI's layer"; exit 1; }

echo "PASS: the mpicc in PATH gives MPICH's layer, MPI_C_COMPILER=mpicc.openmpi Open MPI's"
