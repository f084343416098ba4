"""The site layer: one center's own facts (sites/<site>/site.yaml), kept
apart from the shared stack data so that a second center uses the
repository unchanged and only selects its own folder (ONESTACK_SITE)."""

import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

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
    compilers: Dict[str, dict]  # compiler -> Spack external (spec, prefix, extra_attributes)
    mpi_settings: Dict[str, dict]  # MPI -> its runtime settings here, over components.yaml's
    # app module -> {default: version, deprecated: {version: message}, hidden: [version]}
    cpu_generations: List[str]  # names of environments/cpus.yaml's generations, oldest first
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
    if not data.FILE_STEM.fullmatch(folder.name):
        # The name goes into state folder names and the header of the
        # generated spack.yaml.
        raise data.InputError(
            f"ONESTACK_SITE={folder}: a site folder is named with letters, digits and . _ + - "
            f"({folder.name!r} is not): rename it"
        )
    if not file.is_file():
        raise data.InputError(
            f"{data.location(file)}: no site file: ONESTACK_SITE names a folder of sites/ "
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
        compilers=site["compilers"],
        mpi_settings=site["mpi_settings"],
        versions=site["versions"],
        cpu_generations=site["cpu_generations"],
    )


def prefix() -> Path:
    """The install tree's prefix: ONESTACK_PREFIX (a developer's own tree),
    else the selected site's. Entry points export it (paths.prefix reads
    it): Spack reads the install tree from spack.yaml's $ONESTACK_PREFIX.
    Checked with ONESTACK_MODULES (tests' scratch module trees) as the site
    file's `prefix` is: both land in every module users load, in Lua
    strings Spack's module templates write unescaped."""
    for name in ("ONESTACK_PREFIX", "ONESTACK_MODULES"):
        _check_location(name, os.environ.get(name, ""))
    return Path(os.environ.get("ONESTACK_PREFIX") or load().prefix)


def _check_location(name: str, value: str) -> None:
    allowed = data.schema("site")["properties"]["prefix"]["pattern"]
    if value and not re.fullmatch(allowed, value):
        raise data.InputError(
            f"{name}={value!r}: not a path the site file's `prefix` allows ({allowed}: absolute, letters, "
            "digits and . _ / + -); it goes into every module users load: choose such a path"
        )


def load() -> Site:
    """The selected site (ONESTACK_SITE; default: sites/default)."""
    return _load(paths.site_dir())


def state_key() -> str:
    """The name of this site's state folders: the site's name at the prefix
    that name has in this checkout (`.generated/default/`, the name the
    pipeline file triggers: sites/<name>/'s prefix, or the site's own where
    the checkout has no site of that name), else the name and a digest of
    the prefix, so that a second prefix (a developer's tree, another
    center's site folder of the same name) gets folders of its own. The
    prefix, not the site folder, is what a site's installs and modules are:
    a copy of the site folder edited elsewhere (its `versions`, say) at the
    same prefix is the same site, and shares its lock and scope."""
    own = load()
    namesake = paths.data_root() / "sites" / own.name
    named_prefix = _load(namesake).prefix if (namesake / SITE_FILE).is_file() else own.prefix
    if prefix() == named_prefix:
        return own.name
    return f"{own.name}-{hashlib.sha256(str(prefix()).encode()).hexdigest()[:8]}"


def state_dir() -> Path:
    """What onestack generates for this site and prefix in the checkout
    (.generated/<key>/): the Spack environment (spack.yaml rendered from the
    repository's, the .generated/<key>/flavors.yaml it includes, and Spack's
    spack.lock and .spack-env/), the
    pipeline's child files, the image definitions. Two sites build from one
    checkout without touching each other's."""
    return paths.REPO / ".generated" / state_key()


def cache_dir() -> Path:
    """What is cached for this site and prefix ($ONESTACK_CACHE/sites/<key>/):
    Spack's site scope (externals, and vendor layouts under the prefix), the
    flavor table's solves, the image signing key, ReFrame's runs. Sources, the
    buildcache and the virtualenvs, which no site changes, stay shared."""
    return paths.cache() / "sites" / state_key()
