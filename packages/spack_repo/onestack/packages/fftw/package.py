# FFTW as an external from the OS. The builtin recipe cannot be detected by
# `spack external find` (it declares no `libraries`), and building it offline is
# blocked by a patch the builtin recipe downloads; so the site adds detection.
import os
import re

from spack_repo.builtin.packages.fftw.package import Fftw as BuiltinFftw

from spack.package import *


def _pkgconfig_version(lib_path, pc_name):
    """Version from the pkg-config file installed beside a detected library."""
    pc_file = os.path.join(os.path.dirname(lib_path), "pkgconfig", pc_name)
    if not os.path.isfile(pc_file):
        return None
    with open(pc_file) as pc:
        match = re.search(r"^Version:\s*(\S+)", pc.read(), re.MULTILINE)
    return match.group(1) if match else None


class Fftw(BuiltinFftw):
    """FFTW, detectable as an external (the OS build) by `spack external find`."""

    libraries = [r"^libfftw3\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return _pkgconfig_version(lib, "fftw3.pc")

    @classmethod
    def determine_variants(cls, libs, version_str):
        libdir = os.path.dirname(libs[0])
        suffixes = {"float": "f", "double": "", "long_double": "l", "quad": "q"}
        precisions = [
            name for name, sfx in suffixes.items() if os.path.exists(os.path.join(libdir, f"libfftw3{sfx}.so"))
        ]
        has_omp = os.path.exists(os.path.join(libdir, "libfftw3_omp.so"))
        # ~mpi: the OS's libfftw3_mpi is built for one MPI (Debian: Open MPI), and
        # QE and HPL only use serial FFTW (QE distributes its FFTs itself).
        return "precision={0} ~mpi {1}openmp".format(",".join(precisions), "+" if has_omp else "~")
