# The exec-time CPU dispatcher of the per-x86-64-level builds: one C file
# beside this recipe, nothing downloaded (build_systems/one_c_file.py).
import pathlib

from spack_repo.onestack.build_systems.one_c_file import OneCFilePackage

from spack.package import *

SOURCE = "onestack-dispatch.c"
# Plain x86-64, not the stack's baseline: on a CPU below the baseline the
# dispatcher must still run, to refuse clearly; static: see the C file's
# header. The tests (tests/fast/test_dispatch_levels.py) compile with exactly
# these flags.
COMPILE_FLAGS = ("-std=c11", "-O2", "-march=x86-64", "-mtune=generic", "-static", "-Wall", "-Wextra")
PROGRAM = "onestack-dispatch"
LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


class OnestackDispatch(OneCFilePackage):
    """One entry point per program over a flavor's builds for each x86-64
    level: at exec time, on the node where the program starts, it runs the
    best build that CPU can run (CPUID and XCR0, per the x86-64 psABI
    levels), and refuses a CPU below the stack's baseline. The contract
    (levels.conf, names, exit codes, variables) is the C file's header."""

    homepage = "https://gitlab.com/x86-psABIs/x86-64-ABI"
    url = pathlib.Path(__file__).parent.joinpath(SOURCE).as_uri()

    version("1.1", sha256="734e5a53f301ad6ab02eaab11b5bc52bbf0eeb95bd3ffed03ccb373ea591c7e5", expand=False)

    source = SOURCE
    output = join_path("bin", PROGRAM)
    compile_flags = COMPILE_FLAGS

    def test_level(self):
        """the dispatcher names this CPU's x86-64 level"""
        dispatcher = Executable(join_path(self.prefix.bin, PROGRAM))
        level = dispatcher("--level", output=str).strip()
        assert level in LEVELS, f"{PROGRAM} --level printed {level!r}"
