"""The image primitives on a real Apptainer and a real registry: build,
sign, verify, test/run/exec/inspect, push, and a pull by a non-root desktop
user who has only the site's public key. Needs root (see conftest.py)."""

import os
import pwd
import shutil

import pytest

from onestack.images import apptainer, keys
from onestack.images.apptainer import ApptainerError

from .image_helpers import DESKTOP_USER, listing, tamper, timed


def test_installation_is_the_pinned_version(runner):
    if os.environ.get("APPTAINER"):
        pytest.skip(f"APPTAINER={os.environ['APPTAINER']}: a site's own Apptainer, not the pinned build")
    assert runner.version() == apptainer.pinned_version()


def test_signed_image_verifies(signer, signed_sif):
    runner_with_key, fingerprint = signer
    timed("apptainer verify", apptainer.verify, runner_with_key, signed_sif, fingerprint)
    # Signed, and verified, but by a key that is not the one asked for
    other = "0" * 40
    with pytest.raises(apptainer.WrongSigner, match=f"signed by {fingerprint}, not by the site's key {other}"):
        apptainer.verify(runner_with_key, signed_sif, other)


def test_an_image_whose_signer_the_keyring_lacks_says_to_import_the_key(runner, signed_sif, workdir):
    """Apptainer calls it an integrity error; the fix is the missing key."""
    empty = workdir / "empty-keyring"
    empty.mkdir(mode=0o700)
    with pytest.raises(ApptainerError) as err:
        apptainer.verify(runner.with_env(**keys.keyring_env(empty)), signed_sif, "0" * 40)
    assert "import the site's public key" in err.value.fix, err.value


def test_unsigned_image_fails_verify(signer, tiny_sif):
    runner_with_key, fingerprint = signer
    with pytest.raises(ApptainerError) as err:
        apptainer.verify(runner_with_key, tiny_sif, fingerprint)
    assert "unsigned" in err.value.fix


def test_one_changed_byte_fails_verify(signer, signed_sif, workdir):
    runner_with_key, fingerprint = signer
    image = workdir / "tampered.sif"
    shutil.copy2(signed_sif, image)
    tamper(image, apptainer.sif_objects(runner_with_key, image))
    with pytest.raises(ApptainerError) as err:
        apptainer.verify(runner_with_key, image, fingerprint)
    assert "changed after it was signed" in err.value.fix, err.value


def test_test_run_exec_and_labels(runner, signed_sif):
    assert "tiny test passed" in timed("apptainer test", apptainer.test, runner, signed_sif)
    ran = apptainer.run_image(runner, signed_sif, ["one", "two"])
    assert "runscript args: one two" in ran
    assert "greeting: hello from %environment" in ran  # the definition's %environment
    shown = apptainer.exec_in(
        runner, signed_sif, ["sh", "-c", 'echo "FOO=$FOO"; echo "PATH=$PATH"'], env={"FOO": "bar"}
    )
    assert "FOO=bar" in shown
    path = shown.split("PATH=", 1)[1].split()[0].split(":")
    assert {"/usr/bin", "/bin", "/usr/sbin"} <= set(path), path  # the standard environment
    labels = apptainer.inspect(runner, signed_sif)
    assert labels["org.onestack.image"] == "tiny"
    assert labels["org.onestack.purpose"] == "apptainer primitives test"


def test_desktop_user_pulls_verifies_and_tests(pusher, signed_sif, reg, desktop):
    uri = reg.oras_uri("onestack/tiny", "v1")
    timed("apptainer push (90 MB, loopback)", apptainer.push, pusher, signed_sif, uri, desktop.signer)
    # The desktop keyring holds the site's public key only.
    assert keys.fingerprints(desktop.apptainer, desktop.home / "keys", secret=True) == []
    assert len(keys.fingerprints(desktop.apptainer, desktop.home / "keys", secret=False)) == 1
    image = desktop.home / "images" / "tiny.sif"
    # What a killed pull leaves (a process id above Linux's pid_max: gone).
    stale = image.with_name(".tiny.sif.partial-999999999")
    stale.write_bytes(b"half an image")
    timed("apptainer pull + verify (desktop user)", apptainer.pull, desktop.apptainer, uri, image, desktop.signer)
    assert pwd.getpwuid(os.stat(image).st_uid).pw_name == DESKTOP_USER
    assert listing(image.parent) == ["tiny.sif"]
    tested = timed("apptainer test (desktop user)", apptainer.test, desktop.apptainer, image)
    assert "tiny test passed" in tested
    image.unlink()
