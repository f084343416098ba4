#!/usr/bin/env bash
# gitlab-ci-local (npm), with which the tests run .gitlab-ci.yml's jobs on this
# host (`make test` only): 4.70.0, as 4.74 and later crashed on the build
# hosts' Node.js 20.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/env.sh"
version=4.70.0
command -v npm >/dev/null || { echo "error: npm is not on PATH: install Debian's npm package, or Node.js from its vendor, which bundles npm" >&2; exit 1; }
tool=$ONESTACK_NPM_PREFIX/node_modules/.bin/gitlab-ci-local
if [ "$("$tool" --version 2>/dev/null)" = "$version" ]; then
  echo "==> npm: gitlab-ci-local $version present"
  exit 0
fi
echo "==> npm: installing gitlab-ci-local@$version into $ONESTACK_NPM_PREFIX"
npm install --quiet --no-fund --no-audit --prefix "$ONESTACK_NPM_PREFIX" "gitlab-ci-local@$version"
