"""The GitLab pipeline, run here by gitlab-ci-local with the shell executor:
the audit and concretize stages of .gitlab-ci.yml, then one job of each
generated child pipeline (a `spack ci rebuild` of one spec, a flavor's test
problems). gitlab-ci-local does not fail a trigger job when its child fails,
so the children run directly, as pipeline files of their own."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from onestack import ci, paths
from onestack.stack import site

TOOL = Path(os.environ.get("ONESTACK_NPM_PREFIX", "")) / "node_modules" / ".bin" / "gitlab-ci-local"
TEST_FLAVOR = "hpl/openblas-mpich"
TEST_JOB = f"test {TEST_FLAVOR}"
# The child pipelines, where the pipeline file triggers them: the state
# folder of the site it builds (.gitlab-ci.yml names it).
BUILD_CHILD, TEST_CHILD = ci.triggered()


def gitlab_ci_local(project: Path, *args: str) -> subprocess.CompletedProcess:
    # The jobs' own build stage: `spack ci rebuild` empties its stage first,
    # which would wipe a build running beside the tests in the shared one.
    env = {**os.environ, "ONESTACK_BUILD_STAGE": str(project.parent / "build-stage")}
    # A runner's shell has no ONESTACK_PREFIX: the jobs find the site's
    # prefix themselves (the fixture runs them at the site's own prefix only).
    env.pop("ONESTACK_PREFIX", None)
    # The jobs work on the lists this run builds (a pipeline variable, as a
    # site may set for merge requests): the build lists would have Spack
    # solve every flavor of them from scratch (10 min on 2 cores).
    lists = ["--variable", f"ONESTACK_BUILD_LIST={os.environ.get('ONESTACK_BUILD_LIST', 'build')}"]
    proc = subprocess.run([str(TOOL), *lists, *args], cwd=project, text=True, capture_output=True, env=env)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of this checkout, as a runner clones it (gitlab-ci-local needs
    an `origin` remote), with nothing generated in it yet."""
    state = str(site.state_dir().relative_to(paths.REPO))
    if not BUILD_CHILD.startswith(f"{state}/"):
        pytest.skip(
            f"the pipeline builds the site its file names ({BUILD_CHILD}) at that site's prefix; this run's "
            f"is {state} (ONESTACK_SITE, ONESTACK_PREFIX={paths.prefix()})"
        )
    copy = tmp_path_factory.mktemp("pipeline") / "onestack"
    shutil.copytree(
        paths.REPO,
        copy,
        ignore=shutil.ignore_patterns(".generated", ".gitlab-ci-local", "spack.lock", "__pycache__", ".spack-env"),
    )
    subprocess.run(["git", "-C", str(copy), "checkout", "-q", "-B", "main"], check=True)
    subprocess.run(["git", "-C", str(copy), "remote", "remove", "origin"], capture_output=True)
    subprocess.run(
        ["git", "-C", str(copy), "remote", "add", "origin", "git@gitlab.invalid:hpc/onestack.git"], check=True
    )
    return copy


def test_audit_and_concretize_stages_pass(project):
    # Not the fast stage's job: its `make -s test-fast` is the virtualenv and
    # the fast tier, the first two stages of this very run (tests/run.sh), a
    # minute of CPU spent twice. A schedule's pipeline (every spec gets a
    # build job, so one can be run below) for the flavor the jobs below build
    # and test: FLAVORS, as a site sets it for a merge request, spares solving
    # every flavor again in this fresh copy (minutes on 2 cores); `make
    # flavors` still shows them all.
    proc = gitlab_ci_local(
        project,
        "--variable",
        "FULL_REBUILD=1",
        "--variable",
        f"FLAVORS={TEST_FLAVOR}",
        "audit",
        "concretize",
    )
    assert proc.returncode == 0
    assert "audit: .gitlab-ci.yml valid" in proc.stdout
    for child in (BUILD_CHILD, TEST_CHILD):
        ci.validate(project / child)


def test_one_build_job_of_the_spack_child_pipeline(project):
    child = project / BUILD_CHILD
    jobs = [
        name
        for name, job in yaml.safe_load(child.read_text()).items()
        if isinstance(job, dict) and name.startswith("hpcc")
    ]
    assert jobs, f"no hpcc build job in {child.name}"
    proc = gitlab_ci_local(project, "--file", BUILD_CHILD, jobs[0])
    assert proc.returncode == 0
    assert f" PASS  {jobs[0]}" in proc.stdout
    assert f"Pushed hpcc@1.5.0/{jobs[0].split('/')[1][:7]} to file://" in proc.stdout
    stray = [str(p) for p in project.rglob("$ONESTACK_PREFIX")]
    assert not stray, f"the job installed outside the site's prefix ({paths.prefix()}/software): {stray}"


def test_one_test_job_of_the_flavor_child_pipeline(project):
    proc = gitlab_ci_local(project, "--file", TEST_CHILD, TEST_JOB)
    assert proc.returncode == 0
    assert f" PASS  {TEST_JOB}" in proc.stdout
    assert "hpl_scaled_residual" in proc.stdout and "(at most 16.0) ok" in proc.stdout
    assert f"==> check: the builds of {TEST_FLAVOR} published into " in proc.stdout, "not the live tree's"
