"""The site layer: one center's own facts (sites/<site>/site.yaml), kept
apart from the shared stack data so that a second center uses the
repository unchanged and only selects its own folder (ONESTACK_SITE)."""

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Tuple

from onestack import data, paths

SITE_FILE = "site.yaml"


@dataclass(frozen=True)
class Site:
    file: Path
    description: str
    prefix: Path
    fabric: str
    permissions: Dict[str, str]
    unavailable: Dict[str, Dict[str, str]]  # kind (compilers, mpis, math) -> name -> why
    default_flavors: Dict[str, Dict[str, str]]  # app module -> {flavor, why}
    # app module -> {default: version, deprecated: {version: message}, hidden: [version]}
    versions: Dict[str, dict] = None

    @property
    def name(self) -> str:
        return self.file.parent.name

    def why_unavailable(self, kind: str, name: str) -> Tuple[str, ...]:
        reason = self.unavailable[kind].get(name)
        return (reason,) if reason else ()


@functools.lru_cache(maxsize=None)
def _load(folder: Path) -> Site:
    file = folder / SITE_FILE
    if not file.is_file():
        raise data.InputError(
            f"{file}: no site file: ONESTACK_SITE names a folder of sites/ "
            f"({', '.join(sorted(p.name for p in (paths.data_root() / 'sites').iterdir()))}) "
            "or a path to a folder with a site.yaml"
        )
    site = data.load(file, "site")
    return Site(
        file=file,
        description=site["description"],
        prefix=Path(site["prefix"]),
        fabric=site["fabric"],
        permissions=site["permissions"],
        unavailable={kind: site["unavailable"].get(kind, {}) for kind in ("compilers", "mpis", "math")},
        default_flavors=site["default_flavors"],
        versions=site["versions"],
    )


def prefix() -> Path:
    """The install tree's prefix: ONESTACK_PREFIX (a developer's own tree),
    else the selected site's. Entry points export it (paths.prefix reads
    it): Spack reads the install tree from spack.yaml's $ONESTACK_PREFIX."""
    return Path(os.environ.get("ONESTACK_PREFIX") or load().prefix)


def load() -> Site:
    """The selected site (ONESTACK_SITE; default: sites/default)."""
    return _load(paths.site_dir())
