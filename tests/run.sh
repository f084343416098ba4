#!/usr/bin/env bash
# `make test`: the stages of the test command, each timed, the times printed
# at the end. The fast tier runs first (the virtualenv, gcc and git: no
# Spack, no apt step): a data mistake stops the run in seconds, before
# anything is set up or built.
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
  echo; echo "==> time per stage (${host:-host not read yet}):"
  printf '    %s\n' "${times[@]}"
}
python=$ONESTACK_VENV/bin/python
# Every command of the run (build, publish, images, the tests' own calls)
# works on the ci_build lists: one environment, solved once (onestack/cli.py).
export ONESTACK_BUILD_LIST=ci_build
stage "venv (setup/requirements.txt)" bash setup/venv.sh
# Hosts differ from run to run (with or without AVX-512): every time and
# figure below is this CPU's.
host=$(bin/onestack host)
echo "==> $host"
stage "fast tier (tests/fast)" "$python" -m pytest -q tests/fast
stage "apt packages" bash setup/apt.sh
# Apptainer (and the signing key made with it) is needed by the images
# alone: it builds beside the set-up and the Spack builds, whose site set-up
# and solve (clingo) leave a core idle for minutes; its output goes to a
# log, printed when it is waited for.
apptainer_log=$(mktemp)
apptainer_start=$(date +%s)
setsid -w bash -c 'bash setup/apptainer.sh && bin/onestack signing-key' >"$apptainer_log" 2>&1 &
apptainer_pid=$!
# A stage that fails before it is waited for leaves no build behind.
trap 'kill -- -$apptainer_pid 2>/dev/null; rm -f "$apptainer_log"' EXIT
stage "spack (pinned)" bash setup/spack.sh
stage "gitlab-ci-local (npm)" bash setup/node.sh
stage "site set-up" bin/onestack site
stage "build (ci_build lists)" bin/onestack build
apptainer_set_up() {  # waits for Apptainer's set-up beside the builds; its log, its status
  wait $apptainer_pid
  local rc=$?
  cat "$apptainer_log"
  rm -f "$apptainer_log"
  return $rc
}
stage "apptainer + signing key (waited)" apptainer_set_up
times+=("$(printf '%-34s %5ds' "  apptainer beside the builds" "$(( $(date +%s) - apptainer_start ))")")
stage "publish" bin/onestack publish
# The flavor matrix solved cell by cell (its ci_build sample, onestack/status.py;
# cached in $ONESTACK_CACHE until the inputs change) runs beside the tests, at
# the lowest priority: the tests leave a core idle a third of their time
# (cluster start-up, images, registry), and the pipeline test's `make flavors`
# then waits on this run (onestack/status.py) instead of solving it again.
# Lowest means its own session with its scheduling group niced: Linux's
# autogroups share the CPU between sessions first, so a plain `nice` weighs
# only against this script's own session, not against the MPI ranks the
# cluster's slurmd starts (measured: those ran 2-4x slower, and a fault test
# timed out).
matrix_log=$(mktemp)
start=$(date +%s)
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 bin/onestack flavors' \
  >"$matrix_log" 2>&1 &
matrix_pid=$!
trap 'kill -- -$matrix_pid 2>/dev/null; rm -f "$matrix_log"' EXIT
# shellcheck disable=SC2086  # PYTEST_ARGS holds several arguments
"$python" -m pytest --ignore=tests/fast ${PYTEST_ARGS:-}
rc=$?
times+=("$(printf '%-34s %5ds' "tests (pytest)" "$(( $(date +%s) - start ))")")
if ! wait $matrix_pid; then
  echo "==> the flavor matrix's concretization failed:" >&2
  cat "$matrix_log" >&2
  rc=1
fi
times+=("$(printf '%-34s %5ds' "in all" "$SECONDS")")
# The flavor table follows the tests (it shows their outcomes); the exit code is pytest's.
echo
bin/onestack flavors
report
exit $rc
