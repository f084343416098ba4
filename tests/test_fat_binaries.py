"""One entry point per program for every CPU generation of the site
(its site file's cpu_generations). On this host, whatever its CPU: each level build
carries that level's instructions (none above SSE in the baseline, AVX
in v3, AVX-512 in v4), and each level the host can run passes its problem
natively; a level above the host is reported as built, not run here. Under
qemu emulating each generation, the published flavors that together run
every application, MPI, math library, threading and level choice once (each
other flavor is named with the ones that cover it): each one's
entry point (onestack-dispatch) names the level it
chose, the newest its builds have that the emulated CPU runs; qemu-user
does not follow execve, so that chosen build is then run itself under the
same emulated CPU, where it passes the application's emulation problem and
its math library names the code path it took. A CPU below the baseline
(Conroe) is refused before anything runs. A control built for Haswell only
dies with SIGILL on the older CPUs, and the native twin of a flavor (built
for this machine's CPU) dies on them where the flavor's fat build passes."""

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest
from archspec import cpu as archspec
from conftest import UNCHECKED, assert_checks, built_levels, require_published, run_flavors

from onestack import host, problems, spack, stack
from onestack.modules import dispatch
from onestack.stack import cover, cpus
from tests.fast import dispatch_tree as tree

GENERATIONS = cpus.generations()
PROGRAMS = Path(__file__).parent / "programs"
# How each math library names the code path it dispatched to on this CPU.
DISPATCH = {
    "openblas": (("OPENBLAS_VERBOSE", "2"), "Core: "),
    "mkl": (("MKL_VERBOSE", "1"), "enabled processors"),
    # AOCL-BLIS's x86_64 family (packages/.../amdblis): the kernel set it
    # picked for the CPU (penryn, sandybridge, zen3, ...; docs/site-staff/building.md).
    "aocl": (("BLIS_ARCH_DEBUG", "1"), "Selecting sub-configuration"),
}


# The flavors of this run's build lists (make test: ci_build) with each
# level build, the baseline's included, as (module, level).
CI = stack.ci_lists()
LEVEL_BUILDS = [
    (f.module_name, level)
    for f in stack.load().select(ci=CI)
    if f.published
    for level in [cpus.baseline_level(), *(lvl for lvl, spec in f.levels if spec in f.specs(ci=CI))]
]
# The builds of flavors with several levels: one with the baseline's alone
# runs it through its entry point everywhere (tests/test_problems.py).
SEVERAL_LEVELS = [(m, lvl) for m, lvl in LEVEL_BUILDS if sum(m == other for other, _ in LEVEL_BUILDS) > 1]
# AVX-512 shows in its registers: zmm, the opmasks k1-k7, or the 16 extra
# xmm/ymm registers only EVEX encodes; AVX (VEX) in its v-prefixed mnemonics.
AVX512_OPERAND = re.compile(r"%(zmm\d+|k[1-7]|[xy]mm(1[6-9]|2\d|3[01]))\b")
VEX_MNEMONIC = re.compile(r"^\s*[0-9a-f]+:\s+v[a-z0-9]+\s", re.M)
# What each level's own code may and must use (x86-64-v2 has no AVX).
WIDEST = {"x86-64-v2": "SSE", "x86-64-v3": "AVX2", "x86-64-v4": "AVX-512"}


def own_code(program: Path) -> list:
    """The program and the shared libraries of its own build (GROMACS keeps
    its kernels in libgromacs_mpi.so, the program is a thin main)."""
    prefix = program.parent.parent
    libraries = {f.resolve() for lib in ("lib", "lib64") for f in (prefix / lib).glob("lib*.so*") if f.is_file()}
    return [program, *sorted(libraries)]


# A function's heading in objdump's listing.
FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$", re.M)


def _without(listing: str, functions: tuple) -> str:
    """The listing less the functions whose (mangled) names hold one of `functions`."""
    parts = FUNCTION.split(listing)  # text, name, body, name, body, ...
    kept = [body for name, body in zip(parts[1::2], parts[2::2]) if not any(f in name for f in functions)]
    return parts[0] + "".join(kept)


def widest_instructions(program: Path, cpu_checked: tuple = ()) -> str:
    """The widest vector instruction set in the build's own code, less the
    functions it runs only after asking the CPU (`cpu_checked_code`)."""
    listing = "".join(
        subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(f)], capture_output=True, text=True, check=True
        ).stdout
        for f in own_code(program)
    )
    listing = _without(listing, cpu_checked) if cpu_checked else listing
    return "AVX-512" if AVX512_OPERAND.search(listing) else "AVX2" if VEX_MNEMONIC.search(listing) else "SSE"


