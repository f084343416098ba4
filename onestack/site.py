"""The site scope: this machine's facts for Spack, kept outside the repository
($ONESTACK_SITE_SCOPE): externals detected by `spack external find`, and the
local source mirror."""

import hashlib
import os
from pathlib import Path

import yaml

from onestack import paths, spack

EXTERNALS = paths.REPO / "setup" / "externals.yaml"


def scope_dir() -> Path:
    return Path(os.environ["ONESTACK_SITE_SCOPE"])


def _scope_name() -> str:
    """How Spack names the site scope included by spack.yaml."""
    return f"env:{paths.REPO}:{scope_dir()}"


def detect_externals() -> None:
    """Run `spack external find` once per change of setup/externals.yaml."""
    wanted = yaml.safe_load(EXTERNALS.read_text())
    packages = wanted["libraries"] + wanted["build_tools"]
    stamp = scope_dir() / ".externals-detected"
    digest = hashlib.sha256(" ".join(packages).encode()).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest and (scope_dir() / "packages.yaml").is_file():
        print("==> site scope: externals already detected")
        return
    scope_dir().mkdir(parents=True, exist_ok=True)
    spack.run("external", "find", "--scope", _scope_name(), *packages, quiet=True)
    stamp.write_text(digest)
    print(f"==> site scope: externals detected into {scope_dir() / 'packages.yaml'}")


def write_mirror_config() -> None:
    """Point Spack at the local source mirror (sources only, no binaries)."""
    config = {"mirrors": {"onestack-sources": {"url": f"file://{paths.mirror()}", "signed": False,
                                               "binary": False}}}
    scope_dir().mkdir(parents=True, exist_ok=True)
    paths.mirror().mkdir(parents=True, exist_ok=True)
    (scope_dir() / "mirrors.yaml").write_text(yaml.safe_dump(config))
