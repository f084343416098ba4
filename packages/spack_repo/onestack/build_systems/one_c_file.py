"""Site packages built from one C file kept beside their recipe, nothing
downloaded (onestack-dispatch, onestack-mkl-cpu-path). The recipe's url is
the file itself (file:) and its sha256 the file's, as Spack's own
compiler-wrapper recipe ships cc.sh: so a change to the C file changes the
recipe, and with it the spec's hash, and the site rebuilds it: a change
to the file comes with a new version, and spack.yaml keeps Spack from
reusing the installed one (concretizer: reuse: exclude). (With has_code =
False the hash would not see the file.)

Both run on every x86-64 CPU, also one below the stack's baseline: the
dispatcher must run there to refuse clearly, and a preloaded library is
loaded by every program of a user's shell. So they are built for plain
x86-64: each recipe's compile_flags hold -march=x86-64, which, after the
wrapper's own target flags (Spack's cc puts those first), decides even if
the spec's target were another."""

import os

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *


class OneCFilePackage(Package):
    """Compiles `source` (beside the recipe) into `output` (below the prefix)
    with `compile_flags`, for target=x86_64."""

    source = ""
    output = ""
    compile_flags = ()

    depends_on("c", type="build")

    requires(
        "target=x86_64",
        msg="built from one C file to run on every x86-64 CPU, also below the stack's "
        "baseline: build it for target=x86_64 (the plain x86-64 baseline)",
    )

    def install(self, spec, prefix):
        out = join_path(prefix, self.output)
        mkdirp(os.path.dirname(out))
        Executable(spack_cc)(*self.compile_flags, "-o", out, join_path(self.stage.source_path, self.source))

    @property
    def sanity_check_is_file(self):
        return [self.output]
