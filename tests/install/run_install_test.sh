#!/usr/bin/env bash
# The install test: installs the build into a fresh prefix, then builds and runs an outside
# project against it twice: with find_package(shmcoll CONFIG) (shared and static) and, in C,
# with pkg-config. Usage: run_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for file in include/shmcoll/shmcoll.hpp include/shmcoll/shmcoll.h lib/libshmcoll.so \
  lib/libshmcoll.a lib/cmake/shmcoll/shmcollConfig.cmake lib/pkgconfig/shmcoll.pc \
  bin/shmcoll-run bin/shmcoll-info bin/shmcoll-topo share/doc/shmcoll/README.md; do
  [ -e "$prefix/$file" ] || { echo "not installed: $file" >&2; exit 1; }
done
ls "$prefix"/lib/libshmcoll_mpi_*.so >/dev/null 2>&1 || echo "(no MPI layer was built)"
"$prefix/bin/shmcoll-info" --json >/dev/null

echo "== find_package(shmcoll CONFIG)"
cmake -S "$source/tests/install" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/cmake-build" >"$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/cmake-build/uses_shmcoll"
"$work/cmake-build/uses_shmcoll_static"

echo "== pkg-config shmcoll"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cc -std=c11 "$source/tests/install/uses_shmcoll.c" $(pkg-config --cflags --libs shmcoll) \
  -o "$work/uses_shmcoll_c"
LD_LIBRARY_PATH=$prefix/lib "$work/uses_shmcoll_c"
