# MKL's code path chosen by the CPU's instruction sets on every vendor's CPU:
# a shared library of one function (the C file beside this recipe; its header
# says why), preloaded by the MKL flavors' modules and images
# (environments/components.yaml, mkl `preload`).
import pathlib

from spack_repo.onestack.build_systems.one_c_file import OneCFilePackage

from spack.package import *

SOURCE = "onestack-mkl-cpu-path.c"
LIBRARY = "libonestack-mkl-cpu-path.so"


class OnestackMklCpuPath(OneCFilePackage):
    """Lets MKL 2020.1+ pick its code path by the CPU's instruction sets on
    CPUs not made by Intel (where it otherwise runs its generic path)."""

    homepage = "https://www.intel.com/content/www/us/en/developer/tools/oneapi/onemkl.html"
    url = pathlib.Path(__file__).parent.joinpath(SOURCE).as_uri()

    version("1.0", sha256="152d225b4a844ac0f9097cd161db43489c1080aa574387b3eda45632e573234f", expand=False)

    source = SOURCE
    output = join_path("lib", LIBRARY)
    compile_flags = ("-O2", "-march=x86-64", "-mtune=generic", "-shared", "-fPIC", "-Wall")
