#!/usr/bin/env bash
# Installs the Debian packages of setup/apt-packages.txt (or those named), idempotently.
# It only edits the apt entries this machine already has (deb822 or one-line):
# deb-src is added to their Types (for `make mirror`) and non-free to their
# Components (MKL);
# the project never writes a package host of its own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# The packages: the arguments (setup/venv.sh's python3-venv, before the fast
# tier), else every one of setup/apt-packages.txt.
if [ $# -gt 0 ]; then
  wanted=("$@")
else
  mapfile -t wanted < <(sed -e 's/#.*//' -e '/^\s*$/d' "$here/apt-packages.txt")
  # Where the machine has no Go, bookworm's: too old to build Apptainer, it
  # fetches the pinned toolchain (setup/apptainer.sh); here, in the stage
  # that may ask for sudo's password, not in a build beside the tests.
  command -v go >/dev/null || wanted+=(golang-go)
fi

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian's own entries: a URI with "debian" and the component main (not a
# third party's, such as Docker's .../linux/debian bookworm stable).
enable_sources_and_nonfree() {
  local f changed=1
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep -q '^URIs:.*debian' "$f" && grep -Eq '^Components:(.* )?main( |$)' "$f" || continue
    if grep -q '^Types: deb$' "$f" || grep -E '^Components:' "$f" | grep -Evq ' non-free( |$)'; then
      as_root sed -i -E -e 's/^Types: deb$/Types: deb deb-src/' \
        -e '/ non-free( |$)/!s/^Components: .*$/Components: main contrib non-free non-free-firmware/' "$f"
      changed=0
    fi
  done
  # One-line entries, as bookworm's installer writes them: the same two edits.
  local deb='^deb (\[[^]]*\] )?[^ ]*debian[^ ]* [^ ]+'
  local line="$deb (.* )?main( .*)?$"
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    if grep -E "$line" "$f" | grep -Evq ' non-free( |$)'; then
      as_root sed -i -E "/$line/{/ non-free( |\$)/!s/($deb) .*\$/\\1 main contrib non-free non-free-firmware/}" "$f"
      changed=0
    fi
    if grep -Eq "$line" "$f" && ! grep -q '^deb-src ' "$f"; then
      as_root sed -i -E "/$line/{p;s/^deb /deb-src /}" "$f"
      changed=0
    fi
  done
  return $changed
}

missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# MKL must not become the system's default libblas.so.3/liblapack.so.3: the
# OpenBLAS flavors' ScaLAPACK (Debian's) links through those alternatives.
# (Only before its install: a run with nothing to do asks nothing of sudo.)
if [[ " ${missing[*]} " == *" libmkl-"* ]]; then
  echo "libmkl-rt libmkl-rt/use-as-default-blas-lapack boolean false" | as_root debconf-set-selections
fi
# Another apt run (a new VM's daily upgrade) holds the lock: wait for it.
lock=(-o DPkg::Lock::Timeout=600)
if enable_sources_and_nonfree || [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt: updating package lists"
  as_root apt-get "${lock[@]}" update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "==> apt: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "==> apt: all ${#wanted[@]} packages present"
fi

# libscalapack-mpich-dev pulls in Open MPI, whose update-alternatives would
# take over mpicc/mpif90/mpirun; the MPICH flavors expect MPICH's.
set_alternative() {  # only where it differs: sudo is asked nothing otherwise
  [ "$(update-alternatives --query "$1" 2>/dev/null | sed -n 's/^Value: //p')" = "$2" ] ||
    as_root update-alternatives --quiet --set "$1" "$2"
}
if [ -e /usr/bin/mpicc.mpich ]; then
  set_alternative mpi /usr/bin/mpicc.mpich
  set_alternative mpirun /usr/bin/mpirun.mpich
fi

# docker-registry's package enables and starts a system registry on :5000; the
# tests start their own on loopback, so the system one is switched off.
if [ -d /run/systemd/system ] && [ -e /lib/systemd/system/docker-registry.service ]; then
  if systemctl is-enabled --quiet docker-registry.service || systemctl is-active --quiet docker-registry.service; then
    as_root systemctl disable --now docker-registry.service >/dev/null 2>&1 || true
  fi
elif [ -x /etc/init.d/docker-registry ] && ls /etc/rc[2-5].d/S*docker-registry >/dev/null 2>&1; then
  as_root update-rc.d docker-registry disable >/dev/null 2>&1 || true
  as_root invoke-rc.d docker-registry stop >/dev/null 2>&1 || true
fi
