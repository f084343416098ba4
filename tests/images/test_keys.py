"""The site signing key: a site's own key (GnuPG's, with a passphrase) is
imported once and signs; a keyring folder in a state onestack cannot use is
refused with the fix. Needs root (see conftest.py)."""

import shutil
import subprocess

import pytest

from onestack.images import ImageError, apptainer, keys

PASSPHRASE = "correct horse battery staple"


def _gpg(command):
    """Runs a GnuPG command; a failure shows what GnuPG printed."""
    proc = subprocess.run(command, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(command[:3])}... exit {proc.returncode}: {proc.stderr.strip()}"


@pytest.fixture
def site_key_file(workdir):
    """A site's key with a passphrase, made with GnuPG as a site would, its
    private half exported ASCII-armored: what ONESTACK_SIGNING_KEY names."""
    home = workdir / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase", PASSPHRASE]
    # The agent is started before, not by, the key generation: gpg's own
    # autostart gives up after a few seconds, which a loaded CI host exceeded
    # once (exit 2, its reason unprinted).
    _gpg(["gpgconf", "--homedir", str(home), "--launch", "gpg-agent"])
    _gpg([*gpg, "--quick-gen-key", "Example Site <images@site.example>", "rsa3072", "sign", "never"])
    listed = subprocess.run(
        [*gpg, "--with-colons", "--list-secret-keys"], check=True, capture_output=True, text=True
    ).stdout
    fingerprint = next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))
    exported = workdir / "site-secret.asc"
    with open(exported, "w") as out:
        subprocess.run([*gpg, "--armor", "--export-secret-keys", fingerprint], check=True, stdout=out)
    yield exported, fingerprint
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], check=False)
    shutil.rmtree(home)
    exported.unlink()


def test_site_key_with_passphrase_imports_and_signs(runner, site_key_file, tiny_sif, workdir, monkeypatch):
    exported, fingerprint = site_key_file
    monkeypatch.setenv(keys.KEYSDIR_ENV, str(workdir / "site-keys"))
    monkeypatch.setenv(keys.KEY_ENV, str(exported))
    monkeypatch.setenv(keys.PASSPHRASE_ENV, PASSPHRASE)
    assert keys.ensure_site_key(runner) == fingerprint
    assert keys.ensure_site_key(runner) == fingerprint  # reused, not imported again
    signer = runner.with_env(**keys.signing_env())
    image = workdir / "site-signed.sif"
    shutil.copy2(tiny_sif, image)
    apptainer.sign(signer, image, passphrase=keys.passphrase())
    apptainer.verify(signer, image, fingerprint)
    image.unlink()
    shutil.rmtree(workdir / "site-keys")


def test_missing_site_key_file_is_refused(runner, workdir, monkeypatch):
    monkeypatch.setenv(keys.KEYSDIR_ENV, str(workdir / "no-keys"))
    monkeypatch.setenv(keys.KEY_ENV, str(workdir / "no-such-key.asc"))
    with pytest.raises(ImageError, match="ONESTACK_SIGNING_KEY=.*no such file"):
        keys.ensure_site_key(runner)
    assert not (workdir / "no-keys").exists()  # nothing half-made


def test_keyring_without_secret_key_is_refused(runner, workdir, monkeypatch):
    folder = workdir / "public-only"
    folder.mkdir()
    (folder / "pgp-public").write_text("")
    monkeypatch.setenv(keys.KEYSDIR_ENV, str(folder))
    monkeypatch.delenv(keys.KEY_ENV, raising=False)
    with pytest.raises(ImageError, match="holds files but no secret key"):
        keys.ensure_site_key(runner)
    shutil.rmtree(folder)


def test_a_site_key_configured_after_one_was_made_is_not_ignored(runner, site_key_file, workdir, monkeypatch):
    """A key made here first, the site's own configured later: images must
    not go on being signed with the key desktop users were never given."""
    exported, fingerprint = site_key_file
    monkeypatch.setenv(keys.KEYSDIR_ENV, str(workdir / "made-keys"))
    monkeypatch.delenv(keys.KEY_ENV, raising=False)
    made = keys.ensure_site_key(runner)
    monkeypatch.setenv(keys.KEY_ENV, str(exported))
    monkeypatch.setenv(keys.PASSPHRASE_ENV, PASSPHRASE)
    with pytest.raises(ImageError, match=f"is key {fingerprint}, but .*made-keys signs with {made}: move"):
        keys.ensure_site_key(runner)
    shutil.rmtree(workdir / "made-keys")
