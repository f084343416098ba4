"""Bad input around push and pull: each gives a clear error (with the fix)
and leaves nothing in the destination folder, not even a temporary name.
Needs root (see conftest.py; the full-disk case mounts a tmpfs)."""

import os
import pwd
import shutil
import subprocess
from dataclasses import replace

import pytest

from onestack.images import apptainer
from onestack.images.apptainer import ApptainerError

from . import registry
from .image_helpers import DESKTOP_USER, listing, tamper


@pytest.fixture
def dest(desktop, request):
    """An empty folder of the desktop user for one pull."""
    folder = desktop.home / "images" / request.node.name
    folder.mkdir()
    user = pwd.getpwnam(DESKTOP_USER)
    os.chown(folder, user.pw_uid, user.pw_gid)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def refused_pull(desktop, uri, folder) -> ApptainerError:
    with pytest.raises(ApptainerError) as err:
        apptainer.pull(desktop.apptainer, uri, folder / "tiny.sif", desktop.signer)
    assert listing(folder) == [], "a refused pull left files behind"
    print(f"refused as expected:\n{err.value}")
    return err.value


def push_unchecked(pusher, image, uri):
    """A push that skips onestack's verify: what a careless or hostile
    publisher could put in the registry."""
    pusher.run(["push", image, uri])


def test_missing_tag(desktop, reg, dest):
    err = refused_pull(desktop, reg.oras_uri("onestack/tiny", "no-such-tag"), dest)
    assert "no such image or tag" in err.fix, err


def test_wrong_password(pusher, signed_sif, desktop, reg, dest):
    uri = reg.oras_uri("onestack/tiny", "wrong-password")
    apptainer.push(pusher, signed_sif, uri, desktop.signer)
    config = dest.parent / "wrong-password-config"  # credentials of their own
    config.mkdir()
    user = pwd.getpwnam(DESKTOP_USER)
    os.chown(config, user.pw_uid, user.pw_gid)
    try:
        # `registry login` stores oras:// credentials without trying them:
        # the registry refuses them on the pull.
        wrong = replace(desktop, apptainer=desktop.apptainer.with_env(APPTAINER_CONFIGDIR=str(config)))
        apptainer.login(wrong.apptainer, reg.host, reg.username, "not-the-password")
        err = refused_pull(wrong, uri, dest)
        assert "refused the credentials" in err.fix, err
    finally:
        shutil.rmtree(config)


def test_unsigned_image_is_not_pushed_and_not_pulled(pusher, tiny_sif, desktop, reg, dest):
    uri = reg.oras_uri("onestack/unsigned", "v1")
    with pytest.raises(ApptainerError) as refused:
        apptainer.push(pusher, tiny_sif, uri, desktop.signer)  # onestack's push verifies first
    assert "unsigned" in refused.value.fix, refused.value
    push_unchecked(pusher, tiny_sif, uri)
    err = refused_pull(desktop, uri, dest)
    assert "unsigned" in err.fix, err


def test_tampered_image_is_not_pushed_and_not_pulled(pusher, signed_sif, desktop, reg, dest, workdir):
    image = workdir / "tampered-for-push.sif"
    shutil.copy2(signed_sif, image)
    tamper(image, apptainer.sif_objects(pusher, image))
    uri = reg.oras_uri("onestack/tampered", "v1")
    with pytest.raises(ApptainerError) as refused:
        apptainer.push(pusher, image, uri, desktop.signer)
    assert "changed after it was signed" in refused.value.fix, refused.value
    push_unchecked(pusher, image, uri)
    err = refused_pull(desktop, uri, dest)
    assert "changed after it was signed" in err.fix, err


def test_registry_down(desktop, dest):
    port = registry.free_port()  # nothing listens there
    err = refused_pull(desktop, f"oras://127.0.0.1:{port}/onestack/tiny:v1", dest)
    assert "not reachable" in err.fix, err


def test_full_disk(pusher, signed_sif, desktop, reg, dest):
    uri = reg.oras_uri("onestack/tiny", "full-disk")
    apptainer.push(pusher, signed_sif, uri, desktop.signer)
    user = pwd.getpwnam(DESKTOP_USER)
    subprocess.run(
        [
            "mount",
            "-t",
            "tmpfs",
            "-o",
            f"size=8m,uid={user.pw_uid},gid={user.pw_gid},mode=0700",
            "onestack-test-full",
            dest,
        ],
        check=True,
    )
    try:
        err = refused_pull(desktop, uri, dest)
        assert "ran out of space" in err.fix, err
    finally:
        subprocess.run(["umount", dest], check=True)
