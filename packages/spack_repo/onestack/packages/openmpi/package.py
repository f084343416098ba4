# Open MPI as an external from Debian. Debian installs its wrappers as
# mpicc.openmpi, mpif90.openmpi, ... and lets update-alternatives decide which
# MPI the plain /usr/bin/mpicc is (onestack pins it to MPICH). The builtin
# recipe hands dependents <prefix>/bin/mpicc: for a Debian external that is
# MPICH's, and a "Open MPI" flavor would silently be built against MPICH.
import os

from spack_repo.builtin.packages.openmpi.package import Openmpi as BuiltinOpenmpi

from spack.package import *

WRAPPERS = {"MPICC": "mpicc", "MPICXX": "mpicxx", "MPIF77": "mpif77", "MPIF90": "mpif90", "MPIFC": "mpifort"}


class Openmpi(BuiltinOpenmpi):
    """Open MPI, with Debian's suffixed wrapper names when it is the OS's."""

    def _wrapper(self, name):
        suffixed = join_path(self.prefix.bin, f"{name}.openmpi")
        return suffixed if os.path.exists(suffixed) else join_path(self.prefix.bin, name)

    def setup_run_environment(self, env: EnvironmentModifications) -> None:
        super().setup_run_environment(env)
        for var, name in WRAPPERS.items():
            env.set(var, self._wrapper(name))

    def setup_dependent_package(self, module, dependent_spec):
        super().setup_dependent_package(module, dependent_spec)
        self.spec.mpicc = self._wrapper("mpicc")
        self.spec.mpicxx = self._wrapper("mpicxx")
        if not self.spec.satisfies("~fortran"):
            self.spec.mpifc = self._wrapper("mpif90")
            self.spec.mpif77 = self._wrapper("mpif77")
