# pympistandard, the MPI Forum's Python model of the MPI standard, which
# Open MPI 6's build runs to generate its MPI-5 standard ABI bindings. Open
# MPI's tree pins it as a git submodule at a commit no clone here holds; the
# PyPI wheel of its 0.2.0 release is what set-up lays out instead
# (setup/vendor.yaml), declared as this external.
import glob

from spack.package import *


class PyPympistandard(Package):
    """pympistandard 0.2.0 (the MPI Forum's API model), as an external only."""

    homepage = "https://github.com/mpi-forum/pympistandard"
    has_code = False

    version("0.2.0")

    def install(self, spec, prefix):
        raise InstallError("py-pympistandard is the PyPI wheel set-up lays out (setup/vendor.yaml): an external only")

    def setup_dependent_build_environment(self, env, dependent_spec):
        # Open MPI's generators import it from their --pympistd-dir, else from sys.path.
        for folder in glob.glob(join_path(self.prefix.lib, "python3*", "site-packages")):
            env.prepend_path("PYTHONPATH", folder)
