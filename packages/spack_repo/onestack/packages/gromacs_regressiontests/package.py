# GROMACS's own regression tests: inputs with reference energies, forces and
# logs, per GROMACS release. Never built or installed by the stack: the test
# problems (tests/problems/gromacs/) take their files from this version's
# verified archive, as the problems of the other applications take theirs from
# the application's own source archive.
from spack.package import *


class GromacsRegressiontests(Package):
    """The regression tests of a GROMACS release (reference_s.tpr, .edr, .log
    of each case, made by that release)."""

    homepage = "https://www.gromacs.org/"
    url = "https://ftp.gromacs.org/regressiontests/regressiontests-2022.5.tar.gz"

    # Debian bookworm's component tarball gromacs_2022.5.orig-regressiontests.tar.gz
    # (top folder regressiontests-2022.5/, the upstream archive's): its own
    # checksum, taken by `make mirror` from Debian's source package.
    version("2022.5", sha256="65db032e1c91704911bafa5c004864f4cc53dcb1db52933a5fcb0f15670820ce")

    def install(self, spec, prefix):
        install_tree(".", prefix.share.regressiontests)
