# OpenBLAS as an external from the OS. Debian installs it behind
# update-alternatives (libopenblas.so -> openblas-pthread/libopenblasp-r0.3.21.so),
# and the builtin detection reads the version from the name it is handed, so
# the site resolves the link first.
import os

from spack_repo.builtin.packages.openblas.package import Openblas as BuiltinOpenblas

from spack.package import *


class Openblas(BuiltinOpenblas):
    """OpenBLAS, detectable as an external behind Debian's alternatives links."""

    @classmethod
    def determine_version(cls, lib):
        return super().determine_version(os.path.realpath(lib))

    @classmethod
    def determine_variants(cls, libs, version_str):
        # Debian's default flavour is the pthreads build (libopenblas0-pthread).
        threads = "openmp" if "openmp" in os.path.realpath(libs[0]) else "pthreads"
        return f"threads={threads}"
