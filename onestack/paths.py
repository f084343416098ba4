"""Where things are: the repository, its data, the selected site, and the
locations setup/env.sh exports (everything big lives outside the repository)."""

import os
import re
from pathlib import Path

from onestack.errors import OnestackError

REPO = Path(__file__).resolve().parent.parent
# The templates of what a release holds: flavor modules, init script, the
# dispatcher's table (read by publish, and by the images for their table).
MODULE_TEMPLATES = REPO / "modulefiles" / "templates"


class SetupError(OnestackError):
    """The machine is not set up as onestack expects; the message says the fix."""


def _from_env(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise SetupError(f"{name} is not set: run onestack through bin/onestack or make")
    return Path(value)


def data_root() -> Path:
    """Where the stack's data files are (environments/, setup/, sites/,
    tests/problems/, ...): the repository, or ONESTACK_DATA_ROOT (the
    bad-input tests point it at an edited copy)."""
    return Path(os.environ.get("ONESTACK_DATA_ROOT", REPO))


def environments_dir() -> Path:
    return data_root() / "environments"


def site_dir() -> Path:
    """The selected site's folder: ONESTACK_SITE names one under sites/, or
    is a path (a center may keep its site folder in a repository of its own)."""
    name = os.environ.get("ONESTACK_SITE", "default")
    return Path(name) if "/" in name else data_root() / "sites" / name


def prefix() -> Path:
    """The install tree, module releases and images: ONESTACK_PREFIX, which
    every entry point sets, the selected site's `prefix` unless given
    (onestack/stack/site.py: prefix)."""
    return _from_env("ONESTACK_PREFIX")


def cache() -> Path:
    return _from_env("ONESTACK_CACHE")


def give_back_cache() -> None:
    """Under sudo the cache is the invoking user's (setup/env.sh): what root
    wrote there (Spack's caches, the cluster's state) is given back to the
    cache's owner, whose own runs could not write over it."""
    folder = cache()
    if os.geteuid() != 0 or not os.environ.get("SUDO_USER") or not folder.is_dir():
        return
    owner = folder.stat()
    if owner.st_uid == 0:
        return
    for top, dirs, names in os.walk(folder):
        for path in [top, *(os.path.join(top, name) for name in dirs + names)]:
            if os.lstat(path).st_uid == 0:
                os.lchown(path, owner.st_uid, owner.st_gid)


def spack_root() -> Path:
    return _from_env("SPACK_ROOT")


def spack_packages() -> Path:
    """The pinned clone of Spack's builtin packages."""
    return _from_env("ONESTACK_SPACK_PACKAGES")


def spack_misc_cache() -> Path:
    """Spack's misc cache, its recipes' index among it (spack.yaml:
    config:misc_cache, under SPACK_USER_CACHE_PATH)."""
    return _from_env("SPACK_USER_CACHE_PATH") / "cache"


def mirror() -> Path:
    return _from_env("ONESTACK_MIRROR")


def source_cache() -> Path:
    """Spack's own download cache (config:source_cache in spack.yaml)."""
    return _from_env("ONESTACK_SOURCE_CACHE")


def modules_root() -> Path:
    """Published module trees: releases/<id>/ and the `current` link
    (ONESTACK_MODULES points elsewhere: tests publish into scratch folders)."""
    return Path(os.environ.get("ONESTACK_MODULES", prefix() / "modules"))


def pinned(pins: str, key: str) -> str:
    """KEY=value of a pin file of setup/ (spack-pins.sh, apptainer-pins.sh):
    the shell scripts source them, the code reads the same line."""
    file = REPO / "setup" / pins
    found = re.search(rf"^{key}=(\S+)", file.read_text(), re.MULTILINE)
    if not found:
        raise SetupError(f"{file}: no {key}= line")
    return found.group(1)
