#!/usr/bin/env bash
# libshmcoll.so exports the public API (C and C++) and nothing of the layers under it.
# Usage: check_exports.sh LIBRARY
set -euo pipefail
symbols=$(nm -D --defined-only -C "$1")
# detail::throw_invalid_dtype is called by dtype_size, inline in the public header.
# A symbol is internal when its own name (not a parameter type) is in an internal namespace.
if internal=$(grep -E '^[0-9a-f]+ [A-Za-z] ([a-z ]+ for )?shmcoll::(detail|shm|coll|topo|ops|mpi)::' <<<"$symbols" |
  grep -v 'shmcoll::detail::throw_invalid_dtype'); then
  echo "internal symbols are exported:" >&2
  echo "$internal" | head -20 >&2
  exit 1
fi
for expected in ' shmcoll_allreduce' ' shmcoll_version' 'shmcoll::Team::allreduce(' \
  'shmcoll::version()' 'shmcoll::Datatype::vector(' 'typeinfo for shmcoll::Error'; do
  grep -qF -- "$expected" <<<"$symbols" || { echo "not exported: $expected" >&2; exit 1; }
done
echo "exports: $(grep -c ' shmcoll_' <<<"$symbols") C functions, $(grep -c 'shmcoll::' <<<"$symbols") C++ symbols, nothing internal"
