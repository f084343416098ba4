"""A published flavor as users get it in a container: `make images` builds
and signs it with Apptainer from its generated definition, `make
push-images` pushes it to the registry, and a desktop user (not root, with
the site's public key only) pulls it, verifies it, tests it, and runs its
problem with the image's own MPI and with the host's Intel MPI launching
one container per rank (Apptainer's bind model).

One image: an Intel MPI flavor's, which carries the pinned wheels as every
Intel MPI image does; every step here is the same for any flavor (a second
image, QE's, took four more minutes and proved nothing more)."""

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, assert_checks, intel_mpi_banner, onestack, run_as

from onestack import problems, stack
from onestack.images import apptainer
from onestack.images import flavor as images
from onestack.modules import lmod
from onestack.stack import cpus

from .image_helpers import timed

FLAVOR = "hpl/openblas-impi"
APP = FLAVOR.split("/")[0]
NAME = FLAVOR.replace("/", "-")  # the image's name in the registry and on disk


def problem() -> problems.Problem:
    return problems.across_nodes_problem(APP)


@pytest.fixture(scope="session")
def built(runner, published_flavors) -> dict:
    """`make images` for the tested flavor (rebuilt only when its inputs changed)."""
    assert FLAVOR in published_flavors, f"{FLAVOR} is not published"
    proc = timed(f"onestack images {FLAVOR}", onestack, "images", FLAVOR, check=True)
    built = {FLAVOR: images.sif_path(stack.load().flavor(FLAVOR))}
    missing = [m for m, image in built.items() if not image.is_file()]
    assert not missing, f"no image of {', '.join(missing)}:\n{proc.stdout[-3000:]}"
    return built


def test_where_images_shows_every_built_image(built):
    folder = onestack("where-images", check=True).stdout.strip()
    assert all(str(image.parent) == folder and image.is_file() for image in built.values())


def test_the_image_is_signed_and_labelled(signer, built):
    runner_with_key, fingerprint = signer
    for module, image in built.items():
        apptainer.verify(runner_with_key, image, fingerprint)
        labels = apptainer.inspect(runner_with_key, image)
        assert labels["org.onestack.flavor"] == module
        assert labels["org.onestack.cpu-levels"].startswith(cpus.baseline_level())
        print(f"{module}: {image.stat().st_size / 1e6:.0f} MB, levels {labels['org.onestack.cpu-levels']}")


def test_apptainer_test_runs_the_flavors_problem(runner, built):
    for module, image in built.items():
        out = apptainer.test(runner, image)
        assert "ranks: one job of" in out and "FAILED" not in out, out
        for name in next(iter(problems.load(module.split("/")[0]).values()))["checks"]:
            assert re.search(rf"^{name}: .* ok$", out, re.M), out


def test_exec_has_the_standard_environment(runner, built):
    image = built[FLAVOR]
    program = stack.load().flavor(FLAVOR).app.program
    out = apptainer.exec_in(
        runner,
        image,
        ["sh", "-c", f'echo "$PATH|$FOO|$OPENBLAS_NUM_THREADS"; command -v {program} mpirun mktemp'],
        env={"FOO": "bar"},
    )
    path, foo, threads = out.splitlines()[0].split("|")
    folders = path.split(":")
    # The entry points before the view and the OS (an Intel MPI image puts its MPI's bin/ first).
    assert (
        folders.index("/opt/onestack/dispatch/bin") < folders.index("/opt/views/view/bin") < folders.index("/usr/bin")
    )
    assert foo == "bar" and threads == "1"
    assert out.splitlines()[1] == f"/opt/onestack/dispatch/bin/{program}"


def _runner_how(runner, image, **extra) -> problems.How:
    """`apptainer exec [options] <image>` around the program (inside=True:
    around its launcher too, the image's own MPI); an unpacked folder runs as it is."""
    options = [] if runner.fuse_usable() or image.is_dir() else ["--unsquash"]
    return problems.How(
        wrapper=(str(runner.executable), "exec", *options, *extra.pop("options", ()), str(image)), **extra
    )


def _intel_mpi_binds(init_script) -> tuple:
    """What the host's Intel MPI needs inside each container, as
    docs/users.md says: the folders its module names bound in, its libraries
    first (`--bind "$ONESTACK_MPI_BINDS"`, `--env LD_LIBRARY_PATH`)."""
    script = "module load mpi-runtime/impi\necho $ONESTACK_MPI_BINDS; echo $LD_LIBRARY_PATH"
    host = lmod.clean_shell(init_script, script)
    assert host.returncode == 0, host.stderr
    binds, library_path = host.stdout.split()[-2:]
    return f"--bind={binds}", f"--env=LD_LIBRARY_PATH={library_path}"


def test_the_problem_runs_with_the_images_own_mpi(runner, built, init_script, tmp_path):
    checks = problems.run(problem(), _runner_how(runner, built[FLAVOR], inside=True), tmp_path, init_script)
    assert_checks(f"{FLAVOR}'s image on its own MPI", checks)


