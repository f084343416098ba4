# libxml2 as an external from the OS (MVAPICH2's embedded hwloc links it). The
# builtin recipe cannot be detected by `spack external find` (it declares no
# `libraries` or `executables`), and building it offline would need its release
# archive, which no registry here carries; so the site adds detection.
from spack_repo.builtin.packages.libxml2.package import Libxml2 as BuiltinLibxml2
from spack_repo.onestack.packages.fftw.package import _pkgconfig_version

from spack.package import *


class Libxml2(BuiltinLibxml2):
    """libxml2, detectable as an external (the OS build) by `spack external find`."""

    libraries = [r"^libxml2\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return _pkgconfig_version(lib, "libxml-2.0.pc")
