# MKL's code path chosen by the CPU's instruction sets on every vendor's CPU:
# a shared library of one function (the C file beside this recipe, its header
# says why), preloaded by the MKL flavors' modules (environments/
# components.yaml, mkl `preload`). Fetched from this folder by a file: URL and
# checked against the sha256 below, as onestack-dispatch is.
import pathlib

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

SOURCE = "onestack-mkl-cpu-path.c"
LIBRARY = "libonestack-mkl-cpu-path.so"


class OnestackMklCpuPath(Package):
    """Lets MKL 2020.1+ pick its code path by the CPU's instruction sets on
    CPUs not made by Intel (where it otherwise runs its generic path)."""

    homepage = "https://www.intel.com/content/www/us/en/developer/tools/oneapi/onemkl.html"
    url = pathlib.Path(__file__).parent.joinpath(SOURCE).as_uri()

    version("1.0", sha256="152d225b4a844ac0f9097cd161db43489c1080aa574387b3eda45632e573234f", expand=False)

    depends_on("c", type="build")

    sanity_check_is_file = [join_path("lib", LIBRARY)]

    def install(self, spec, prefix):
        mkdirp(prefix.lib)
        cc = Executable(spack_cc)
        cc("-O2", "-shared", "-fPIC", "-Wall", "-o", join_path(prefix.lib, LIBRARY),
           join_path(self.stage.source_path, SOURCE))
