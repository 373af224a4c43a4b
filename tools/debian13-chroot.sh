# A Debian 13 (trixie) chroot for what this Debian 12 machine cannot build or run itself: sourced
# by tools/check-debian13 and tools/build-ompi-main (as root: debootstrap, mount, chroot).

# Makes the chroot at $1 (debootstrap minbase, the Debian mirror) unless it holds one already;
# exits when it holds another release.
debian13_chroot_make() {
  local root=$1
  if [ ! -e "$root/etc/debian_version" ]; then
    command -v debootstrap >/dev/null ||
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
    debootstrap --variant=minbase trixie "$root" http://deb.debian.org/debian
  fi
  case "$(cat "$root/etc/debian_version")" in
    13*) ;;
    *) echo "$root holds Debian $(cat "$root/etc/debian_version"), not 13" >&2; exit 2 ;;
  esac
}

# Mounts /proc, /sys and /dev from this machine into the chroot at $1, and a /dev/shm of its own
# (tests that compare /dev/shm before and after must not see this machine's other programs' MPI
# segments come and go); all unmounted when the calling script exits, whatever happens.
debian13_chroot_mount() {
  DEBIAN13_ROOT=$1
  debian13_chroot_unmount() {
    for dir in dev sys proc; do umount -R "$DEBIAN13_ROOT/$dir" 2>/dev/null || true; done
  }
  trap debian13_chroot_unmount EXIT
  mountpoint -q "$1/proc" || mount -t proc proc "$1/proc"
  mountpoint -q "$1/sys" || { mount --rbind /sys "$1/sys" && mount --make-rslave "$1/sys"; }
  mountpoint -q "$1/dev" || { mount --rbind /dev "$1/dev" && mount --make-rslave "$1/dev"; }
  mount -t tmpfs -o size=50% shmcoll-debian13-shm "$1/dev/shm"
  cp /etc/resolv.conf "$1/etc/resolv.conf"
}

# Copies the working tree of the repository at $1 as git sees it (tracked and untracked, not
# ignored) over the directory $2, keeping what else is there (an earlier run's build directories).
debian13_copy_tree() {
  mkdir -p "$2"
  git -C "$1" ls-files -z --cached --others --exclude-standard |
    (cd "$1" && tar --null --ignore-failed-read -T - -cf -) | tar -xf - -C "$2"
}

# Runs a command in the chroot at $1 with a clean environment (root's HOME, a plain PATH).
debian13_chroot_run() {
  local root=$1
  shift
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}
