#!/usr/bin/env bash
# Installs the pinned Apptainer (setup/apptainer-pins.sh) under
# $ONESTACK_CACHE/apptainer/<version>, built from Debian's source package:
# bookworm packages no Apptainer, sid does. Idempotent: a complete install is
# reused; a new one is staged beside it and appears in one rename.
#
# Sources: setup/debian-source.sh (deb-src of sid only, in a private apt
# configuration: it can never install a sid binary). Go modules come through the Go module
# proxy the environment names (Go's default otherwise), checked by go.sum;
# the build itself then runs with GOPROXY=off from that verified cache.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/apptainer-pins.sh"

root=$ONESTACK_CACHE/apptainer
prefix=$root/$APPTAINER_VERSION
orig=apptainer_${APPTAINER_VERSION}.orig.tar.gz

say() { echo "==> apptainer: $*"; }
die() { echo "error: apptainer: $*" >&2; exit 1; }

installed_version() { "$prefix/bin/apptainer" --version 2>/dev/null || true; }

# Builds run with --fakeroot (onestack/images/apptainer.py says why), which
# maps root to a subordinate id range too: Apptainer's own command adds one
# for root to /etc/subuid and /etc/subgid when there is none. (useradd gives
# every new user one; `apptainer config fakeroot --add USER` does for others.)
fakeroot_for_root() {
  [ "$(id -u)" = 0 ] || return 0
  if grep -q '^\(root\|0\):' /etc/subuid 2>/dev/null && grep -q '^\(root\|0\):' /etc/subgid 2>/dev/null; then
    return 0
  fi
  say "adding a subordinate id range for root (apptainer config fakeroot --add root)"
  "$prefix/bin/apptainer" config fakeroot --add root
}

