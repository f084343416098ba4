#!/usr/bin/env bash
# Provides the pinned Spack and builtin package repo (setup/venv.sh makes the
# virtualenv that runs it).
# SPACK_ROOT (ONESTACK_SPACK_PACKAGES) if set, which must be at the pinned
# commit; else onestack's own clone in $ONESTACK_CACHE, made from
# ONESTACK_SPACK_URL (ONESTACK_SPACK_PACKAGES_URL) and moved to the pinned
# commit whenever setup/spack-pins.sh changes it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/spack-pins.sh"

# fetch_pinned DIR URL COMMIT NAME: check out COMMIT in the git checkout DIR.
fetch_pinned() {
  local dir=$1 url=$2 commit=$3 name=$4
  # Fetch exactly the pinned commit (shallow): fast, and works on hosts that
  # serve commits by id, such as GitHub and local clones.
  git -C "$dir" fetch --quiet --depth 1 "$url" "$commit" || {
    echo "error: $name: could not fetch commit $commit from $url." >&2
    echo "       Point ONESTACK_${name^^}_URL at a clone that has it (setup/spack-pins.sh)." >&2
    return 1; }
  git -C "$dir" -c advice.detachedHead=false checkout --quiet --detach FETCH_HEAD || {
    echo "error: $name: could not check out $commit in $dir (git's reason above):" >&2
    echo "       move its changes away, or remove $dir for set-up to clone it again." >&2
    return 1; }
}

# clone_pinned VAR OWN URL COMMIT NAME: make the folder VAR names a checkout
# of COMMIT. OWN, onestack's clone, follows the pin; a clone the user named
# in VAR is theirs to move, and is refused at another commit.
clone_pinned() {
  local var=$1 own=$2 url=$3 commit=$4 name=$5 dir=${!1} head
  if [ ! -e "$dir" ]; then
    echo "==> $name: cloning $url into $dir"
    local tmp=$dir.partial.$$
    rm -rf "$tmp"
    git init --quiet "$tmp"
    fetch_pinned "$tmp" "$url" "$commit" "$name" || { rm -rf "$tmp"; exit 1; }
    mv "$tmp" "$dir"   # appears only once complete
  fi
  head=$(git -C "$dir" rev-parse HEAD 2>/dev/null || echo "not a git checkout")
  if [ "$head" != "$commit" ] && [ "$dir" = "$own" ]; then
    echo "==> $name: moving $dir to the pinned commit ${commit:0:12} (setup/spack-pins.sh)"
    fetch_pinned "$dir" "$url" "$commit" "$name" || exit 1
  elif [ "$head" != "$commit" ]; then
    echo "error: $name at $dir ($var) is at $head, but onestack is pinned to $commit" >&2
    echo "       (setup/spack-pins.sh). Check out the pinned commit there, or unset $var" >&2
    echo "       so that onestack uses its own clone ($own)." >&2
    exit 1
  fi
  echo "==> $name: $dir at pinned commit ${commit:0:12}"
}

# onestack's own clones: setup/env.sh's defaults of SPACK_ROOT and ONESTACK_SPACK_PACKAGES.
clone_pinned SPACK_ROOT "$ONESTACK_CACHE/spack" "$ONESTACK_SPACK_URL" "$SPACK_COMMIT" spack
clone_pinned ONESTACK_SPACK_PACKAGES "$ONESTACK_CACHE/spack-packages" "$ONESTACK_SPACK_PACKAGES_URL" "$SPACK_PACKAGES_COMMIT" spack_packages
