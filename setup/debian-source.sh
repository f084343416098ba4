#!/usr/bin/env bash
# Usage: setup/debian-source.sh SUITE PACKAGE VERSION DIR
# Downloads (never builds, never installs) Debian's source package PACKAGE of
# upstream VERSION (its newest Debian revision VERSION-*) from SUITE into DIR:
# a newer release than this machine's own (bookworm packages no Apptainer,
# holds GROMACS 2022 only).
#
# The SUITE deb-src entry is derived from the URIs (and keyring) of this
# machine's own Debian entry and lives in a private apt configuration of this
# call (never under /etc/apt): it is deb-src only and no other apt call sees
# it, so it can never install a binary of that suite. Used by
# setup/apptainer.sh and by the source mirror (onestack/spack/mirror.py).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 SUITE PACKAGE VERSION DIR" >&2; exit 2; }
suite=$1 package=$2 version=$3 dest=$4

die() { echo "error: debian-source: $*" >&2; exit 1; }

# The URIs (and keyring) of this machine's Debian entry for its own release
# (either apt format), read by the same code as the image base's mirror.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
entry=$(PYTHONPATH="$repo" python3 -m onestack.apt_sources) \
  || die "no deb-src entry for suite $suite can be derived from this machine's apt configuration (why: above)"
uris=${entry%%$'\t'*}; keys=${entry#*$'\t'}
apt_dir=$(mktemp -d "${TMPDIR:-/tmp}/onestack-apt.XXXXXX")
trap 'rm -rf "$apt_dir"' EXIT
chmod 755 "$apt_dir"   # apt's download sandbox user must reach it
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/download"
[ "$(id -u)" != 0 ] || chown _apt "$apt_dir/download" 2>/dev/null || true
{
  echo "Types: deb-src"
  echo "URIs: $uris"
  echo "Suites: $suite"
  echo "Components: main"
  [ -z "$keys" ] || echo "Signed-By: $keys"
} > "$apt_dir/src.sources"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/src.sources" -o Dir::Etc::SourceParts=-
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir"
          -o "Dir::Cache::Archives=$apt_dir/archives")
echo "==> debian-source: reading the $suite source index (deb-src only, private apt configuration)"
apt-get -q "${apt_opts[@]}" update >/dev/null
revision=$(apt-cache "${apt_opts[@]}" showsrc "$package" | awk -v v="$version" \
           '/^Version:/ && index($2, v "-") == 1 { print $2; exit }')
[ -n "$revision" ] || die "Debian's $suite has no source package $package $version-* (apt-cache showsrc $package)"
echo "==> debian-source: downloading source package $package $revision"
# apt-get fails as a whole when one file of the source package is gone from
# the archive; what it did download is still handed over, and its status kept.
status=0
(cd "$apt_dir/download" && apt-get -q "${apt_opts[@]}" source --download-only "$package=$revision" >/dev/null) || status=$?
mkdir -p "$dest"
find "$apt_dir/download" -maxdepth 1 -type f -exec mv -t "$dest" {} +
exit "$status"
