"""Fixtures shared by the tests: the live module tree that `make stack`
published (the tests check what users get, through `module load`)."""

import functools
import os
import re
import subprocess
from pathlib import Path

import pytest

from onestack import commands, paths, problems, stack
from onestack.modules import dispatch, publish
from onestack.problems import check
from onestack.spack import vendor
from onestack.stack import site

REPO = paths.REPO
# Spack reads the install tree from spack.yaml's $ONESTACK_PREFIX: the site's, unless set.
os.environ["ONESTACK_PREFIX"] = str(site.prefix())


IMAGE_TESTS = Path(__file__).resolve().parent / "images"
# Every check a passing run could not make, with why: pytest shows a passing
# test's output to nobody, so the run lists them at its end.
UNCHECKED = []


def pytest_collection_modifyitems(items):
    """The image tests last: `make test` builds Apptainer beside the tests
    before them (tests/run.sh), in the time those leave a core idle."""
    items.sort(key=lambda item: IMAGE_TESTS in Path(item.fspath).parents)


def pytest_terminal_summary(terminalreporter):
    if UNCHECKED:
        terminalreporter.section(f"checks not made ({len(UNCHECKED)}), each with why")
        for line in UNCHECKED:
            terminalreporter.write_line(line)


def assert_checks(what: str, checks: list) -> None:
    """Every check of a run passed (the message names what ran: a flavor,
    its case, its runtime); the ones it could not make are listed at the
    run's end."""
    assert all(c.passed for c in checks), f"{what}: " + "; ".join(map(str, checks))
    UNCHECKED.extend(f"{what}: {c}" for c in checks if isinstance(c, check.Unchecked))


def require_checked(what: str, checks: list) -> None:
    """A run that was only to be checked against its reference, and none of
    whose checks could be made, is a skip saying why: it proved nothing."""
    if check.none_made(checks):
        pytest.skip(f"{what}: ran, nothing checked: " + "; ".join(map(str, checks)))


@functools.lru_cache(maxsize=None)
def why_no_cluster() -> str:
    """Why this machine cannot run the virtual cluster, "" where it can."""
    if os.geteuid() != 0:
        return (
            f"the virtual cluster needs root (network namespaces, a bridge, bind mounts); running as uid {os.geteuid()}"
        )
    # Root in a container may still lack the capabilities (CAP_SYS_ADMIN, CAP_NET_ADMIN).
    probe = subprocess.run(["unshare", "--net", "--uts", "--mount", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"root here cannot make namespaces (`unshare --net --uts --mount` said: {probe.stderr.strip()})"
    return ""


def run_flavors(app: str = None) -> list:
    """The offered flavors of this run's build lists (`make test`: each
    app's ci_build), from the data: tests parametrized by them pass or fail
    by the flavor's name, and one flavor's failure hides no other's."""
    return [f for f in stack.load().select(ci=stack.ci_lists()) if f.published and app in (None, f.app.module)]


def built_levels(release: Path, flavor) -> dict:
    """The flavor's builds by level ({level: bin folder}), from its published levels.conf."""
    return dispatch.table_builds(dispatch.bin_dir(release, flavor).parent / "levels.conf")


def flavor_how(module: str, release: Path, **how) -> problems.How:
    """How a flavor's problem runs through its module on this host: its
    `own_level` checks are printed as not checked where the flavor has no
    build for this host's level (dispatch.without_own_level)."""
    own_level = dispatch.without_own_level(release, stack.load().flavor(module))
    return problems.How(modules=(module,), no_own_level=own_level, **how)


def require_published(module: str, published: list) -> None:
    """A flavor of the run's lists that publish left out was not built."""
    assert module in published, f"{module} is in this run's build lists but not published: its build failed"


def published_of(published: list, app: str, mpi: str) -> str:
    """The first flavor of app built with mpi in the run's lists, for a test
    that needs one of them whichever the lists hold: published, or a failed
    build (require_published)."""
    found = [f.module_name for f in run_flavors(app) if f.mpi == mpi]
    if not found:
        pytest.skip(f"no {app} flavor built with {mpi} is in this run's build lists (`make stack` builds them)")
    require_published(found[0], published)
    return found[0]


def abi_runtimes(abi: str) -> list:
    """The MPI runtimes (translators aside) that run the builds of an ABI."""
    return [r for r in stack.load().runtimes if abi in r.serves and not r.translator]


def runtime_published(runtime, release: Path) -> str:
    """ "" when the runtime's module is in the release, else why it is not
    (a runtime make test builds and publish left out failed its build)."""
    if runtime.module_name in publish.release_manifest(release)["runtimes"]:
        return ""
    return runtime_not_built(runtime)


def runtime_not_built(runtime) -> str:
    """Why a runtime is absent from this run: `make test` does not build it
    (one it builds and lacks failed its build: an error, not a skip)."""
    assert not runtime.ci_build, f"{runtime.module_name} is in this run's builds but absent: its build failed"
    return (
        f"{runtime.module_name} is not among this run's builds: `make stack` builds {runtime.spec}, "
        "`make test` does not (components.yaml ci_build: false)"
    )


def translator_runtime():
    """The translation runtime (mpi-runtime/openmpi-wi4mpi), or a skip
    saying why the site offers none."""
    found = next((r for r in stack.load().runtimes if r.translator), None)
    if found is None:
        pytest.skip(
            "this site offers no translation runtime: the MPI it runs on is under `unavailable.mpis` of its site file"
        )
    return found


def intel_mpi_banner(version_line: bool = True) -> str:
    """What Intel MPI prints of itself, with the version setup/vendor.yaml
    pins: in its I_MPI_DEBUG output (the default) or in `mpirun --version`."""
    version = vendor.every()["intel-oneapi-mpi"]["version"]
    return f"Intel(R) MPI Library, Version {version}" if version_line else f"Intel(R) MPI Library {version}"


def served_by(printed: str) -> list:
    """The libmpi_abi.so.1 files the loader initialised in a run with
    LD_DEBUG=libs: the MPI that served a standard-ABI build."""
    return sorted(set(re.findall(r"calling init: (\S*libmpi_abi\.so\.1)", printed)))


@pytest.fixture(scope="session")
def live_release() -> Path:
    release = publish.current_release()  # fails, with the fix, if nothing is published
    return release


@pytest.fixture(scope="session")
def init_script(live_release) -> Path:
    return live_release / "init" / "bash"


@pytest.fixture(scope="session")
def published_flavors(live_release) -> list:
    return publish.release_manifest(live_release)["flavors"]


def onestack(*args, env_extra=None, check=False) -> subprocess.CompletedProcess:
    """Run bin/onestack as a site engineer would."""
    env = {**os.environ, **(env_extra or {})}
    proc = subprocess.run([str(REPO / "bin" / "onestack"), *args], env=env, text=True, capture_output=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"onestack {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc


def run_as(user: str, env: dict = None):
    """A submit function for onestack.problems.execute: the run script as
    another user, from a clean login environment (plus env)."""

    def submit(script):
        os.chmod(script, 0o755)
        # HOME: the caller's is not the other user's to write.
        clean = {**commands.clean_env(), "HOME": "/tmp", **(env or {})}
        # Killed whole past its time (commands.run_whole): runuser, the
        # script and the ranks it started.
        code, out, err = commands.run_whole(
            [
                "runuser",
                "-u",
                user,
                "--",
                "env",
                "-i",
                *(f"{k}={v}" for k, v in clean.items()),
                "bash",
                "--noprofile",
                "--norc",
                str(script),
            ],
            1800,
            cwd="/",
        )
        return code, out + err

    return submit