def best_level(builds: dict, generation: dict) -> str:
    """The newest build the emulated CPU can run: what the entry point must choose."""
    cpu = tree.LEVELS.index(tree.emulated_level(generation))
    return max((level for level in builds if tree.LEVELS.index(level) <= cpu), key=tree.LEVELS.index)


FLAVORS = sorted({module for module, _ in LEVEL_BUILDS})


def own_level_unchecked(generation: dict, level: str) -> str:
    """Why a run of the `level` build under the emulated generation cannot
    judge a problem's own_level checks ("" where it can), as
    dispatch.without_own_level says for the host: the build is not for the
    generation's own level, or the generation has more than that level
    (Sandy Bridge's AVX over x86-64-v2), which the build leaves unused."""
    own = tree.emulated_level(generation)
    if level != own:
        return f"its {level} build ran: it has none for {generation['name']}'s own level, {own}"
    extra = host.beyond_own_level(archspec.TARGETS[generation["spack_target"]])
    if extra:
        return f"{generation['name']} has {', '.join(extra)} of the level above {own}, which the build leaves unused"
    return ""


def _traits(module: str) -> set:
    """What a flavor brings to a CPU generation that another may not: its
    application's own code (each version's), its MPI, its math library, its
    threading, and whether its entry point chooses among several level builds."""
    flavor = stack.load().flavor(module)
    levels = sum(module == m for m, _ in LEVEL_BUILDS) > 1
    return {
        ("app", f"{flavor.app.module} {flavor.app.version}"),
        ("mpi", flavor.mpi),
        ("math", flavor.math),
        ("threads", flavor.threads),
        ("several levels", levels),
    }


def _emulation_cover(modules: list) -> dict:
    """The flavors that run under each emulated generation, chosen so that
    every trait runs once (onestack/stack/cover.py). A LAMMPS run costs half
    a minute per generation under qemu; a flavor whose application, MPI,
    math library, threading and levels already ran there proves nothing more
    (test_every_flavor_left_out_of_emulation_is_covered names what covers
    each left out)."""
    return cover.cover({m: _traits(m) for m in modules})


EMULATED = _emulation_cover(FLAVORS)


def test_every_flavor_left_out_of_emulation_is_covered():
    """Each published flavor not emulated has every trait run by one that is."""
    for module in sorted(set(FLAVORS) - set(EMULATED)):
        traits = sorted(_traits(module), key=str)
        by = {trait: next((m for m in EMULATED if trait in _traits(m)), None) for trait in traits}
        assert all(by.values()), f"{module}: not emulated, and no emulated flavor has its {by}"
        said = ", ".join(f"its {kind} {value} runs in {m}" for (kind, value), m in by.items())
        print(f"{module}: not emulated; {said}")


@pytest.mark.parametrize("module", sorted(EMULATED))
@pytest.mark.parametrize("cpu", GENERATIONS, ids=[g["name"] for g in GENERATIONS])
def test_every_flavor_runs_its_level_on_every_cpu_generation(
    cpu, module, tmp_path, init_script, live_release, published_flavors
):
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    problem = problems.emulation_problem(flavor.app.module)
    builds = built_levels(live_release, stack.load().flavor(module))
    chose = problems.execute(
        problem,
        problems.How(modules=(module,), env=(("ONESTACK_CPU_VERBOSE", "1"),), emulate=cpu["qemu"]),
        tmp_path / "entry",
        init_script,
    )
    said = tree.VERBOSE_LINE.search(chose.printed)
    assert chose.exit == 0 and said, f"{module} on {cpu['qemu']}: exit {chose.exit}\n{chose.printed[-2000:]}"
    _, level, program = said.groups()
    assert level == best_level(builds, cpu), f"{module} on {cpu['qemu']} chose {level}: {said.group(0)}"
    assert Path(program).parent == Path(builds[level]), said.group(0)
    # The chosen build itself, under the emulated CPU.
    verbose, marker = DISPATCH[flavor.math]
    ran = problems.execute(
        problem,
        problems.How(
            modules=(module,),
            env=(verbose,),
            path=(builds[level],),
            emulate=cpu["qemu"],
            no_own_level=own_level_unchecked(cpu, level),
        ),
        tmp_path / "build",
        init_script,
    )
    assert ran.exit == 0, f"{module}'s {level} build on {cpu['qemu']}: exit {ran.exit}\n{ran.printed[-2000:]}"
    checks = ran.checks()
    assert_checks(f"{module}'s {level} build on {cpu['qemu']}", checks)
    if flavor.app.math_uses[0] != "blas":
        # LAMMPS, GROMACS: their math is the FFT (GROMACS's BLAS serves its
        # analysis tools only), whose codelets are picked silently: listed
        # at the run's end among what was not checked.
        UNCHECKED.append(f"{module}'s {level} build on {cpu['qemu']}: its math, the FFT, names no code path")
        return
    path = next((line.strip() for line in ran.printed.splitlines() if marker in line), None)
    assert path, f"{module} on {cpu['qemu']}: the math library did not name its code path"
    print(f"{module:22} {cpu['qemu']:15} {level} build passes; {path.split(' architecture ')[-1][:70]}")


