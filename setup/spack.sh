#!/usr/bin/env bash
# Provides the pinned Spack and builtin package repo (setup/venv.sh makes the
# virtualenv that runs it).
# Order: SPACK_ROOT if set, else a cached clone, else a clone from
# ONESTACK_SPACK_URL. Whatever is found must be at the pinned commit.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
. "$here/spack-pins.sh"

# clone_pinned DIR URL COMMIT NAME: make DIR a checkout of COMMIT, or refuse.
clone_pinned() {
  local dir=$1 url=$2 commit=$3 name=$4 head
  if [ ! -e "$dir" ]; then
    echo "==> $name: cloning $url into $dir"
    local tmp=$dir.partial.$$
    rm -rf "$tmp"
    git init --quiet "$tmp"
    # Fetch exactly the pinned commit (shallow): fast, and works on hosts that
    # serve commits by id, such as GitHub and local clones.
    git -C "$tmp" fetch --quiet --depth 1 "$url" "$commit" || {
      echo "error: $name: could not fetch commit $commit from $url." >&2
      echo "       Point ONESTACK_${name^^}_URL at a clone that has it (setup/spack-pins.sh)." >&2
      rm -rf "$tmp"; exit 1; }
    git -C "$tmp" -c advice.detachedHead=false checkout --quiet --detach FETCH_HEAD
    mv "$tmp" "$dir"   # appears only once complete
  fi
  head=$(git -C "$dir" rev-parse HEAD 2>/dev/null || echo "not a git checkout")
  if [ "$head" != "$commit" ]; then
    echo "error: $name at $dir is at $head, but onestack is pinned to $commit" >&2
    echo "       (setup/spack-pins.sh). Check out the pinned commit there, or unset" >&2
    echo "       the variable that points to it so onestack uses its own clone." >&2
    exit 1
  fi
  echo "==> $name: $dir at pinned commit ${commit:0:12}"
}

clone_pinned "$SPACK_ROOT" "$ONESTACK_SPACK_URL" "$SPACK_COMMIT" spack
clone_pinned "$ONESTACK_SPACK_PACKAGES" "$ONESTACK_SPACK_PACKAGES_URL" "$SPACK_PACKAGES_COMMIT" spack_packages
