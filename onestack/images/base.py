"""The Debian base image every image starts from (the flavors' and the tests'): built once with
Apptainer's debootstrap agent (`Bootstrap: debootstrap`, under --fakeroot) and
cached under $ONESTACK_CACHE/images/base/, so that an image on top of it
(`Bootstrap: localimage`) builds in seconds instead of debootstrapping each
time. The mirror is read at build time from this machine's apt
configuration: no package host is written into the repository."""

import hashlib
import re
from pathlib import Path
from typing import List, Tuple

from onestack import apt_sources, files, paths
from onestack.errors import OnestackError
from onestack.images import ImageError, apptainer, render

# What a definition header may hold: one word, no spaces, no newlines
# (header values cannot be quoted, so anything else is refused).
MIRROR_PATTERN = re.compile(r"https?://[A-Za-z0-9._~:/%@+-]+")
SUITE_PATTERN = re.compile(r"[a-z]+")


def _mirror_of(uri: str) -> str:
    """A `mirror+file:` URI (Debian's cloud images) as the first mirror of
    the list it names; any other as it is."""
    listed = Path(uri.removeprefix("mirror+file:").removeprefix("//"))
    if uri.startswith("mirror+file:") and listed.is_file():
        return next((line.split()[0] for line in listed.read_text().splitlines() if line.startswith("http")), uri)
    return uri


def debian_mirror() -> Tuple[str, str]:
    """(mirror URL, suite) of this machine's Debian entry for its release."""
    try:
        entry = apt_sources.release_entry()
    except OnestackError as err:
        raise ImageError(f"{err}: the debootstrap base needs the mirror this machine installs from") from None
    mirror, suite = _mirror_of(entry.uris[0]), apt_sources.release_codename()
    if not MIRROR_PATTERN.fullmatch(mirror) or not SUITE_PATTERN.fullmatch(suite):
        raise ImageError(
            f"{entry.file}: URIs {mirror!r} / suite {suite!r} cannot go into a definition header (one URL, no spaces)"
        )
    return mirror, suite


UPDATES = ("updates", "security")


def debian_updates() -> List[Tuple[str, str]]:
    """(mirror URL, suite) of this machine's Debian entries for its release's
    updates and security suites (bookworm-updates, bookworm-security), which
    the images install from too: the base's debootstrap knows the release
    alone, and an image without them would miss Debian's security fixes."""
    codename = apt_sources.release_codename()
    found = []
    for suite in (f"{codename}-{kind}" for kind in UPDATES):
        entry = next((e for e in apt_sources.entries() if suite in e.suites), None)
        if entry is None:
            continue
        mirror = _mirror_of(entry.uris[0])
        if not MIRROR_PATTERN.fullmatch(mirror):
            raise ImageError(
                f"{entry.file}: URIs {mirror!r} of {suite} cannot go into an apt line (one URL, no spaces)"
            )
        found.append((mirror, suite))
    return found


def base_image(runner: apptainer.Apptainer) -> Path:
    """The cached base SIF, built (with --fakeroot) when missing or when its
    definition changed (named by the definition's hash)."""
    mirror, suite = debian_mirror()
    definition = render("base-debootstrap.def", suite=suite, mirror=mirror)
    digest = hashlib.sha256(definition.encode()).hexdigest()[:12]
    folder = paths.cache() / "images" / "base"
    image = folder / f"{suite}-minbase-{digest}.sif"
    if image.is_file():
        return image
    folder.mkdir(parents=True, exist_ok=True)
    def_file = folder / f"{suite}-minbase-{digest}.def"
    files.write_text(def_file, definition)  # kept beside the image: how it was made
    return apptainer.build(runner, def_file, image)
