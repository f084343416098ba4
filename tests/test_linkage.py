"""Each built flavor's program loads its own math library and never another
family's: left to itself, QE 7.5's CMake looked for MKL first and linked
Debian's MKL (in the system library folder) into an OpenBLAS flavor, whose
problems still passed (packages/.../quantum_espresso: CMakeBuilder). Read
with ldd, as the loader resolves the program's own RPATHs."""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import built_levels, require_published, run_flavors

from onestack import stack

# What each family's libraries are, by the real path a program loads (Debian
# reaches OpenBLAS and the Netlib reference through the same alternatives
# names, libblas.so.3 and liblapack.so.3; its ScaLAPACK links those names).
# A family's programs may load none of them (LAMMPS links FFTW alone).
FAMILY_PATHS = {
    "openblas": ("libopenblas", "/openblas-"),
    "mkl": ("libmkl_",),
    "aocl": ("libblis", "libflame", "libalm"),
    "netlib": ("/blas/libblas", "/lapack/liblapack"),
}


def _loaded(program: Path) -> list:
    """The real paths of the libraries the loader resolves for program."""
    proc = subprocess.run(["ldd", str(program)], text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    found = [line.split("=>")[1].split()[0] for line in proc.stdout.splitlines() if "=> /" in line]
    return [os.path.realpath(path) for path in found]


def _of(family: str, loaded: list) -> list:
    return [path for path in loaded if any(mark in path for mark in FAMILY_PATHS[family])]


@pytest.mark.parametrize("module", [f.module_name for f in run_flavors()])
def test_a_flavor_loads_no_other_math_family(module, live_release, published_flavors):
    """In every level build its entry point may run."""
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    builds = built_levels(live_release, flavor)
    assert builds, f"{module}: no build in its release's levels"
    for build in builds.values():
        program = Path(build) / flavor.app.program
        loaded = _loaded(program)
        others = {name: _of(name, loaded) for name in FAMILY_PATHS if name != flavor.math}
        wrong = {name: libs for name, libs in others.items() if libs}
        assert not wrong, f"{module} ({flavor.math}) loads another family's libraries: {wrong} ({program})"
        if "blas" in flavor.app.math_uses:
            assert _of(flavor.math, loaded), f"{module} loads none of its own {flavor.math} libraries: {program}"
