# The exec-time CPU dispatcher of the per-x86-64-level builds: one C file
# beside this recipe, nothing downloaded. The source is "fetched" from this
# folder by a file: URL and checked against the sha256 below, as Spack's own
# compiler-wrapper recipe ships cc.sh; so a change to the C file changes this
# recipe, and with it the spec's hash: the site rebuilds it. (With
# has_code = False the hash would not see the C file, and a changed
# dispatcher would never be rebuilt.)
import pathlib

from spack_repo.builtin.build_systems.generic import Package

from spack.package import *

SOURCE = "onestack-dispatch.c"
# Plain x86-64, not the stack's baseline: on a CPU below the baseline the
# dispatcher must still run, to refuse clearly. -march here, after the
# wrapper's own target flags (Spack's cc puts those first), decides even if
# the spec's target were another; static: see the C file's header. The tests
# (tests/fast/test_dispatch_levels.py) compile with exactly these flags.
COMPILE_FLAGS = ("-std=c11", "-O2", "-march=x86-64", "-mtune=generic", "-static", "-Wall", "-Wextra")
PROGRAM = "onestack-dispatch"
LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


class OnestackDispatch(Package):
    """One entry point per program over a flavor's builds for each x86-64
    level: at exec time, on the node where the program starts, it runs the
    best build that CPU can run (CPUID and XCR0, per the x86-64 psABI
    levels), and refuses a CPU below the stack's baseline. The contract
    (levels.conf, names, exit codes, variables) is the C file's header."""

    homepage = "https://gitlab.com/x86-psABIs/x86-64-ABI"
    url = pathlib.Path(__file__).parent.joinpath(SOURCE).as_uri()

    version("1.0", sha256="be10106b4ecf5225d5c405201fcb9d0963f41521822752cc468e387c7daa7300", expand=False)

    depends_on("c", type="build")

    # The spec says what the binary is: built for the x86-64 baseline, where
    # the stack's own packages default to its oldest CPU generation.
    requires("target=x86_64", msg="onestack-dispatch must run on CPUs below the stack's baseline, to refuse "
             "them clearly: build it for target=x86_64 (the plain x86-64 baseline)")

    sanity_check_is_file = [join_path("bin", PROGRAM)]

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        cc = Executable(spack_cc)
        cc(*COMPILE_FLAGS, "-o", join_path(prefix.bin, PROGRAM), join_path(self.stage.source_path, SOURCE))

    def test_level(self):
        """the dispatcher names this CPU's x86-64 level"""
        dispatcher = Executable(join_path(self.prefix.bin, PROGRAM))
        level = dispatcher("--level", output=str).strip()
        assert level in LEVELS, f"{PROGRAM} --level printed {level!r}"
