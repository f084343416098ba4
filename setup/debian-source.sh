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

# The URIs (and keyring) of this machine's Debian entry: the deb822 stanza
# whose Suites name the release's own codename, else the one-line entry, with
# the component main (not a third party's of the same suite, e.g. Docker's).
debian_entry() {
  local codename
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "/etc/os-release names no VERSION_CODENAME: not a Debian release?"
  { deb822_entry "$codename"; one_line_entry "$codename"; } | head -n 1
}

# deb [option=value ...] URI SUITE COMPONENT...
one_line_entry() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v want="$1" '
      /^deb[ \t]/ {
        line = $0; keys = ""
        if (match(line, /\[[^]]*\]/)) {
          n = split(substr(line, RSTART + 1, RLENGTH - 2), opt, /[ \t]+/)
          for (i = 1; i <= n; i++) if (opt[i] ~ /^signed-by=/) { keys = opt[i]; sub(/^signed-by=/, "", keys) }
          line = substr(line, 1, RSTART - 1) substr(line, RSTART + RLENGTH)
        }
        n = split(line, word, /[ \t]+/); main = 0
        for (i = 4; i <= n; i++) if (word[i] == "main") main = 1
        if (word[3] == want && main) { print word[2] "\t" keys; exit }
      }' "$f"
  done
}

deb822_entry() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v RS= -v want="$1" '
      { uris = ""; keys = ""; hit = 0; main = 0
        n = split($0, line, "\n")
        for (i = 1; i <= n; i++) {
          if (line[i] ~ /^URIs:/)      { uris = line[i]; sub(/^URIs:[ \t]*/, "", uris) }
          if (line[i] ~ /^Signed-By:/) { keys = line[i]; sub(/^Signed-By:[ \t]*/, "", keys) }
          if (line[i] ~ /^Suites:/)    { m = split(line[i], s, /[ \t]+/); for (j = 2; j <= m; j++) if (s[j] == want) hit = 1 }
          if (line[i] ~ /^Components:/) { m = split(line[i], c, /[ \t]+/); for (j = 2; j <= m; j++) if (c[j] == "main") main = 1 }
        }
        if (hit && main && uris != "") { print uris "\t" keys; exit }
      }' "$f"
  done
}

entry=$(debian_entry)
[ -n "$entry" ] || die "no Debian entry for this release in /etc/apt/sources.list.d/*.sources or
       /etc/apt/sources.list(.d/*.list) to derive a deb-src entry for suite $suite from."
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
