"""The site's image signing key: one PGP key pair in an Apptainer keyring
outside the repository, which `apptainer sign` uses and whose public half
desktop users import to verify what they pull.

Apptainer 1.4.5 keeps a keyring (files pgp-secret, pgp-public) in the
folder APPTAINER_KEYSDIR names, default ~/.apptainer/keys. onestack points
it at $ONESTACK_SIGNING_KEYSDIR (default: the site's own,
$ONESTACK_CACHE/sites/<site>/signing-keys), for
root and any other user alike: `signing_env()` is what a sign needs.

The key, in this order:
  1. the keyring there, if it holds a secret key (reused);
  2. ONESTACK_SIGNING_KEY: a site's own exported private key (ASCII-armored:
     `gpg --armor --export-secret-keys FINGERPRINT`, or
     `apptainer key export --secret --armor FILE`),
     imported once; its passphrase, if any, in ONESTACK_SIGNING_PASSPHRASE;
  3. else a new pair made here without a passphrase (`apptainer key newpair`,
     never pushed to a key server): enough for a test or a single build
     host; a site that publishes images configures its own (2.).

A desktop user verifies with the public half only: imported into their
keyring (`apptainer key import site-signing.asc`), or once for every user of
an installation into its global keyring (`apptainer key import --global
site-signing.asc`, as root), which `apptainer verify --local` reads too.
"""

import os
import re
import tempfile
from pathlib import Path
from typing import Dict, List

from onestack import files
from onestack.images import ImageError
from onestack.images.apptainer import Apptainer
from onestack.stack import site

KEYSDIR_ENV = "ONESTACK_SIGNING_KEYSDIR"
KEY_ENV = "ONESTACK_SIGNING_KEY"
PASSPHRASE_ENV = "ONESTACK_SIGNING_PASSPHRASE"
NEW_KEY_NAME = "onestack site image signing"
NEW_KEY_EMAIL = "onestack-signing@localhost"
FINGERPRINT = re.compile(r"Fingerprint:\s*([0-9A-F]{40})")


def keys_dir() -> Path:
    named = os.environ.get(KEYSDIR_ENV)
    return Path(named) if named else site.cache_dir() / "signing-keys"


def keyring_env(folder: Path) -> Dict[str, str]:
    return {"APPTAINER_KEYSDIR": str(folder)}


def signing_env() -> Dict[str, str]:
    """The environment in which `apptainer sign` finds the site key."""
    return keyring_env(keys_dir())


def passphrase() -> str:
    return os.environ.get(PASSPHRASE_ENV, "")


def fingerprints(apptainer: Apptainer, folder: Path, *, secret: bool) -> List[str]:
    """Fingerprints of the keys in the keyring at folder."""
    if not (folder / ("pgp-secret" if secret else "pgp-public")).is_file():
        return []
    args = ["key", "list", *(["--secret"] if secret else [])]
    return FINGERPRINT.findall(apptainer.with_env(**keyring_env(folder)).run(args).stdout)


def _make_keyring(apptainer: Apptainer, folder: Path) -> None:
    keyring = apptainer.with_env(**keyring_env(folder))
    site_key = os.environ.get(KEY_ENV)
    if site_key:
        if not Path(site_key).is_file():
            raise ImageError(
                f"{KEY_ENV}={site_key}: no such file; name the site's exported private "
                "key (ASCII-armored), or unset it to have a key made here"
            )
        # The key's passphrase, if any, is asked on stdin; it stays the same.
        keyring.run(["key", "import", site_key], input=passphrase() + "\n")
        if not fingerprints(apptainer, folder, secret=True):
            raise ImageError(
                f"{KEY_ENV}={site_key} holds no private key: export it with "
                "`gpg --armor --export-secret-keys FINGERPRINT > FILE`"
            )
    else:
        keyring.run(
            [
                "key",
                "newpair",
                f"--name={NEW_KEY_NAME}",
                f"--email={NEW_KEY_EMAIL}",
                "--comment=made by onestack without passphrase",
                "--password=",
                "--push=false",
            ]
        )


def _check_configured(apptainer: Apptainer, folder: Path, fingerprint: str) -> None:
    """A site key configured after a key was made here is not silently
    ignored: images would go on being signed with the key desktop users
    were never given."""
    if not os.environ.get(KEY_ENV):
        return
    with tempfile.TemporaryDirectory() as tmp:
        _make_keyring(apptainer, Path(tmp))
        configured = fingerprints(apptainer, Path(tmp), secret=True)[0]
    if configured != fingerprint:
        raise ImageError(
            f"{KEY_ENV}={os.environ[KEY_ENV]} is key {configured}, but {folder} signs with {fingerprint}: "
            f"move {folder} away (images are signed again with the configured key), or unset {KEY_ENV}"
        )


def site_key(apptainer: Apptainer) -> str:
    """The fingerprint of the site key that signed the images (never a new
    one: images signed by another key are not the site's)."""
    found = fingerprints(apptainer, keys_dir(), secret=True)
    if not found:
        raise ImageError(
            f"no site signing key in {keys_dir()}: the images were signed by one; give it back "
            f"({KEY_ENV}, or {KEYSDIR_ENV} naming the folder that holds it)"
        )
    return found[0]


def ensure_site_key(apptainer: Apptainer) -> str:
    """The fingerprint of the site key, made or imported into keys_dir()
    if it holds none yet. The keyring appears complete or not at all."""
    folder = keys_dir()
    found = fingerprints(apptainer, folder, secret=True)
    if found:
        _check_configured(apptainer, folder, found[0])
        return found[0]
    if folder.exists() and any(folder.iterdir()):
        raise ImageError(
            f"{folder} holds files but no secret key: move it away (or set {KEYSDIR_ENV} "
            "to another folder) so that a site key can be made or imported there"
        )
    with files.replacing(folder) as staging:  # an empty folder, checked above, is replaced
        _make_keyring(apptainer, staging)
    return fingerprints(apptainer, folder, secret=True)[0]


def export_public_key(apptainer: Apptainer, dest: Path) -> Path:
    """The site key's public half, ASCII-armored: what desktop users import."""
    fingerprint = ensure_site_key(apptainer)
    # `key export` asks which key by its index in the keyring's list.
    index = fingerprints(apptainer, keys_dir(), secret=False).index(fingerprint)
    with files.replacing(dest) as partial:
        apptainer.with_env(**signing_env()).run(["key", "export", "--armor", partial], input=f"{index}\n")
        partial.chmod(0o644)
    return dest


def import_public_key(apptainer: Apptainer, key_file: Path) -> None:
    """Adds a public key to the keyring the given apptainer uses (its
    APPTAINER_KEYSDIR, else the user's ~/.apptainer/keys): a desktop user's
    one step before `apptainer verify` accepts the site's images."""
    apptainer.run(["key", "import", key_file])