@pytest.mark.parametrize("module,level", LEVEL_BUILDS, ids=[f"{m}@{lvl}" for m, lvl in LEVEL_BUILDS])
def test_each_level_build_carries_its_levels_instructions(module, level, live_release):
    """Whether or not this host can run it: the baseline build nothing above
    SSE, the v3 build AVX (VEX), the v4 build AVX-512."""
    builds = built_levels(live_release, stack.load().flavor(module))
    assert level in builds, f"{module}: no {level} build in its levels.conf ({', '.join(builds)})"
    app = stack.load().flavor(module).app
    program = Path(builds[level]) / app.program
    found = widest_instructions(program, app.cpu_checked_code)
    print(f"{module} {level}: {program.name}'s widest instructions: {found}")
    assert found == WIDEST[level], f"{module}'s {level} build ({program}): its widest instructions are {found}"


@pytest.mark.parametrize("module,level", SEVERAL_LEVELS, ids=[f"{m}@{lvl}" for m, lvl in SEVERAL_LEVELS])
def test_each_level_build_this_host_can_run_passes_its_problem_natively(
    module, level, live_release, init_script, tmp_path
):
    if not host.runs(level):
        pytest.skip(
            f"{module}'s {level} build: built, not run here: this host is x86-64-{host.level()} "
            f"({host.model()}); its instructions are checked by the test before"
        )
    flavor = stack.load().flavor(module)
    builds = built_levels(live_release, flavor)
    problem = problems.emulation_problem(flavor.app.module)
    # A build other than the one the application's authors advise here
    # rightly prints what its own_level checks must not find (GROMACS's
    # note that another build might be faster): one below the host's own
    # level, or above the level an `at-most` line of the flavor's table sets
    # on this CPU model (GROMACS's AVX2 on one AVX-512 FMA unit).
    advised, _, lowered = dispatch.choice_here(dispatch.bin_dir(live_release, flavor))
    own = advised if lowered else f"x86-64-{host.level()}"
    not_own = f"its {level} build, run by name on this {own} host" + (f" ({lowered})" if lowered else "")
    below = "" if level == own else not_own
    how = problems.How(modules=(module,), path=(builds[level],), no_own_level=below)
    ran = problems.execute(problem, how, tmp_path, init_script)
    assert ran.exit == 0, f"{module}'s {level} build on this host: exit {ran.exit}\n{ran.printed[-2000:]}"
    assert not ran.failure(), f"{module}'s {level} build on this host: {ran.failure()}"
    assert_checks(f"{module}'s {level} build on this host", ran.checks())
    print(f"{module} {level}: built and run here ({host.describe()}); {problem.case} passed")


@pytest.mark.parametrize("module", [f.module_name for f in run_flavors()])
def test_a_cpu_below_the_baseline_is_refused_before_anything_runs(module, tmp_path, init_script, published_flavors):
    require_published(module, published_flavors)
    baseline = f"x86-64-{GENERATIONS[0]['x86_64_level']}"
    problem = problems.emulation_problem(stack.load().flavor(module).app.module)
    refused = problems.execute(
        problem, problems.How(modules=(module,), emulate=tree.BELOW_BASELINE_CPU), tmp_path, init_script
    )
    assert refused.exit == tree.EXIT_BELOW_BASELINE, f"{module}: exit {refused.exit}\n{refused.printed[-2000:]}"
    said = f"it is x86-64 (v1), below the stack's baseline {baseline}"
    assert said in refused.printed, f"{module}: {refused.printed[-2000:]}"


def test_single_path_control_dies_with_sigill_on_older_cpus(tmp_path, init_script):
    """What the fat binaries spare: a program built for AVX2 alone dies on
    each of the site's generations below x86-64-v3 and runs on the others
    qemu models."""
    older = [g for g in GENERATIONS if g["x86_64_level"] < "v3"]
    if not older:
        pytest.skip(
            f"the site has no CPU generation below AVX2 ({cpus.where_chosen()}): nothing for the control to die on"
        )
    exe = tmp_path / "avx2_only"
    subprocess.run(["gcc", "-O3", "-march=haswell", "-o", str(exe), str(PROGRAMS / "avx2_only.c")], check=True)
    outcomes = {
        g["name"]: subprocess.run(["qemu-x86_64", "-cpu", g["qemu"], str(exe)], capture_output=True)
        for g in GENERATIONS
    }
    print({name: proc.returncode for name, proc in outcomes.items()})
    for g in GENERATIONS:
        if g in older:
            assert tree.died_of_sigill(outcomes[g["name"]]), f"the AVX2 control on {g['name']}: {outcomes[g['name']]}"
        else:
            assert outcomes[g["name"]].returncode == 0, (g["name"], outcomes[g["name"]].stderr)


