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
    CPUs not made by Intel (where it otherwise runs its generic path), and
    know their data caches on that path."""

    homepage = "https://www.intel.com/content/www/us/en/developer/tools/oneapi/onemkl.html"
    url = pathlib.Path(__file__).parent.joinpath(SOURCE).as_uri()

    version("1.2", sha256="900b383473ec6624b89bb87615159eb60102b8e459c45b9da8c45edf9dd90d2d", expand=False)

    source = SOURCE
    output = join_path("lib", LIBRARY)
    compile_flags = ("-O2", "-march=x86-64", "-mtune=generic", "-shared", "-fPIC", "-Wall")
