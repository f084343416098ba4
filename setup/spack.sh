#!/usr/bin/env bash
# Provides the pinned Spack and builtin package repo (setup/venv.sh makes the
# virtualenv that runs it).
# SPACK_ROOT (ONESTACK_SPACK_PACKAGES) if set; else onestack's own clone in
# $ONESTACK_CACHE, made from ONESTACK_SPACK_URL (ONESTACK_SPACK_PACKAGES_URL).
# Either must be at the pinned commit: never moved, each says how to get it.
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
    echo "error: $name: could not check out $commit in $dir (git's reason above)" >&2
    return 1; }
}

# clone_pinned VAR OWN URL COMMIT NAME: the folder VAR names, cloned at COMMIT
# where missing; at another commit, refused with the fix for OWN (onestack's
# clone) or for a clone the user named.
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
  if [ "$head" = "$commit" ]; then
    echo "==> $name: $dir at pinned commit ${commit:0:12}"
    return
  fi
  echo "error: $name at $dir ($var) is at $head, but onestack is pinned to $commit" >&2
  echo "       (setup/spack-pins.sh)." >&2
  if [ "$dir" = "$own" ]; then
    # Every checkout on this ONESTACK_CACHE runs Spack from it: moved under
    # their running jobs, it would solve and build with other recipes.
    echo "       It is onestack's own clone, shared by every checkout on this ONESTACK_CACHE:" >&2
    echo "       once none of them runs, remove it (rm -rf $dir), and set-up clones the pinned commit." >&2
  else
    echo "       Check out the pinned commit there, or unset $var so that onestack uses its own" >&2
    echo "       clone ($own)." >&2
  fi
  exit 1
}

# onestack's own clones: setup/env.sh's defaults of SPACK_ROOT and ONESTACK_SPACK_PACKAGES.
clone_pinned SPACK_ROOT "$ONESTACK_CACHE/spack" "$ONESTACK_SPACK_URL" "$SPACK_COMMIT" spack
clone_pinned ONESTACK_SPACK_PACKAGES "$ONESTACK_CACHE/spack-packages" "$ONESTACK_SPACK_PACKAGES_URL" "$SPACK_PACKAGES_COMMIT" spack_packages