@pytest.mark.parametrize("module", [f.module_name for f in run_flavors()])
def test_nothing_is_built_for_the_build_host(module, live_release, published_flavors):
    """Spack compiled the flavor's baseline build for the site's oldest
    generation, never -march=native."""
    require_published(module, published_flavors)
    baseline = cpus.baseline_target().replace("_", "-")
    builds = built_levels(live_release, stack.load().flavor(module))
    prefix = Path(next(iter(builds.values()))).parent  # the lowest level's, its bin folder's parent
    build_env = (prefix / ".spack" / "spack-build-env.txt").read_text()
    targets = set(re.findall(r"SPACK_TARGET_ARGS_\w+='([^']*)'", build_env))
    assert targets == {f"-march={baseline} -mtune=generic"}, f"{module}: built with {targets} ({prefix})"
    with gzip.open(prefix / ".spack" / "spack-build-out.txt.gz", "rt") as log:
        assert "-march=native" not in log.read(), module


TWINS = sorted(f.module_name for f in stack.load().flavors if f.native)


def test_native_twins_are_declared():
    assert TWINS, "no native twin declared (native_twin: in environments/<app>.yaml)"


@pytest.fixture(scope="module")
def twin_roots():
    """Spack's record of each twin (one query for all)."""
    specs = [stack.load().flavor(t).spack_spec for t in TWINS]
    return spack.query("flavor_roots", json.dumps(specs))


@pytest.mark.parametrize("twin_name", TWINS)
def test_a_native_twin_dies_where_its_fat_flavor_runs(
    twin_name, twin_roots, tmp_path, init_script, live_release, published_flavors
):
    """A native twin (built for this machine's CPU) against its fat flavor,
    on the emulation problem under every generation: the flavor passes; the
    twin dies of SIGILL on every generation of a lower x86-64 level than this
    machine's, and elsewhere either passes or dies of SIGILL (it may use
    nothing the emulated CPU lacks, or something qemu does not emulate, such
    as AVX-512), never a wrong answer."""
    host_level = host.level()
    twin = stack.load().flavor(twin_name)
    fat = twin.twin_of
    if fat not in {f.module_name for f in run_flavors()}:
        pytest.skip(f"{twin_name}: its flavor {fat} is not in this run's build lists")
    require_published(fat, published_flavors)
    root = twin_roots[twin.spack_spec]
    if not root or not root["installed"]:
        in_lists = {f.module_name for f in stack.load().select(ci=stack.ci_lists())}
        assert twin_name not in in_lists, f"{twin_name}: in this run's build lists, not installed: its build failed"
        pytest.skip(f"{twin_name}: not built on this machine (not in this run's build lists; `make stack` builds it)")
    problem = problems.emulation_problem(twin.app.module)
    builds = built_levels(live_release, stack.load().flavor(fat))
    for g in GENERATIONS:
        # The build the entry point chooses, run by its path: qemu-user does
        # not follow the dispatcher's exec, which would run it on the host.
        level = best_level(builds, g)
        ran = problems.execute(
            problem,
            problems.How(
                modules=(fat,), path=(builds[level],), emulate=g["qemu"], no_own_level=own_level_unchecked(g, level)
            ),
            tmp_path / fat / g["qemu"],
            init_script,
        )
        assert ran.exit == 0, f"{fat} on {g['qemu']}: exit {ran.exit}\n{ran.printed[-2000:]}"
        assert_checks(f"{fat}'s {level} build on {g['qemu']}", ran.checks())
        died = problems.execute(
            problem,
            problems.How(modules=(fat,), path=(f"{root['prefix']}/bin",), emulate=g["qemu"]),
            tmp_path / twin_name / g["qemu"],
            init_script,
        )
        passed = died.exit == 0 and all(c.passed for c in died.checks())
        print(
            f"{g['qemu']:15} {fat}: passed; {twin_name} (target {root['target']}, "
            f"x86-64-{host_level}): exit {died.exit}{', SIGILL' if died.sigill else ''}"
        )
        if g["x86_64_level"] < host_level:
            assert died.sigill, f"{twin_name} on {g['qemu']}: exit {died.exit}, not SIGILL"
        else:
            assert died.sigill or passed, f"{twin_name} on {g['qemu']}: exit {died.exit}"
    if not any(g["x86_64_level"] < host_level for g in GENERATIONS):
        pytest.skip(
            f"{twin_name}: {fat} ran on every generation, but none is below this host's x86-64-{host_level}: "
            "nothing here shows its twin dying where it runs"
        )
