#!/usr/bin/env bash
# An MPI built without Fortran has none of the Fortran constants' variables (Open MPI's
# mpi_fortran_in_place_, mpi_fortran_bottom_, mpi_fortran_status(es)_ignore_; MPICH's
# MPI_F08_STATUS(ES)_IGNORE, in its Fortran library from MPICH 4.1 on, which a C program does not
# load): the layer must load without them, so it may not leave any symbol of the MPI's Fortran
# support for the loader to find (it looks them up at its first Fortran call instead).
# Usage: check_layer_needs_no_fortran.sh LAYER_LIBRARY
set -euo pipefail
undefined=$(nm -D --undefined-only "$1")
if fortran=$(grep -E ' ([Mm][Pp][Ii]_[Ff][Oo][Rr][Tt][Rr][Aa][Nn]_|MPI_F08_|ompi_.*_f(08)?$|[Mm][Pp][Ii]_.*_$)' <<<"$undefined"); then
  echo "the layer needs Fortran symbols from the MPI, and would not load into one built without Fortran:" >&2
  echo "$fortran" >&2
  exit 1
fi
echo "the layer leaves $(wc -l <<<"$undefined") symbols to the loader, none of the MPI's Fortran support"
