"""The Debian base image the test images start from: built once with
Apptainer's debootstrap agent (`Bootstrap: debootstrap`, under --fakeroot) and
cached under $ONESTACK_CACHE/images/base/, so that an image on top of it
(`Bootstrap: localimage`) builds in seconds instead of debootstrapping each
time. The mirror is read at build time from this machine's apt
configuration: no package host is written into the repository."""

import hashlib
import re
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from onestack import files, paths
from onestack.images import ImageError, apptainer, render

APT_SOURCES = Path("/etc/apt/sources.list.d")
OS_RELEASE = Path("/etc/os-release")
# What a definition header may hold: one word, no spaces, no newlines
# (header values cannot be quoted, so anything else is refused).
MIRROR_PATTERN = re.compile(r"https?://[A-Za-z0-9._~:/%@+-]+")
SUITE_PATTERN = re.compile(r"[a-z]+")


def _stanzas(text: str) -> List[Dict[str, str]]:
    """deb822 stanzas as {field: value} (continuation lines ignored: URIs and
    Suites are one-line fields)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", text):
        fields = dict(m.groups() for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", block, re.MULTILINE))
        if fields:
            stanzas.append(fields)
    return stanzas


def release_codename() -> str:
    found = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", OS_RELEASE.read_text(), re.MULTILINE)
    if not found:
        raise ImageError(f"{OS_RELEASE}: no VERSION_CODENAME: not a Debian release?")
    return found.group(1)


def _entries() -> Iterator[Tuple[Path, str, List[str]]]:
    """(file, first URI, suites) of each Debian entry apt has here (with the
    component main: not a third party's of the same suite, e.g. Docker's): the
    deb822 stanzas of sources.list.d/*.sources, then the one-line `deb`
    entries of sources.list and sources.list.d/*.list (bookworm's installer
    writes those)."""
    for sources in sorted(APT_SOURCES.glob("*.sources")):
        for stanza in _stanzas(sources.read_text()):
            if stanza.get("URIs") and "main" in stanza.get("Components", "").split():
                yield sources, _mirror_of(stanza["URIs"].split()[0]), stanza.get("Suites", "").split()
    for listing in [APT_SOURCES.parent / "sources.list", *sorted(APT_SOURCES.glob("*.list"))]:
        for line in listing.read_text().splitlines() if listing.is_file() else []:
            words = re.sub(r"\[[^]]*\]", " ", line).split()  # deb [options] URI SUITE COMPONENT...
            if len(words) >= 4 and words[0] == "deb" and "main" in words[3:]:
                yield listing, _mirror_of(words[1]), [words[2]]


def _mirror_of(uri: str) -> str:
    """A `mirror+file:` URI (Debian's cloud images) as the first mirror of
    the list it names; any other as it is."""
    listed = Path(uri.removeprefix("mirror+file:").removeprefix("//"))
    if uri.startswith("mirror+file:") and listed.is_file():
        return next((line.split()[0] for line in listed.read_text().splitlines() if line.startswith("http")), uri)
    return uri


def debian_mirror() -> Tuple[str, str]:
    """(mirror URL, suite) of this machine's Debian entry for its release."""
    suite = release_codename()
    for sources, mirror, suites in _entries():
        if suite in suites:
            if not MIRROR_PATTERN.fullmatch(mirror) or not SUITE_PATTERN.fullmatch(suite):
                raise ImageError(
                    f"{sources}: URIs {mirror!r} / suite {suite!r} cannot go into a "
                    "definition header (one URL, no spaces)"
                )
            return mirror, suite
    raise ImageError(
        f"no Debian entry for {suite} in {APT_SOURCES}/*.sources, {APT_SOURCES.parent}/sources.list or "
        f"{APT_SOURCES}/*.list: the debootstrap base needs the mirror this machine installs from"
    )


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
