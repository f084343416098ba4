"""Versions of an application side by side (one environments/ file each,
one module name): `<app>/<flavor>` names the site's default version, else
the newest; the others are named with their version, everywhere the stack
names a flavor (modules, images, results, dispatch folders)."""

import re
import shutil

import yaml

from onestack import paths, stack
from onestack.images import flavor as images
from onestack.modules import dispatch, publish

NEWER, OLDER = "lmp/openblas-mpich-omp", "lmp/openblas-mpich-omp/20210929.2"


def test_the_newest_version_takes_the_unversioned_name():
    matrix = stack.load()
    newer, older = matrix.flavor(NEWER), matrix.flavor(OLDER)
    assert newer.app.version == "20250204.dfsg1" and newer.default_version and not older.default_version
    assert matrix.flavor(newer.versioned_name) is newer, "the default version answers to its full name too"
    assert images.image_name(newer) == "lmp-openblas-mpich-omp"
    assert images.image_name(older) == "lmp-openblas-mpich-omp-20210929.2"
    assert dispatch.bin_dir(paths.REPO, newer) != dispatch.bin_dir(paths.REPO, older)


def test_a_flavor_of_one_version_keeps_its_name():
    """lmp/openblas-mpiabi exists in the 2021 release only: it is that version's."""
    assert stack.load().flavor("lmp/openblas-mpiabi").app.version == "20210929.2"


def test_a_native_twin_is_versioned_as_its_flavor():
    twin = next(f for f in stack.load().flavors if f.native and f.app.module == "lmp")
    assert twin.twin_of == f"lmp/{twin.flavor_name}/{twin.app.version}"
    assert stack.load().flavor(twin.twin_of).name == twin.flavor_name


def test_the_site_picks_the_default_version(tmp_path, monkeypatch):
    site = yaml.safe_load((paths.REPO / "sites" / "default" / "site.yaml").read_text())
    site["versions"] = {"lmp": {"default": "20210929.2"}}
    shutil.copytree(paths.REPO / "sites" / "default", tmp_path / "site")
    (tmp_path / "site" / "site.yaml").write_text(yaml.safe_dump(site))
    monkeypatch.setenv("ONESTACK_SITE", str(tmp_path / "site"))
    matrix = stack.load()
    assert matrix.flavor("lmp/openblas-mpich-omp").app.version == "20210929.2"
    assert matrix.flavor("lmp/openblas-mpich-omp/20250204.dfsg1").default_version is False
    assert matrix.flavor("lmp/openblas-mpich").is_default, "module load lmp: the site's version of its flavor"


def test_a_version_that_defines_a_flavor_it_does_not_build_leaves_its_name_to_the_one_that_does():
    """LAMMPS 2025 defines openblas-openmpi (a cell of its matrix) but does
    not build it; the 2021 release builds it. `lmp/openblas-openmpi`, the
    name users load, means the 2021 build everywhere the stack names it."""
    matrix = stack.load()
    built = matrix.flavor("lmp/openblas-openmpi")
    assert built.app.version == "20210929.2" and built in matrix.select()
    assert images.image_name(built) == "lmp-openblas-openmpi"
    assert matrix.flavor("lmp/openblas-openmpi/20250204.dfsg1") not in matrix.select()


def loads(release, module: str) -> str:
    return re.search(r'module_version\("([^"]+)", "default"\)', (release / module / ".modulerc.lua").read_text())[1]


def test_publish_makes_the_unversioned_name_load_the_version_the_stack_means(tmp_path):
    """What `module load lmp/openblas-openmpi` loads is the stack's default
    version where it is published (though a newer one is published beside
    it), else the newest published."""
    matrix = stack.load()
    older, newer = (matrix.flavor(n) for n in ("lmp/openblas-openmpi", "lmp/openblas-openmpi/20250204.dfsg1"))
    publish._defaults(tmp_path / "both", [older, newer])
    assert loads(tmp_path / "both" / "flavors", "lmp/openblas-openmpi") == "lmp/openblas-openmpi/20210929.2"
    publish._defaults(tmp_path / "newer", [newer])
    assert loads(tmp_path / "newer" / "flavors", "lmp/openblas-openmpi") == "lmp/openblas-openmpi/20250204.dfsg1"
