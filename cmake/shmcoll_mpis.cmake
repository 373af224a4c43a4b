# The MPIs the PMPI layer is built for. Each is a flavour, named by its ABI (openmpi, or mpich for
# MPICH and the MPIs that share its ABI: Intel MPI, Cray MPICH, MVAPICH), and comes with
# - mpi_c_<flavour>: its C library, for the layer and the programs built against that MPI;
# - SHMCOLL_MPIRUN_<flavour>: its launcher;
# - SHMCOLL_MPIFORT_<flavour>: its Fortran wrapper compiler, empty when it has none or it cannot
#   compile `include 'mpif.h'` (an MPI built without Fortran may still install the wrapper);
# - SHMCOLL_MPI_FROM_<flavour>: pkg-config (Debian's package, which Debian's mpi4py is built on)
#   or FindMPI.
# Where they come from, first match wins:
# 1. the MPI a user points at, through CMake's FindMPI: -DMPI_HOME=<prefix> (or MPI_HOME in the
#    environment) or -DMPI_C_COMPILER=<its mpicc>. Only that MPI is built for.
# 2. Debian's (and Ubuntu's) two packages, through pkg-config (ompi-c, mpich), whose programs carry
#    the flavour as a suffix (mpirun.openmpi). -DSHMCOLL_MPI_PKG_CONFIG=OFF skips them.
# 3. the MPI whose mpicc is in PATH, through FindMPI (a site's module, a Spack package).
# Sets SHMCOLL_MPI_FLAVOURS (in the caller's scope) to the flavours found.

option(SHMCOLL_MPI_PKG_CONFIG "Look for Debian's MPI packages through pkg-config" ON)

# The flavour of the MPI whose mpi.h is in `include_dirs`, from the macros each ABI defines; empty
# for an MPI of neither ABI.
function(shmcoll_mpi_flavour_of include_dirs result)
  include(CheckSymbolExists)
  set(CMAKE_REQUIRED_INCLUDES ${include_dirs})
  set(CMAKE_REQUIRED_QUIET ON)
  check_symbol_exists(OPEN_MPI mpi.h SHMCOLL_MPI_H_IS_OPEN_MPI)
  check_symbol_exists(MPICH_VERSION mpi.h SHMCOLL_MPI_H_IS_MPICH)
  if(SHMCOLL_MPI_H_IS_OPEN_MPI)
    set(${result} openmpi PARENT_SCOPE)
  elseif(SHMCOLL_MPI_H_IS_MPICH)
    set(${result} mpich PARENT_SCOPE)
  else()
    set(${result} "" PARENT_SCOPE)
  endif()
endfunction()

# `mpifort` itself when it compiles a program that includes mpif.h, else empty: Open MPI built
# without Fortran installs its mpifort and an mpif.h that includes a file it does not install.
function(shmcoll_working_mpifort mpifort result)
  set(${result} "" PARENT_SCOPE)
  if(NOT mpifort)
    return()
  endif()
  set(probe "${CMAKE_BINARY_DIR}/CMakeFiles/shmcoll_mpifort_probe")
  file(MAKE_DIRECTORY "${probe}")
  file(WRITE "${probe}/probe.f90" "program probe\n  include 'mpif.h'\n  integer :: ierror\n"
                                  "  call MPI_Init(ierror)\n  call MPI_Finalize(ierror)\nend program\n")
  execute_process(COMMAND "${mpifort}" -c probe.f90 WORKING_DIRECTORY "${probe}"
                  RESULT_VARIABLE failed OUTPUT_QUIET ERROR_QUIET)
  if(failed)
    message(STATUS "shmcoll MPI layer: ${mpifort} cannot compile mpif.h: no Fortran checks")
    return()
  endif()
  set(${result} "${mpifort}" PARENT_SCOPE)
endfunction()

