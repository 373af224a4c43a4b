# Sourced by run-tests and run-demo: installs the packages shmcoll needs when missing, by their
# names in Debian 12 (bookworm), Debian 13 (trixie) or Ubuntu 24.04 (noble). Needs root (or sudo)
# only when something is missing.

# The one name that differs between these releases: clang's runtime (libFuzzer) carries clang's
# major version.
case "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" in
  trixie) SHMCOLL_CLANG_MAJOR=19 ;;
  noble) SHMCOLL_CLANG_MAJOR=18 ;;
  *) SHMCOLL_CLANG_MAJOR=14 ;;
esac

SHMCOLL_BUILD_PACKAGES=(cmake g++ make pkg-config hwloc libhwloc-dev libnuma-dev libgtest-dev
  libbenchmark-dev libcli11-dev nlohmann-json3-dev gnuplot-nox)
# The two MPIs the PMPI layer is built and tested against, and shmcoll-bench --vs runs beside;
# gfortran and mpi4py (on Open MPI) for the Fortran and Python programs the layer is tested with.
SHMCOLL_MPI_PACKAGES=(openmpi-bin libopenmpi-dev mpich libmpich-dev gfortran python3-mpi4py
  python3-numpy)
# The pretend cluster's (tools/pretend-cluster): ip for namespaces, bridges and veth pairs,
# python3 for each node's remote shell.
SHMCOLL_CLUSTER_PACKAGES=(iproute2 python3)
# clang with its libFuzzer runtime, for the fuzz preset.
SHMCOLL_FUZZ_PACKAGES=(clang "libclang-rt-${SHMCOLL_CLANG_MAJOR}-dev")

ensure_packages() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
