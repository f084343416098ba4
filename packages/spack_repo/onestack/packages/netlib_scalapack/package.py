# ScaLAPACK as an external from the OS, built there against OpenBLAS (not the
# reference BLAS). The builtin recipe has no detection and looks only for a
# library named libscalapack; Debian builds it once per MPI and names each
# library after it (libscalapack-mpich, libscalapack-openmpi).
import os
import re

from spack_repo.builtin.packages.netlib_scalapack.package import (
    NetlibScalapack as BuiltinNetlibScalapack,
)
from spack_repo.onestack.packages.fftw.package import _pkgconfig_version

from spack.package import *

LIBRARY = re.compile(r"^libscalapack-(mpich|openmpi)\.so$")


class NetlibScalapack(BuiltinNetlibScalapack):
    """ScaLAPACK, detectable as an external: one per MPI family of the OS's builds."""

    libraries = [LIBRARY.pattern]

    # A process holds one MPI: an Open MPI flavor that linked the MPICH build
    # loaded libmpich.so.12 beside libmpi.so.40 (caught by
    # tests/test_mpi_abi.py). The variant says which OS build an external is;
    # Spack's own builds (none) link the MPI they depend on. The site's QE
    # recipe pairs each flavor's MPI with the OS build of that very MPI
    # (MPICH's, Open MPI's) and refuses both for Intel MPI and MVAPICH2, which
    # then get Spack's build. (The variant, not a `%mpi` requirement: Spack
    # counts an external as satisfying any `%` edge, as a build dependency.)
    variant(
        "mpi_family",
        default="none",
        values=("mpich", "openmpi", "none"),
        description="The MPI whose OS build of the library this external is (none: Spack's build)",
    )

    @classmethod
    def determine_version(cls, lib):
        family = LIBRARY.match(os.path.basename(lib)).group(1)
        return _pkgconfig_version(lib, f"scalapack-{family}.pc")

    @classmethod
    def determine_variants(cls, libs, version_str):
        return [f"mpi_family={LIBRARY.match(os.path.basename(lib)).group(1)}" for lib in libs]

    @property
    def libs(self):
        if self.spec.external:
            # Installs from before the variant existed are MPICH builds.
            family = "openmpi" if self.spec.satisfies("mpi_family=openmpi") else "mpich"
            return find_libraries(f"libscalapack-{family}", root=self.prefix, recursive=True)
        return super().libs
