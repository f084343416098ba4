# Locations shared by every onestack command; sourced, never run.
# Everything big lives outside the repository so that repeated runs (and CI on
# the same machine) reuse it: Spack clones, the virtualenv, the install tree.
# Under sudo (`sudo make cluster`: the virtual cluster needs root), the cache
# is the invoking user's where they have one, as for their other targets: sudo
# gives root's HOME, whose cache has none of the mirror, Spack clone and venv
# `make stack` filled.
if [ -z "${ONESTACK_CACHE:-}" ] && [ -n "${SUDO_USER:-}" ] && [ "$(id -u)" = 0 ]; then
  sudo_cache=$(getent passwd "$SUDO_USER" | cut -d: -f6)/.cache/onestack
  if [ -d "$sudo_cache" ]; then ONESTACK_CACHE=$sudo_cache; fi
  unset sudo_cache
fi
: "${ONESTACK_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/onestack}"   # clones, venv, mirror, source cache
# ONESTACK_PREFIX (install tree, module releases, images) is the selected
# site's `prefix` (sites/<site>/site.yaml) unless set here, e.g. by tests.
ONESTACK_VENV=$ONESTACK_CACHE/venv
: "${ONESTACK_MIRROR:=$ONESTACK_CACHE/source-mirror}"       # verified source tarballs, by content address
: "${ONESTACK_SOURCE_CACHE:=$ONESTACK_CACHE/source-cache}" # what Spack downloaded itself
# Where Spack builds. `spack ci rebuild` empties it first (spack.stage.purge):
# the pipeline test gives its jobs their own, so that it cannot wipe a build
# running beside it.
: "${ONESTACK_BUILD_STAGE:=$ONESTACK_CACHE/build-stage}"
# Spack itself: SPACK_ROOT if given, else the cached clone.
: "${SPACK_ROOT:=$ONESTACK_CACHE/spack}"
: "${ONESTACK_SPACK_PACKAGES:=$ONESTACK_CACHE/spack-packages}"
ONESTACK_NPM_PREFIX=$ONESTACK_CACHE/npm                  # gitlab-ci-local, for the pipeline tests
# Keep Spack's per-user state (~/.spack) out of the user's home and ours alike.
export SPACK_USER_CONFIG_PATH=$ONESTACK_CACHE/spack-user-config
export SPACK_USER_CACHE_PATH=$ONESTACK_CACHE/spack-user-cache
export SPACK_PYTHON=$ONESTACK_VENV/bin/python
export ONESTACK_NPM_PREFIX ONESTACK_CACHE ONESTACK_VENV ONESTACK_MIRROR ONESTACK_SOURCE_CACHE ONESTACK_BUILD_STAGE SPACK_ROOT ONESTACK_SPACK_PACKAGES
