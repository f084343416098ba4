"""This machine's Debian entries in its apt configuration, in either format:
the deb822 stanzas of sources.list.d/*.sources (Debian's cloud images), then
the one-line `deb` entries of sources.list and sources.list.d/*.list
(bookworm's installer writes those). Only entries with the component main
count: not a third party's of the same suite (e.g. Docker's).

The image base takes its debootstrap mirror from them (onestack/images/base.py),
and setup/debian-source.sh its deb-src entry of a newer suite, as
`python3 -m onestack.apt_sources`: the standard library alone, so that it runs
with the system's Python before any venv exists."""

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional

from onestack.errors import OnestackError

APT_SOURCES = Path("/etc/apt/sources.list.d")
OS_RELEASE = Path("/etc/os-release")


@dataclass(frozen=True)
class Entry:
    file: Path
    uris: List[str]
    suites: List[str]
    signed_by: str  # a keyring's path, or "" (apt's default keyrings)


def release_codename() -> str:
    found = re.search(r"^VERSION_CODENAME=\"?([a-z]+)", OS_RELEASE.read_text(), re.MULTILINE)
    if not found:
        raise OnestackError(f"{OS_RELEASE}: no VERSION_CODENAME: not a Debian release?")
    return found.group(1)


def _stanzas(text: str) -> List[Dict[str, str]]:
    """deb822 stanzas as {field: value} (continuation lines ignored: URIs and
    Suites are one-line fields; a key embedded in Signed-By is left to apt's
    default keyrings)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", text):
        fields = dict(m.groups() for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", block, re.MULTILINE))
        if fields:
            stanzas.append(fields)
    return stanzas


def _one_line(file: Path, line: str) -> Optional[Entry]:
    """deb [option=value ...] URI SUITE COMPONENT..."""
    options = re.search(r"\[([^]]*)\]", line)
    keys = [
        o.removeprefix("signed-by=")
        for o in (options.group(1).split() if options else [])
        if o.startswith("signed-by=")
    ]
    words = re.sub(r"\[[^]]*\]", " ", line).split()
    if len(words) >= 4 and words[0] == "deb" and "main" in words[3:]:
        return Entry(file, [words[1]], [words[2]], keys[0] if keys else "")
    return None


def entries() -> Iterator[Entry]:
    for sources in sorted(APT_SOURCES.glob("*.sources")):
        for stanza in _stanzas(sources.read_text()):
            if stanza.get("URIs") and "main" in stanza.get("Components", "").split():
                yield Entry(
                    sources, stanza["URIs"].split(), stanza.get("Suites", "").split(), stanza.get("Signed-By", "")
                )
    for listing in [APT_SOURCES.parent / "sources.list", *sorted(APT_SOURCES.glob("*.list"))]:
        for line in listing.read_text().splitlines() if listing.is_file() else []:
            entry = _one_line(listing, line)
            if entry:
                yield entry


def release_entry() -> Entry:
    """The first Debian entry of this machine's own release."""
    codename = release_codename()
    found = next((e for e in entries() if codename in e.suites), None)
    if found is None:
        raise OnestackError(
            f"no Debian entry for {codename} (with the component main) in {APT_SOURCES}/*.sources, "
            f"{APT_SOURCES.parent}/sources.list or {APT_SOURCES}/*.list"
        )
    return found


if __name__ == "__main__":
    # For setup/debian-source.sh: the entry's URIs and keyring, tab-separated.
    try:
        entry = release_entry()
    except OnestackError as err:
        sys.exit(f"error: {err}")
    print(" ".join(entry.uris) + "\t" + entry.signed_by)