# One MPI through FindMPI: adds its flavour, or says why not. The mpicc named by MPI_C_COMPILER,
# else the one in MPI_HOME's bin, else the first in PATH names it: FindMPI alone would start from
# the first mpiexec in PATH (or the one a previous configure cached), which may be another MPI's.
function(shmcoll_mpi_from_find_mpi flavours_var)
  if(NOT MPI_C_COMPILER)
    set(home "${MPI_HOME}")
    if(NOT home AND DEFINED ENV{MPI_HOME})
      set(home "$ENV{MPI_HOME}")
    endif()
    if(home)
      find_program(mpicc_found mpicc HINTS "${home}/bin" NO_DEFAULT_PATH NO_CACHE)
    else()
      find_program(mpicc_found mpicc NO_CACHE)
    endif()
    if(mpicc_found)
      set(MPI_C_COMPILER "${mpicc_found}")
    endif()
  endif()
  find_package(MPI COMPONENTS C)
  if(NOT MPI_C_FOUND)
    message(STATUS "shmcoll MPI layer: FindMPI found no MPI (set MPI_HOME or MPI_C_COMPILER)")
    return()
  endif()
  shmcoll_mpi_flavour_of("${MPI_C_INCLUDE_DIRS}" flavour)
  if(NOT flavour)
    message(WARNING "shmcoll MPI layer: the MPI of ${MPI_C_COMPILER} has neither Open MPI's nor "
                    "MPICH's ABI (its mpi.h defines neither OPEN_MPI nor MPICH_VERSION); not built")
    return()
  endif()
  add_library(mpi_c_${flavour} ALIAS MPI::MPI_C)
  # The launcher and Fortran wrapper beside its mpicc, as a module or prefix installs them, with
  # its suffix where it has one (mpicc.mpich: mpirun.mpich; FindMPI would take mpiexec, which may
  # be another MPI's).
  get_filename_component(bin "${MPI_C_COMPILER}" DIRECTORY)
  get_filename_component(compiler "${MPI_C_COMPILER}" NAME)
  string(REGEX MATCH "[.][^.]+$" suffix "${compiler}")
  find_program(mpirun NAMES mpirun${suffix} mpiexec${suffix} HINTS "${bin}" NO_DEFAULT_PATH
               NO_CACHE)
  if(NOT mpirun)
    set(mpirun "${MPIEXEC_EXECUTABLE}")
  endif()
  find_program(mpifort NAMES mpifort${suffix} mpif90${suffix} HINTS "${bin}" NO_DEFAULT_PATH
               NO_CACHE)
  shmcoll_working_mpifort("${mpifort}" mpifort)
  set(SHMCOLL_MPIRUN_${flavour} "${mpirun}" CACHE INTERNAL "")
  set(SHMCOLL_MPIFORT_${flavour} "${mpifort}" CACHE INTERNAL "")
  set(SHMCOLL_MPI_FROM_${flavour} FindMPI CACHE INTERNAL "")
  message(STATUS "shmcoll MPI layer: ${flavour} ABI from ${MPI_C_COMPILER} (MPI ${MPI_C_VERSION}), "
                 "launched by ${mpirun}")
  set(${flavours_var} ${flavour} PARENT_SCOPE)
endfunction()

# Debian's packages: adds each flavour found.
function(shmcoll_mpis_from_pkg_config flavours_var)
  set(flavours "")
  foreach(flavour openmpi mpich)
    set(module mpich)
    if(flavour STREQUAL "openmpi")
      set(module ompi-c)
    endif()
    pkg_check_modules(MPI_PC_${flavour} IMPORTED_TARGET GLOBAL ${module})
    if(NOT MPI_PC_${flavour}_FOUND)
      message(STATUS "shmcoll MPI layer: ${flavour} not found through pkg-config (${module})")
      continue()
    endif()
    add_library(mpi_c_${flavour} ALIAS PkgConfig::MPI_PC_${flavour})
    unset(mpifort)  # else find_program keeps the last flavour's
    find_program(mpifort mpif90.${flavour} NO_CACHE)
    shmcoll_working_mpifort("${mpifort}" mpifort)
    set(SHMCOLL_MPIRUN_${flavour} mpirun.${flavour} CACHE INTERNAL "")
    set(SHMCOLL_MPIFORT_${flavour} "${mpifort}" CACHE INTERNAL "")
    set(SHMCOLL_MPI_FROM_${flavour} pkg-config CACHE INTERNAL "")
    list(APPEND flavours ${flavour})
  endforeach()
  set(${flavours_var} ${flavours} PARENT_SCOPE)
endfunction()

set(SHMCOLL_MPI_FLAVOURS "")
if(MPI_HOME OR DEFINED ENV{MPI_HOME} OR MPI_C_COMPILER)
  shmcoll_mpi_from_find_mpi(SHMCOLL_MPI_FLAVOURS)
else()
  if(SHMCOLL_MPI_PKG_CONFIG)
    shmcoll_mpis_from_pkg_config(SHMCOLL_MPI_FLAVOURS)
  endif()
  if(NOT SHMCOLL_MPI_FLAVOURS)
    shmcoll_mpi_from_find_mpi(SHMCOLL_MPI_FLAVOURS)
  endif()
endif()
