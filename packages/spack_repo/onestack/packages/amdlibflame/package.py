# AOCL-LAPACK (AMD's libFLAME) as the site builds it: 4.2, the AOCL release
# whose BLIS, FFTW, ScaLAPACK and utilities the site builds beside it.
#
# 4.2 is declared by its release commit (tag 4.2 of AMD's libflame
# repository), not by the builtin's release archive: a clone of that
# repository can lack the repository's two files of 4 MiB and more (a Netlib
# LAPACK 3.5.0 tarball kept for a maintainer's regeneration script, and a test
# program's recorded output), and then cannot reproduce the archive byte for
# byte. The build reads neither, so offline the site mirror archives the
# commit without them (setup/offline-sources.yaml `omit`); the commit pins
# every other file. The builtin's own patch for 4.2 (a pkg-config file)
# applies unchanged, and the builtin checksum is left as it is.
#
# Code paths: LAPACK's time is spent in the BLAS it calls (AOCL-BLIS, which
# picks its kernels per CPU at run time: packages/.../amdblis). libFLAME's
# own vectorised kernels are compiled for one ISA (LF_ISA_CONFIG), which the
# builtin derives from Spack's target, the site's baseline (none for
# x86_64_v2), so the library runs on every CPU generation of the site.
from spack_repo.builtin.packages.amdlibflame.package import Amdlibflame as BuiltinAmdlibflame

from spack.package import *

# Spack looks a package's builders up in the package's own module.
from spack_repo.builtin.packages.amdlibflame.package import (  # noqa: E402,F401  isort:skip
    AutotoolsBuilder,
    CMakeBuilder,
)


class Amdlibflame(BuiltinAmdlibflame):
    """AOCL-LAPACK 4.2 from its release commit."""

    git = "https://github.com/amd/libflame.git"

    version("4.2", commit="b51ceb238bb3a597c014f371822fc6963b1d5893")

    @when("@4.2")
    def patch(self):
        # Its CMakeLists.txt tunes libFLAME's own code for the build host
        # (-mtune=native, after Spack's flags): the site's library is tuned
        # for no one CPU, as Spack's target flags ask.
        filter_file("-mtune=native", "-mtune=generic", "CMakeLists.txt", string=True)
