# LAMMPS as the site builds it: the builtin recipe plus the one LAMMPS source
# this stack can verify offline.
from spack_repo.builtin.packages.lammps.package import Lammps as BuiltinLammps

from spack.package import *


class Lammps(BuiltinLammps):
    """LAMMPS 29 Sep 2021 update 2 (stable) and 4 Feb 2025, from Debian's
    source packages."""

    # Debian's lammps_20220106.git7586adbb6a+ds1.orig.tar.xz is the stable
    # branch at 7586adbb6a, which calls itself "29 Sep 2021, Update 2"
    # (src/version.h), repacked without non-free files and the examples' logs.
    # The builtin recipe has update 3 only, and upstream's update-2 archive has
    # another checksum, so the repack is a version of its own. `make mirror`
    # takes it from Debian's source package (setup/offline-sources.yaml).
    version("20210929.2", sha256="65146c615ad24d8b8bc64f4e05e86226a7f1fdb45c0b5ea9416562b9f3863082")
    # Debian trixie's lammps_20250204+dfsg.1.orig.tar.xz: the 4 Feb 2025
    # feature release (src/version.h "4 Feb 2025"), repacked without non-free
    # files. Upstream's archive (the builtin 20250204) has another checksum,
    # so the repack is a version of its own too, named after Debian's.
    version("20250204.dfsg1", sha256="3671165bd52fad36734e0a9136c5bc5ecb225e03988f8c89aa13366a8b53b1c7")

    # Built for the MPI-5 standard ABI (mpich-abi): its C library has no
    # Fortran handle conversions (MPI_Fint, MPI_Comm_f2c/c2f are absent from
    # MPICH 5.0.2's mpi_abi.h and from both MPIs' libmpi_abi.so.1), which
    # only the library interface's Fortran entry points use; they report
    # failure there, as in LAMMPS's own MPI_STUBS build. lmp never calls them.
    patch("mpi-abi-no-fortran-handles.patch", when="@20210929.2 ^mpich-abi")
    # The INTEL package's neighbor list build filled its per-thread cache of
    # the atoms around a bin before checking its size, and crashed where
    # LAMMPS meant to stop with "boost neigh_modify one" (the SPC/E water's
    # 17 A neighbor cutoff did it; tests/test_accelerators.py checks the
    # error). The patch bounds the fill and raises the overflow LAMMPS
    # already reports; a later upstream npair_intel.cpp, read for this,
    # fills the cache the same way.
    patch("intel-neighbor-cache-bound.patch", when="@20250204.dfsg1 +intel")

    def cmake_args(self):
        # LAMMPS's CMake finds MPI with FindMPI, which takes the first mpicxx
        # on PATH: with Debian's Open MPI as the external that is MPICH's (the
        # alternatives point there), and an Open MPI flavor linked MPICH and
        # ran as N one-rank jobs. The MPI recipe's wrappers (mpicxx.openmpi
        # for Debian's Open MPI, packages/.../openmpi) name the right MPI.
        args = super().cmake_args()
        if self.spec.satisfies("+mpi"):
            args += [
                self.define("MPI_C_COMPILER", self.spec["mpi"].mpicc),
                self.define("MPI_CXX_COMPILER", self.spec["mpi"].mpicxx),
            ]
        return args
