# AOCL-BLIS as the site builds it: one library for every CPU generation.
#
# The builtin recipe hands BLIS a configuration taken from Spack's target: a
# named one (x86_64, zen, zen2) where the target is exactly that, else "auto",
# BLIS's own guess of the build host. The stack builds for the site's oldest
# CPU generation (x86_64_v2 at sites/default), which is none of those, so on
# a Zen 4 build host the library held Zen 4 kernels only: an illegal
# instruction on every Intel generation of the site.
#
# The site builds BLIS's `x86_64` configuration family instead: every kernel
# set of AOCL-BLIS 4.2's registry (Intel: skx, knl, haswell, sandybridge,
# penryn; AMD: zen4, zen3, zen2, zen, the bulldozer line; generic), each
# compiled with its own flags, and BLIS picks the one for the CPU it runs on
# from CPUID at run time (`BLIS_ARCH_DEBUG=1` prints its choice), generic
# where none fits. The sources are the builtin version's release archive.
from spack_repo.builtin.packages.amdblis.package import Amdblis as BuiltinAmdblis

from spack.package import *

# BLIS's configuration family of every x86-64 kernel set (config_registry).
FAT_CONFIGURATION = "x86_64"


class Amdblis(BuiltinAmdblis):
    """AOCL-BLIS with every x86-64 kernel set, chosen per CPU at run time."""

    def edit(self, spec, prefix):
        # The builtin edit() appends the target-derived configuration last;
        # configure takes exactly one, so the family replaces it here.
        configure(f"--prefix={prefix}", *self.configure_args(), FAT_CONFIGURATION)
