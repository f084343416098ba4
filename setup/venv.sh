#!/usr/bin/env bash
# The project virtualenv ($ONESTACK_VENV): the Python that runs onestack,
# Spack and the tests, with setup/requirements.txt from PyPI (clingo among
# them, so Spack never bootstraps from the network). With gcc and git, all
# the fast tier needs.
# Progress goes to stderr: targets that print a path (`make -s cluster-env`)
# depend on this one, and their output is what a user sources.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
# A venv whose creation was interrupted has a python but no pip: made again.
if [ ! -x "$ONESTACK_VENV/bin/python" ] || [ ! -x "$ONESTACK_VENV/bin/pip" ]; then
  # `python3 -m venv` needs Debian's python3-venv, which a minimal Debian 12
  # lacks; this stage runs before the apt one, so that package comes here.
  if ! python3 -c "import ensurepip" 2>/dev/null; then
    bash "$here/apt.sh" python3-venv >&2
  fi
  echo "==> venv: creating $ONESTACK_VENV" >&2
  python3 -m venv --clear "$ONESTACK_VENV"
fi
stamp=$ONESTACK_VENV/.requirements
if ! cmp -s "$here/requirements.txt" "$stamp"; then
  echo "==> venv: installing setup/requirements.txt" >&2
  "$ONESTACK_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  cp "$here/requirements.txt" "$stamp"
else
  echo "==> venv: requirements up to date" >&2
fi
