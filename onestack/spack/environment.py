"""The flavors as Spack configuration, in the site's state folder
(onestack/stack/site.py: state_dir): the site environment
(.generated/<site>/spack.yaml, rendered from the repository's) and the
.generated/<site>/flavors.yaml it includes, which holds the selected flavors' specs, the
module projections naming their application modules, the CPU baseline every
package is built for, and the site's permissions on the install tree."""

import os
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from onestack import files, paths, spack, stack
from onestack.stack import cpus, site
from onestack.stack.flavors import DISPATCHER, Flavor, package_name, preload_packages, twin_target


def _permissions(site) -> dict:
    """Every user may read the installed software (or the site's group), only
    the building user may write it (Spack's packages:all:permissions)."""
    permissions = {"read": site.permissions["read"], "write": "user"}
    if "group" in site.permissions:
        permissions["group"] = site.permissions["group"]
    return permissions


MANIFEST = paths.REPO / "spack.yaml"
SITE_RECIPES = paths.REPO / "packages" / "spack_repo" / "onestack" / "packages"
# An MPI's module template, below spack.yaml's template_dirs.
MPI_TEMPLATE = "onestack/mpi.lua"
# The placeholders of the repository's spack.yaml that each site's copy fills in.
STATE, SITE_SCOPE = "$ONESTACK_STATE/", "$ONESTACK_SITE_SCOPE"


def _rebased(path: str, state: Path) -> str:
    """A path of the repository's spack.yaml as the site's copy in state
    names it: the state folder's own files by their name, the site scope
    (outside the checkout) absolute, the repository's files relative to the
    folder (the checkout moves: CI jobs hand the environment on)."""
    if path.startswith(STATE):
        return path[len(STATE) :]
    if path == SITE_SCOPE:
        return str(spack.site_scope())
    if path.startswith(("/", "$")):
        return path
    return os.path.relpath(paths.REPO / path, state)


def site_packages() -> List[str]:
    """The packages the site's own recipes build (Spack's names: dashes
    where the recipes' folders have underscores)."""
    return sorted(d.name.replace("_", "-") for d in SITE_RECIPES.iterdir() if (d / "package.py").is_file())


def write_manifest(state: Path) -> Path:
    """The site environment in state: the repository's spack.yaml, its paths
    rebased (Spack has one environment per folder, its spack.lock beside
    its spack.yaml: a folder per site keeps sites apart)."""
    manifest = yaml.safe_load(MANIFEST.read_text())
    env = manifest["spack"]
    env["include"] = [{**entry, "path": _rebased(entry["path"], state)} for entry in env["include"]]
    env["repos:"] = {name: _rebased(path, state) for name, path in env["repos:"].items()}
    # Spack reads a template folder from where it runs, not from the environment.
    env["config"]["template_dirs"] = [str(paths.REPO / path) for path in env["config"]["template_dirs"]]
    env["concretizer"]["reuse"]["exclude"] = site_packages()
    header = f"# Generated from spack.yaml by `onestack render` for {state.name}: do not edit.\n"
    return files.write_text(state / "spack.yaml", header + yaml.safe_dump(manifest, sort_keys=False, width=200))


def _hidden(selected: List[Flavor], preloads: List[str], components: dict) -> List[str]:
    """The builds that are built, never offered, so Spack writes no module of
    them: the benchmark-only builds, the level builds (reached through the
    dispatcher), the dispatcher and the preloaded libraries."""
    hidden = [
        f"{f.app.package} target={twin_target(components, f)}" if f.native else next(iter(f.projection()))
        for f in selected
        if not f.published
    ]
    hidden += sorted({f"{f.app.package} target={target}" for f in selected for _, target in cpus.newer_levels()})
    return hidden + [DISPATCHER.split()[0], *preloads]


def _mpi_templates(components: dict) -> Dict[str, dict]:
    """Each MPI's and translator's module from onestack's template, which
    refuses to load it over a flavor of another MPI: its mpirun would replace
    the flavor's (modulefiles/spack-templates/onestack/mpi.lua)."""
    mpis = [*components["mpis"].values(), *components["translators"].values()]
    return {package_name(mpi["spec"]): {"template": MPI_TEMPLATE} for mpi in mpis}


def render(selected: List[Flavor], state: Optional[Path] = None, ci: bool = False) -> Path:
    """Write the site environment into state (default: the site's state
    folder) with the Spack config of the selected flavors, their level
    builds and the MPI runtimes (with ci, those of `levels.ci_build` and the
    runtimes with `ci_build`); returns the flavors' file."""
    matrix = stack.load()
    projections: Dict[str, str] = {}
    for flavor in sorted(selected, key=lambda f: not f.variants):  # the more specific keys first
        projections.update(flavor.projection())
    preloads = preload_packages(selected)
    config = {
        "definitions": [
            {"flavors": [spec for f in selected for spec in f.specs(ci)]},
            {"runtimes": [r.spec for r in matrix.runtimes if r.ci_build or not ci] + [DISPATCHER, *preloads]},
        ],
        "modules": {
            "default": {
                "lmod": {
                    "projections": projections,
                    "exclude": _hidden(selected, preloads, matrix.components),
                    **_mpi_templates(matrix.components),
                }
            }
        },
        "packages": {"all": {"target": [cpus.baseline_target()], "permissions": _permissions(matrix.site)}},
    }
    state = state or site.state_dir()
    write_manifest(state)
    header = "# Generated by `onestack render` from environments/*.yaml and the site: do not edit.\n"
    return files.write_text(state / "flavors.yaml", header + yaml.safe_dump(config, sort_keys=False, width=200))
