#!/usr/bin/env bash
# `make test`: the stages of the test command, each timed, the times printed
# at the end. The fast tier runs first but for the pinned Spack's clone (the
# virtualenv, gcc and git: no apt step): a data mistake stops the run in
# seconds, before anything is set up or built.
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
# figure below is this CPU's. A host below the site's baseline stops here.
host=$(bin/onestack host) || { echo "==> $host" >&2; exit 1; }
echo "==> $host"
stage "spack (pinned)" bash setup/spack.sh
# Beside the fast tier, apt and npm: Spack's indexes of the package repos.
# On a new cache the site set-up's first Spack command would build them, over
# a minute of one core with the other idle (measured: docs/results.md, Build
# and test times); here that minute passes under three stages that leave a
# core idle. In its own session, so that a run stopped early ends Spack too.
indexes_log=$(mktemp)
setsid bin/onestack spack-indexes >"$indexes_log" 2>&1 &
indexes_pid=$!
trap 'kill -- -$indexes_pid 2>/dev/null; rm -f "$indexes_log"' EXIT
spack_indexes() {  # its output, and its exit code
  wait $indexes_pid
  local rc=$?
  cat "$indexes_log"
  return $rc
}
stage "fast tier (tests/fast)" "$python" -m pytest -q tests/fast
stage "apt packages" bash setup/apt.sh
stage "gitlab-ci-local (npm)" bash setup/node.sh
stage "spack's indexes (after the 3 above)" spack_indexes
stage "site set-up" bin/onestack site
stage "build (ci_build lists)" bin/onestack build
stage "publish" bin/onestack publish
# Beside the tests, at the lowest priority, run what they need only later:
# the tests leave a core idle a third of their time (cluster start-up,
# images, registry), while the builds' stage keeps both cores busy
# (measured: docs/results.md, Build and test times). Lowest means its own
# session with its scheduling group niced: Linux's autogroups share the CPU
# between sessions first, so a plain `nice` weighs only against this
# script's own session, not against the MPI ranks the cluster's slurmd
# starts (measured: those ran 2-4x slower, and a fault test timed out).
beside_tests() {  # beside_tests LOG COMMAND...: start it; its pid in $!
  local log=$1
  shift
  setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' beside "$@" >"$log" 2>&1 &
}
# - Apptainer (built from Debian's source package) and the site's signing
#   key made with it, which only the image tests need: they run last
#   (tests/conftest.py) and wait for this file to hold its exit code
#   (tests/images/image_helpers.py).
apptainer_log=$(mktemp)
export ONESTACK_APPTAINER_SETUP_STATUS=$apptainer_log.status
start=$(date +%s)
beside_tests "$apptainer_log" bash -c 'bash setup/apptainer.sh && bin/onestack signing-key; echo $? >"$ONESTACK_APPTAINER_SETUP_STATUS.part" && mv "$ONESTACK_APPTAINER_SETUP_STATUS.part" "$ONESTACK_APPTAINER_SETUP_STATUS"'
apptainer_pid=$!
# - The flavor matrix solved cell by cell (its ci_build sample,
#   onestack/status.py; cached in $ONESTACK_CACHE until the inputs change):
#   the pipeline test's `make flavors` then waits on this run
#   (onestack/status.py) instead of solving it again.
matrix_log=$(mktemp)
beside_tests "$matrix_log" bin/onestack flavors
matrix_pid=$!
# A run stopped early leaves nothing of either behind.
trap 'kill -- -$apptainer_pid -$matrix_pid 2>/dev/null; rm -f "$indexes_log" "$apptainer_log" "$ONESTACK_APPTAINER_SETUP_STATUS"* "$matrix_log"' EXIT
# shellcheck disable=SC2086  # PYTEST_ARGS holds several arguments
"$python" -m pytest --ignore=tests/fast ${PYTEST_ARGS:-}
rc=$?
times+=("$(printf '%-34s %5ds' "tests (pytest)" "$(( $(date +%s) - start ))")")
wait $apptainer_pid
echo "==> Apptainer and the signing key, beside the tests:"
cat "$apptainer_log"
if [ "$(cat "$ONESTACK_APPTAINER_SETUP_STATUS" 2>/dev/null)" != 0 ]; then
  echo "==> Apptainer's set-up failed (its log above)" >&2
  rc=1
fi
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
