# libevent as an external from the OS (Open MPI 6's PMIx and PRRTE link it).
# The builtin recipe cannot be detected by `spack external find` (it declares
# no `libraries`); so the site adds detection, as for libpciaccess.
from spack_repo.builtin.packages.libevent.package import Libevent as BuiltinLibevent
from spack_repo.onestack.packages.fftw.package import _pkgconfig_version

from spack.package import *


class Libevent(BuiltinLibevent):
    """libevent, detectable as an external (the OS build) by `spack external find`."""

    libraries = [r"^libevent\.so$"]

    @classmethod
    def determine_version(cls, lib):
        return _pkgconfig_version(lib, "libevent.pc")
