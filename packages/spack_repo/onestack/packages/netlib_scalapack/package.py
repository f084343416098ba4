# ScaLAPACK as an external from the OS, built there against OpenBLAS (not the
# reference BLAS). The builtin recipe has no detection and looks only for a
# library named libscalapack; Debian names it after the MPI it was built with.
import os

from spack_repo.builtin.packages.netlib_scalapack.package import (
    NetlibScalapack as BuiltinNetlibScalapack,
)
from spack_repo.onestack.packages.fftw.package import _pkgconfig_version

from spack.package import *


class NetlibScalapack(BuiltinNetlibScalapack):
    """ScaLAPACK, detectable as an external (the OS's MPICH build)."""

    # One library per MPI (libscalapack-mpich, libscalapack-openmpi): only the
    # MPICH-family one is detected, as the flavors use it with MPICH-ABI MPIs.
    libraries = [r"^libscalapack-mpich\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return _pkgconfig_version(lib, "scalapack-mpich.pc")

    @property
    def libs(self):
        if self.spec.external:
            return find_libraries("libscalapack-mpich", root=self.prefix, recursive=True)
        return super().libs
