# libpciaccess as an external from the OS (MVAPICH2's embedded hwloc links it).
# The builtin recipe cannot be detected by `spack external find` (it declares
# no `libraries`), and building it offline would need X.Org's release archive,
# which no registry here carries; so the site adds detection.
from spack_repo.builtin.packages.libpciaccess.package import Libpciaccess as BuiltinLibpciaccess
from spack_repo.onestack.packages.fftw.package import _pkgconfig_version

from spack.package import *


class Libpciaccess(BuiltinLibpciaccess):
    """libpciaccess, detectable as an external (the OS build) by `spack external find`."""

    libraries = [r"^libpciaccess\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return _pkgconfig_version(lib, "pciaccess.pc")