# With "root default capabilities = file" (configure_root_capabilities),
# root keeps the capabilities etc/apptainer/capability.json grants it: here
# all that root's bounding set holds (on some hosts everything but
# CAP_SYS_RESOURCE), i.e. Apptainer's default "full" less what the kernel
# withholds.
# Without them a --fakeroot build fails: it unpacks a base image as root in
# its user namespace and chowns (CAP_CHOWN). Checked on every run, since the
# bounding set belongs to the machine, not to the build.
grant_root_capabilities() {
  [ "$(id -u)" = 0 ] || return 0
  local caps json file=$1/etc/apptainer/capability.json
  caps=$(capsh --decode="$(awk '/^CapBnd:/ { print $2 }' /proc/self/status)" | cut -d= -f2 | tr '[:lower:]' '[:upper:]')
  json=$(printf '"%s", ' ${caps//,/ })
  json="{\"users\": {\"root\": [${json%, }]}}"
  if [ "$(cat "$file" 2>/dev/null)" != "$json" ]; then
    say "granting root its capabilities here in $file"
    echo "$json" > "$file.partial" && mv "$file.partial" "$file"
  fi
}

# One build at a time: a second set-up (a job beside `make test`'s own
# build of it) waits for the first, then finds its install, where it would
# build all of it again beside it.
mkdir -p "$root"
exec 9>"$root/.lock"
if ! flock -n 9; then
  say "waiting for the build another set-up runs ($root/.lock)"
  flock 9
fi

if [ "$(installed_version)" = "apptainer version $APPTAINER_VERSION" ]; then
  say "$prefix present ($APPTAINER_VERSION)"
  grant_root_capabilities "$prefix"
  fakeroot_for_root
  exit 0
fi

# What the build and the runtime need from Debian (setup/apt-packages.txt).
require_tools() {
  local missing=() pair
  for pair in gcc:gcc make:make pkg-config:pkg-config apt-get:apt dpkg-source:dpkg-dev \
              mksquashfs:squashfs-tools unsquashfs:squashfs-tools newuidmap:uidmap \
              squashfuse:squashfuse fuse2fs:fuse2fs fuse-overlayfs:fuse-overlayfs \
              cryptsetup:cryptsetup-bin debootstrap:debootstrap capsh:libcap2-bin; do
    # sbin too: a user's PATH may lack it, Apptainer's own search does not.
    PATH=$PATH:/usr/sbin:/sbin command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
  done
  pkg-config --exists libseccomp || missing+=(libseccomp-dev)
  [ -e /usr/include/shadow/subid.h ] || missing+=(libsubid-dev)
  [ ${#missing[@]} -eq 0 ] || die "missing Debian packages: ${missing[*]}
       They are listed in setup/apt-packages.txt: run 'make setup' (setup/apt.sh)."
}

fetch_orig() {
  local dest=$1 download
  download=$(mktemp -d "${TMPDIR:-/tmp}/onestack-apptainer-src.XXXXXX")
  "$here/debian-source.sh" "$APPTAINER_DEBIAN_SUITE" apptainer "$APPTAINER_VERSION" "$download" \
    || die "Debian's $APPTAINER_DEBIAN_SUITE gave no source package apptainer $APPTAINER_VERSION (why: above).
       Where $APPTAINER_DEBIAN_SUITE has moved on to a newer Apptainer, update setup/apptainer-pins.sh to it;
       or put the pinned $orig (its sha256 in setup/apptainer-pins.sh) at $src."
  mv "$download/$orig" "$dest"
  rm -rf "$download"
}

# The orig tarball ($src), fetched once and checked against the pins every run.
src=$root/src/$orig
verify_orig() {
  local size sum
  mkdir -p "$root/src"
  if [ ! -f "$src" ]; then
    fetch_orig "$src.partial"
    mv "$src.partial" "$src"
  fi
  size=$(stat -c %s "$src"); sum=$(sha256sum "$src" | cut -d' ' -f1)
  if [ "$size" != "$APPTAINER_ORIG_SIZE" ] || [ "$sum" != "$APPTAINER_ORIG_SHA256" ]; then
    rm -f "$src"
    die "$orig does not match setup/apptainer-pins.sh; refused (deleted):
       expected $APPTAINER_ORIG_SIZE bytes, sha256 $APPTAINER_ORIG_SHA256
       got      $size bytes, sha256 $sum"
  fi
}

# Every Go on PATH, then GOROOT's.
go_candidates() {
  type -ap go || true
  if [ -n "${GOROOT:-}" ] && [ -x "$GOROOT/bin/go" ]; then echo "$GOROOT/bin/go"; fi
}
go_version() { GOTOOLCHAIN=local "$1" env GOVERSION 2>/dev/null | sed 's/^go//'; }
at_least() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

# The first Go at least the version the source's go.mod needs, into $go;
# where there is none, the pinned toolchain (below), fetched with whichever Go
# the machine has, or with bookworm's golang-go (1.19: too old to build
# Apptainer, new enough to fetch a module).
find_go() {
  local needed=$1 candidate have old=
  while read -r candidate; do
    have=$(go_version "$candidate") || continue
    if at_least "$needed" "$have"; then
      go=$candidate
      say "using $go (Go $have; go.mod needs >= $needed)"
      return
    fi
    old=${old:-$candidate}
  done < <(go_candidates)
  if [ -z "$old" ]; then
    say "no Go on PATH: installing Debian's golang-go to fetch the pinned toolchain"
    "$here/apt.sh" golang-go
    old=/usr/bin/go
  fi
  pinned_toolchain "$needed" "$old"
}

# The Go toolchain of setup/apptainer-pins.sh as Go's own toolchain switch
# gets it (GOTOOLCHAIN, which Go 1.19 lacks): the module golang.org/toolchain
# through the Go module proxy, checked by Go's checksum database and against
# the pinned sum, into the verified module cache. Module zips keep no execute
# bits: they are set as Go's switch sets them.
pinned_toolchain() {
  local needed=$1 old=$2 module=golang.org/toolchain@$GO_TOOLCHAIN_MODULE_VERSION info dir sum
  local version=${GO_TOOLCHAIN_MODULE_VERSION#v0.0.1-go}
  version=${version%%.linux-*}
  at_least "$needed" "$version" ||
    die "the pinned Go toolchain ($version, setup/apptainer-pins.sh) is older than Apptainer's go.mod needs ($needed):
       set GO_TOOLCHAIN_MODULE_VERSION and GO_TOOLCHAIN_MODULE_SUM there to a newer golang.org/toolchain"
  say "fetching Go $version with $old (Go $(go_version "$old")): $module"
  info=$(GOTOOLCHAIN=local GOFLAGS= GOMODCACHE=$ONESTACK_CACHE/go/mod "$old" mod download -json "$module") ||
    die "could not fetch $module through the Go module proxy (output above)"
  dir=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' <<<"$info")
  sum=$(sed -n 's/^\t"Sum": "\(.*\)",$/\1/p' <<<"$info")
  [ "$sum" = "$GO_TOOLCHAIN_MODULE_SUM" ] ||
    die "$module has sum $sum, setup/apptainer-pins.sh pins $GO_TOOLCHAIN_MODULE_SUM; refused"
  chmod a+x "$dir"/bin/* "$dir"/pkg/tool/*/*
  go=$dir/bin/go
  export GOROOT=$dir
  say "using $go (Go $(go_version "$go"); go.mod needs >= $needed)"
}

# root may lack CAP_SYS_RESOURCE, even in its bounding set; the default
# "root default capabilities = full" then fails every root run with
# "Requesting capability set ... while permitted capability set is ...".
# "file" gives root the capabilities capability.json grants it
# (grant_root_capabilities: those it has).
configure_root_capabilities() {
  local conf=$1
  grep -q '^root default capabilities = ' "$conf" || die "$conf has no 'root default capabilities' line to set"
  sed -i 's/^root default capabilities = .*/# onestack (setup\/apptainer.sh): "file", not "full": root here may lack\
# CAP_SYS_RESOURCE, and "full" then fails every root run ("Requesting\
# capability set ... while permitted capability set is ...").\
root default capabilities = file/' "$conf"
}

require_tools
start=$SECONDS
verify_orig
work=$(mktemp -d "$root/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
say "unpacking $orig"
tar -xzf "$src" -C "$work"
tree=$work/apptainer-$APPTAINER_VERSION
# The orig tarball is a git archive without the VERSION file mconfig reads
# (Debian's rules write it the same way).
echo "$APPTAINER_VERSION" > "$tree/VERSION"
find_go "$(awk '$1 == "go" { print $2; exit }' "$tree/go.mod")"

# The verified modules (~530 MB) stay outside the repository and the home for
# a rebuild after an interrupted one; the compile cache (~270 MB) goes with
# the build folder. No download of a newer toolchain (GOTOOLCHAIN=local); a
# user's GOFLAGS (e.g. -mod=mod, which would rewrite go.sum) does not apply.
export GOTOOLCHAIN=local GOFLAGS= GOMODCACHE=$ONESTACK_CACHE/go/mod GOCACHE=$work/go-build-cache
export PATH=$(dirname "$go"):$PATH
say "downloading Go modules (checked against go.sum)"
(cd "$tree" && go mod download && go mod verify | sed 's/^/    /')

say "configuring (mconfig --without-suid --without-network --prefix=$prefix)"
# --without-network: CNI networking (--net) is root-only and unused by the
# stack's images; it would add ~20 plugins to the build.
(cd "$tree" && ./mconfig -b builddir --without-suid --without-network --prefix="$prefix" > "$work/mconfig.log") ||
  { tail -n 20 "$work/mconfig.log" >&2; die "mconfig failed (log above)"; }
grep -E 'checking: (libseccomp|libsubid)' "$work/mconfig.log" | sed 's/^ */    /'
say "building (make: 3-4 minutes on 2 idle cores, 10+ beside other builds)"
# GOPROXY=off: the Makefile sets its own proxy; everything it needs is in the
# module cache verified above.
make -C "$tree/builddir" GOPROXY=off > "$work/make.log" 2>&1 ||
  { tail -n 30 "$work/make.log" >&2; die "make failed (log above)"; }
stage=$work/stage
make -C "$tree/builddir" install DESTDIR="$stage" > "$work/install.log" 2>&1 ||
  { tail -n 30 "$work/install.log" >&2; die "make install failed (log above)"; }
configure_root_capabilities "$stage$prefix/etc/apptainer/apptainer.conf"
grant_root_capabilities "$stage$prefix"
echo "apptainer $APPTAINER_VERSION built in $((SECONDS - start)) s on $(date -u +%FT%TZ) with Go $("$go" env GOVERSION)" \
  > "$stage$prefix/onestack-build.txt"
rm -rf "$prefix"   # an incomplete or other-version leftover
mv "$stage$prefix" "$prefix"
say "installed $("$prefix/bin/apptainer" --version) in $prefix ($((SECONDS - start)) s)"
fakeroot_for_root
