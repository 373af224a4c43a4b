# Sourced by the MPI layer's test scripts once $mpirun is set: how to start it here (Open MPI wants
# --oversubscribe for more ranks than cores; MPICH's hydra oversubscribes anyway; on the pretend
# cluster, SHMCOLL_TEST_ACROSS_NODES=1, TCP between nodes), and a scratch directory $work removed
# on exit.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
extra=()
case "$("$mpirun" --version 2>&1)" in
  *OpenRTE* | *"Open MPI"*)
    btl=self,vader
    [ "${SHMCOLL_TEST_ACROSS_NODES:-0}" = 1 ] && btl=self,vader,tcp
    extra=(--oversubscribe --mca btl "$btl") ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
