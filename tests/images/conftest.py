"""Fixtures of the image primitive tests: the real Apptainer of
setup/apptainer.sh, a tiny image built on the cached Debian base, a signing
key of the test's own, a registry on loopback, and a non-root desktop user
who pulls with the public key only.

These tests need root (builds with --fakeroot, the desktop user, a tmpfs);
the first run on a machine also builds the base (debootstrap, ~2 min)."""

import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from onestack import apt_sources, render
from onestack.images import ImageError, apptainer, base, keys

from . import registry
from .image_helpers import DESKTOP_USER, TIMINGS, timed, wait_for_apptainer_setup

HERE = Path(__file__).resolve().parent


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.section("image step timings")
        for label, seconds in TIMINGS:
            terminalreporter.write_line(f"{seconds:7.1f} s  {label}")


@pytest.fixture(scope="session")
def runner() -> apptainer.Apptainer:
    if os.geteuid() != 0:
        pytest.skip(
            "image tests need root: builds use --fakeroot with root's subuid range, "
            "and the desktop-user tests create a user and mount a tmpfs"
        )
    wait_for_apptainer_setup()
    try:
        return apptainer.find()
    except ImageError as err:
        if os.environ.get("ONESTACK_APPTAINER_SETUP_STATUS"):
            pytest.fail(f"Apptainer's set-up beside the tests passed, yet: {err}")
        pytest.skip(f"no Apptainer: {err}")


@pytest.fixture(scope="session")
def workdir():
    """Scratch every user of the tests can enter (pytest's own is 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="onestack-images-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def signer(runner):
    """The runner with the site's signing key, as `make setup` leaves it
    (made when none is configured): the key `make images` signs with."""
    fingerprint = timed("site key (reused, or newpair)", keys.ensure_site_key, runner)
    return runner.with_env(**keys.signing_env()), fingerprint


@pytest.fixture(scope="session")
def public_key(signer, workdir) -> Path:
    runner_with_key, _ = signer
    return keys.export_public_key(runner_with_key, workdir / "site-signing.asc")


@pytest.fixture(scope="session")
def base_sif(runner) -> Path:
    return timed("base image (cached after the first build)", base.base_image, runner)


def render_tiny_definition(base_image: Path, dest: Path) -> Path:
    return render.write(HERE, "tiny.def", dest, base=base_image, codename=apt_sources.release_codename())


@pytest.fixture(scope="session")
def tiny_sif(runner, base_sif, workdir) -> Path:
    """The tiny image, built once per session (unsigned)."""
    folder = workdir / "build"
    folder.mkdir()
    definition = render_tiny_definition(base_sif, folder / "tiny.def")
    return timed(
        "apptainer build (tiny, from the cached base)", apptainer.build, runner, definition, folder / "tiny.sif"
    )


@pytest.fixture(scope="session")
def signed_sif(signer, tiny_sif, workdir) -> Path:
    runner_with_key, _ = signer
    image = workdir / "signed" / "tiny.sif"
    image.parent.mkdir()
    shutil.copy2(tiny_sif, image)
    timed("apptainer sign", apptainer.sign, runner_with_key, image)
    return image


@pytest.fixture(scope="session")
def reg(workdir):
    with registry.running(workdir / "registry") as running:
        yield running


@pytest.fixture(scope="session")
def pusher(signer, reg, workdir) -> apptainer.Apptainer:
    """The site side: the signing runner, trusting the registry's CA and
    logged in with credentials kept in the test's folder."""
    runner_with_key, _ = signer
    own = runner_with_key.with_env(APPTAINER_CONFIGDIR=str(workdir / "site-config"), **reg.trust_env())
    apptainer.login(own, reg.host, reg.username, reg.password)
    return own


@dataclass
class Desktop:
    """A non-root user with an Apptainer of their own (a relocated copy of
    the installation: root's cache is not theirs to enter), their own
    keyring, registry credentials and image folder."""

    apptainer: apptainer.Apptainer
    home: Path
    signer: str  # the site key's fingerprint, which the site publishes beside its public key


def _ensure_user(name: str) -> None:
    try:
        pwd.getpwnam(name)
    except KeyError:
        # useradd also gives the user a subordinate id range (/etc/subuid).
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)


@pytest.fixture(scope="session")
def desktop(runner, workdir, reg, public_key, signer) -> Desktop:
    """The desktop user, logged in to the registry, with the site's public
    key (and no secret key) in their keyring."""
    _ensure_user(DESKTOP_USER)
    user = pwd.getpwnam(DESKTOP_USER)
    home = workdir / "desktop"
    for folder in (home, home / "keys", home / "config", home / "images", home / "tmp"):
        folder.mkdir(mode=0o700)
        os.chown(folder, user.pw_uid, user.pw_gid)
    installation = workdir / "apptainer"
    shutil.copytree(runner.executable.parent.parent, installation, symlinks=True)
    own = apptainer.Apptainer(
        installation / "bin" / "apptainer",
        user=DESKTOP_USER,
        env={
            "APPTAINER_KEYSDIR": str(home / "keys"),
            "APPTAINER_CONFIGDIR": str(home / "config"),
            "APPTAINER_TMPDIR": str(home / "tmp"),
            **reg.trust_env(),
        },
    )
    shutil.copy2(public_key, home / "site-signing.asc")
    keys.import_public_key(own, home / "site-signing.asc")
    apptainer.login(own, reg.host, reg.username, reg.password)
    return Desktop(own, home, signer[1])
