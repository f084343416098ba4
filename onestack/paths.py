"""Where things are: the repository, and the locations setup/env.sh exports."""

import os
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


class SetupError(RuntimeError):
    """The machine is not set up as onestack expects; the message says the fix."""


def _from_env(name: str) -> Path:
    value = os.environ.get(name)
    if not value:
        raise SetupError(f"{name} is not set: run onestack through bin/onestack or make")
    return Path(value)


def environments_dir() -> Path:
    """The flavor data; ONESTACK_ENVIRONMENTS points elsewhere (tests do)."""
    return Path(os.environ.get("ONESTACK_ENVIRONMENTS", REPO / "environments"))


def generated_dir() -> Path:
    """Spack config rendered from the flavor data (included by spack.yaml)."""
    return REPO / ".generated"


def prefix() -> Path:
    return _from_env("ONESTACK_PREFIX")


def cache() -> Path:
    return _from_env("ONESTACK_CACHE")


def spack_root() -> Path:
    return _from_env("SPACK_ROOT")


def site_scope() -> Path:
    """This machine's Spack facts (detected externals, mirrors), outside the repo."""
    return _from_env("ONESTACK_SITE_SCOPE")


def mirror() -> Path:
    return _from_env("ONESTACK_MIRROR")


def source_cache() -> Path:
    """Spack's own download cache (config:source_cache in spack.yaml)."""
    return _from_env("ONESTACK_SOURCE_CACHE")


def modules_root() -> Path:
    """Published module trees: releases/<id>/ and the `current` link
    (ONESTACK_MODULES points elsewhere: tests publish into scratch folders)."""
    return Path(os.environ.get("ONESTACK_MODULES", prefix() / "modules"))


def _host_cpu():
    """This machine's CPU from the archspec vendored in the pinned Spack, so
    that its names are the ones Spack accepts."""
    import sys

    sys.path.insert(0, str(spack_root() / "lib" / "spack"))
    from spack.vendor.archspec import cpu  # noqa: E402

    return cpu.host()


def host_target() -> str:
    """This machine's CPU as Spack names it (e.g. icelake, zen)."""
    return _host_cpu().name


def host_x86_64_level() -> str:
    """The highest x86-64 microarchitecture level this CPU has (v3 for Zen and
    Haswell, v4 with AVX-512)."""
    host = _host_cpu()
    return max(t.name.removeprefix("x86_64_") for t in [host, *host.ancestors] if t.name.startswith("x86_64_v"))