def test_host_intel_mpi_starts_one_container_per_rank(runner, built, init_script, tmp_path):
    """A desktop's own MPI of the family: the host's mpirun (Intel MPI)
    starts the image's build once per rank, its libraries bound in. The
    image's own Intel MPI is the host's wheel at the same path, so this
    proves the launch (one container per rank, the PMI across the container
    boundary, the binds accepted), not a swap of MPI: an MPICH build on Intel
    MPI's libraries is tests/test_mpi_abi.py's, on the host."""
    how = _runner_how(
        runner,
        built[FLAVOR],
        modules=("mpi-runtime/impi",),
        env=(("I_MPI_DEBUG", "4"),),
        options=_intel_mpi_binds(init_script),
    )
    checks = problems.run(problem(), how, tmp_path, init_script)
    assert_checks(f"{FLAVOR}'s image on the host's Intel MPI", checks)
    assert intel_mpi_banner() in (tmp_path / "output.txt").read_text()


def _pull_as_users_md_says(desktop, uri: str, image: Path) -> None:
    """docs/users.md's desktop lines as they stand: pull to a name of its
    own, verify, compare the Fingerprint line with the site key's, rename."""
    incoming = image.parent / "incoming.sif"
    desktop.apptainer.run(["pull", "--force", incoming, uri], timeout=apptainer.TRANSFER_SECONDS)
    verified = desktop.apptainer.run(["verify", "--local", incoming])
    printed = verified.stdout + verified.stderr
    fingerprints = set(re.findall(r"Fingerprint:\s*([0-9A-Fa-f]+)", printed))
    assert {f.upper() for f in fingerprints} == {desktop.signer.upper()}, printed
    incoming.rename(image)


def test_a_desktop_user_pulls_verifies_tests_and_runs_it(built, reg, desktop, init_script, tmp_path):
    """`make push-images` to the registry, then docs/users.md's desktop steps
    as a user who is not root and holds only the site's public key: pull,
    verify, test, and the problem with the image's MPI and the host's."""
    env = {
        "ONESTACK_REGISTRY": f"{reg.host}/hpc/onestack",
        "ONESTACK_REGISTRY_USER": reg.username,
        "ONESTACK_REGISTRY_PASSWORD": reg.password,
        "ONESTACK_IMAGE_TAG": "test",
        "APPTAINER_CONFIGDIR": str(tmp_path / "site-config"),
        **reg.trust_env(),
    }
    proc = timed(
        "make push-images",
        subprocess.run,
        ["make", "-s", "push-images"],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"oras://{reg.host}/hpc/onestack/{NAME}:test" in proc.stdout
    staged = proc.stdout.find(f"oras://{reg.host}/hpc/onestack/{NAME}:test-staging")
    assert 0 <= staged < proc.stdout.find(f"oras://{reg.host}/hpc/onestack/{NAME}:test\n"), "not staged first"
    kept = [str(f) for f in (tmp_path / "site-config").rglob("*") if f.is_file() and reg.host in f.read_text()]
    assert not kept, f"make push-images left the registry's credentials behind in {kept}"
    image = desktop.home / "images" / f"{NAME}_test.sif"
    uri = f"oras://{reg.host}/hpc/onestack/{NAME}:test"
    timed("pull + verify (desktop user)", _pull_as_users_md_says, desktop, uri, image)
    scratch = desktop.home / "selftest-tmp"  # the self-test's mktemp -d, which it must remove
    scratch.mkdir()
    shutil.chown(scratch, desktop.apptainer.user)
    out = timed("apptainer test (desktop user)", apptainer.test, desktop.apptainer.with_env(TMPDIR=str(scratch)), image)
    assert "FAILED" not in out and all(name in out for name in problem()["checks"]), out
    left = sorted(scratch.iterdir())
    assert not left, f"{FLAVOR}'s apptainer test left {left} in the desktop user's TMPDIR"
    case = problem()
    as_desktop = run_as(desktop.apptainer.user, dict(desktop.apptainer.env))
    # One container per rank: from the image where FUSE mounts it, else
    # from the folder it is unpacked into once (docs/users.md's desktop steps).
    per_rank = (
        image
        if desktop.apptainer.fuse_usable()
        else timed(
            "apptainer build --sandbox (desktop user)",
            apptainer.sandbox,
            desktop.apptainer,
            image,
            desktop.home / "images" / f"{NAME}_test",
            desktop.signer,
        )
    )
    for name, how in (
        ("own MPI", _runner_how(desktop.apptainer, image, inside=True)),
        (
            "host Intel MPI",
            _runner_how(
                desktop.apptainer, per_rank, modules=("mpi-runtime/impi",), options=_intel_mpi_binds(init_script)
            ),
        ),
    ):
        outcome = problems.execute(
            case, how, _desktop_folder(desktop, name.replace(" ", "-")), init_script, submit=as_desktop
        )
        assert not outcome.failure(), f"{FLAVOR}'s image, {name}: {outcome.failure()}"
        assert_checks(f"{FLAVOR}'s image, {name}", outcome.checks())


def _desktop_folder(desktop, name: str):
    """A folder of the desktop user's for a run (the program writes there)."""
    user = pwd.getpwnam(desktop.apptainer.user)
    folder = desktop.home / "runs" / name
    folder.mkdir(parents=True)
    for path in (folder.parent, folder):
        os.chown(path, user.pw_uid, user.pw_gid)
    return folder
