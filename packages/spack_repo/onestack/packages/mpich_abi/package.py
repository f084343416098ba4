# MPICH 5's implementation of the MPI-5 standard ABI (libmpi_abi.so.1,
# mpi_abi.h), from the PyPI wheel that set-up lays out (setup/vendor.yaml):
# Spack's builtin mpich recipe stops at 4.3 and knows no ABI. A flavor built
# with it links libmpi_abi.so.1 alone and runs, the same file, on every MPI
# that implements the standard ABI (MPICH 5, Intel MPI 2021.18's own
# libmpi_abi.so.1, Open MPI 6), chosen at run time by LD_LIBRARY_PATH.
from spack.package import *


class MpichAbi(Package):
    """MPICH 5.0.2 for the MPI-5 standard ABI (C and C++: no
    implementation-neutral Fortran ABI exists), as an external only."""

    homepage = "https://www.mpich.org"
    has_code = False

    version("5.0.2")
    provides("mpi@:5")

    def install(self, spec, prefix):
        raise InstallError("mpich-abi is the PyPI wheel set-up lays out (setup/vendor.yaml): an external only")

    @property
    def libs(self):
        return find_libraries("libmpi_abi", self.prefix.lib, shared=True)

    @property
    def headers(self):
        return HeaderList([join_path(self.prefix.include, "mpi_abi.h")])

    def setup_dependent_package(self, module, dependent_spec):
        # The wheel's ABI wrappers: -DMPI_ABI, its mpi_abi.h, -lmpi_abi.
        self.spec.mpicc = join_path(self.prefix.bin, "mpicc_abi")
        self.spec.mpicxx = join_path(self.prefix.bin, "mpicxx_abi")

    def setup_dependent_build_environment(self, env, dependent_spec):
        env.set("MPICC", join_path(self.prefix.bin, "mpicc_abi"))
        env.set("MPICXX", join_path(self.prefix.bin, "mpicxx_abi"))
