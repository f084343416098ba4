#!/usr/bin/env bash
# `make test`: the stages of the test command, each timed, the times printed
# at the end. The fast tier runs first, on Python alone: a data mistake stops
# the run in seconds, before anything is set up or built.
set -uo pipefail
cd "$(dirname "$0")/.."
. setup/env.sh
times=()
stage() {  # stage NAME COMMAND...: run it, record its time, stop the run if it fails
  local name=$1 start rc
  shift
  echo "==> stage: $name"
  start=$(date +%s)
  "$@"
  rc=$?
  times+=("$(printf '%-34s %5ds' "$name" "$(( $(date +%s) - start ))")")
  if [ $rc -ne 0 ]; then
    report
    echo "==> stage $name failed (exit $rc)" >&2
    exit $rc
  fi
}
report() {
  echo; echo "==> time per stage:"
  printf '    %s\n' "${times[@]}"
}
python=$ONESTACK_VENV/bin/python
# Every command of the run (build, publish, images, the tests' own calls)
# works on the ci_build lists: one environment, solved once (onestack/cli.py).
export ONESTACK_BUILD_LIST=ci_build
stage "venv (setup/requirements.txt)" bash setup/venv.sh
stage "fast tier (tests/fast)" "$python" -m pytest -q tests/fast
stage "apt packages" bash setup/apt.sh
stage "apptainer (Debian's source package)" bash setup/apptainer.sh
stage "spack (pinned)" bash setup/spack.sh
stage "gitlab-ci-local (npm)" bash setup/node.sh
stage "site set-up" bin/onestack site
stage "build (ci_build lists)" bin/onestack build
stage "publish" bin/onestack publish
# The flavor table follows the tests (it shows their outcomes); the exit code is pytest's.
start=$(date +%s)
# shellcheck disable=SC2086  # PYTEST_ARGS holds several arguments
"$python" -m pytest --ignore=tests/fast ${PYTEST_ARGS:-}
rc=$?
times+=("$(printf '%-34s %5ds' "tests (pytest)" "$(( $(date +%s) - start ))")")
times+=("$(printf '%-34s %5ds' "in all" "$SECONDS")")
echo
bin/onestack flavors
report
exit $rc
