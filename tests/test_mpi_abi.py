"""MPI ABIs as a module operation: a program built against one member of the
MPICH family (Debian's MPICH, or MVAPICH2 built by Spack with RUNPATHs) runs
with another's runtime (Intel MPI from PyPI) through `module load
mpi-runtime/impi`; one built for the MPI-5 standard ABI (libmpi_abi.so.1)
runs, the same file, on MPICH 5 and on Intel MPI; what cannot work is refused
with a message naming why and the fix."""

import hashlib
import re
import subprocess
from pathlib import Path

import pytest
from conftest import (
    abi_runtimes,
    built_levels,
    intel_mpi_banner,
    published_of,
    require_published,
    run_flavors,
    runtime_published,
    served_by,
    translator_runtime,
)

from onestack import paths, problems, stack
from onestack.modules import dispatch, lmod, publish
from tests.fast import dispatch_tree as tree

PROGRAMS = Path(__file__).parent / "programs"
# A flavor built with MPICH (hpl.yaml ci_build): its module sets the MPICH environment.
FLAVOR = "hpl/openblas-mpich"


def _build(tmp_path, source, *link):
    exe = tmp_path / Path(source).stem
    subprocess.run([*link[:1], "-o", str(exe), str(PROGRAMS / source), *link[1:]], check=True)
    return exe


def test_mpich_build_runs_on_intel_mpi_runtime(init_script, tmp_path):
    exe = _build(tmp_path, "mpi_library_version.c", "mpicc.mpich")
    native = lmod.clean_shell(init_script, f"module load {FLAVOR}\nmpirun -n 2 {exe}")
    swapped = lmod.clean_shell(init_script, f"module load {FLAVOR} mpi-runtime/impi\nmpirun -n 2 {exe}")
    assert native.returncode == 0, native.stderr
    assert "MPICH Version:" in native.stdout
    assert swapped.returncode == 0, swapped.stderr
    assert intel_mpi_banner(version_line=False) in swapped.stdout
    assert swapped.stdout.count(" of 2") == 2


# The problem each application's swapped run solves: QE's quickest SCF case
# first (it uses the most of MPI: ScaLAPACK, FFTs), else HPL, which is built
# with MVAPICH2 where QE is not (make test: hpl.yaml's ci_build).
SWAP_CASES = (("qe", "pw_scf-ncpp"), ("hpl", "hpl"))


@pytest.mark.parametrize("mpi", ["mpich", "mvapich2"])
def test_problem_passes_on_intel_mpi_runtime(mpi, init_script, published_flavors, tmp_path):
    """The seed's promise: a build with another member of the family (MVAPICH2,
    for InfiniBand clusters) runs on a desktop with Intel MPI's runtime."""
    found = [(f.module_name, app, case) for app, case in SWAP_CASES for f in run_flavors(app) if f.mpi == mpi]
    if not found:
        pytest.skip(f"no qe or hpl flavor built with {mpi} is in this run's build lists (`make stack` builds them)")
    module, app, case = found[0]
    require_published(module, published_flavors)
    # I_MPI_DEBUG makes Intel MPI name itself at start-up: proof of which MPI
    # ran (an RPATH to the build's own MPI would keep it, silently).
    checks = problems.run(
        problems.of_flavor(stack.load().flavor(module), case),
        problems.How(modules=(module, "mpi-runtime/impi"), env=(("I_MPI_DEBUG", "4"),)),
        tmp_path,
        init_script,
    )
    assert all(c.passed for c in checks), f"{module} on mpi-runtime/impi: " + "\n".join(map(str, checks))
    assert intel_mpi_banner() in (tmp_path / "output.txt").read_text(), (
        f"{module} on mpi-runtime/impi: Intel MPI did not name itself"
    )


def test_an_mpich_build_passes_on_open_mpi_through_the_translator(init_script, published_flavors, tmp_path):
    """Fortran across the ABI families: QE built with MPICH, its ScaLAPACK and
    BLACS included, passes its problem unchanged on Open MPI through
    mpi-runtime/openmpi-wi4mpi: one job of 2 ranks started by Open MPI's
    launcher, and the loader shows Open MPI's libraries and the translator's
    initialised in it."""
    module = published_of(published_flavors, "qe", "mpich")
    translator = translator_runtime()
    outcome = problems.execute(
        problems.load("qe")["pw_scf-ncpp"],
        problems.How(modules=(module, translator.module_name), env=(("LD_DEBUG", "libs"),)),
        tmp_path,
        init_script,
    )
    checks = outcome.checks()
    assert not outcome.failure() and all(c.passed for c in checks), (
        f"{module} on {translator.module_name}",
        outcome.failure() or "\n".join(map(str, checks)),
        outcome.printed[-3000:],
    )
    initialised = set(re.findall(r"calling init: \S*/(lib(?:mpi|wi4mpi)\S*\.so[.\d]*)", outcome.printed))
    print(f"{module} on {translator.module_name}: {', '.join(map(str, checks))}; initialised {sorted(initialised)}")
    assert {"libmpi.so.40", "libmpi_mpifh.so.40", "libwi4mpi_MPICH_OMPI.so"} <= initialised, (module, initialised)


def test_the_translator_loads_nothing_into_the_shells_own_commands(init_script, published_flavors, tmp_path):
    """Its libraries are the ranks' alone: a command of the shell the module
    is loaded in maps neither Wi4MPI nor Open MPI (each such start took 28 ms,
    not 0.8) and keeps the flavor's own LD_PRELOAD; a rank of its mpirun
    loads the translator's libraries, then the flavor's preload."""
    found = [f.module_name for f in run_flavors() if f.mpi_abi == "mpich" and f.preload]
    if not found:
        pytest.skip("no MPICH-family flavor with a preload of its own (MKL's) is in this run's build lists")
    module = found[0]
    require_published(module, published_flavors)
    translator = translator_runtime()
    maps = "grep -o -e 'libwi4mpi[^ ]*' -e 'libmpi.so.40' /proc/self/maps | sort -u | tr '\\n' ' '"
    rank = tmp_path / "rank.sh"
    rank.write_text(f'echo "rank: [$({maps})] $LD_PRELOAD"\n')
    said = lmod.clean_shell(
        init_script,
        f'module load {module}\nexport FLAVORS="$LD_PRELOAD"\nmodule load {translator.module_name}\n'
        f'echo "shell: [${{LD_PRELOAD#"$FLAVORS"}}] [$({maps})]"\necho "flavors: $FLAVORS"\n'
        '[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n'
        f"mpirun -n 1 sh {rank}",
    )
    lines = dict(
        line.split(": ", 1) for line in said.stdout.splitlines() if line.startswith(("shell: ", "rank: ", "flavors: "))
    )
    assert lines.get("shell") == "[] []" and lines.get("flavors"), (module, said.stdout, said.stderr)
    maps_of_rank, _, preloaded = lines.get("rank", "").partition("] ")
    assert "libwi4mpi_MPICH_OMPI.so" in maps_of_rank and "libmpi.so.40" in maps_of_rank, (module, said.stdout)
    first, *rest = preloaded.split(":")
    assert first.endswith("/libwi4mpi_MPICH_OMPI.so") and rest == [
        "libmpi_mpifh.so.40",
        "libmpi.so.40",
        *lines["flavors"].split(":"),
    ], (module, preloaded)


def test_open_mpi_build_is_refused_by_the_runtime(init_script, tmp_path):
    libmpi40 = "/usr/lib/x86_64-linux-gnu/libmpi.so.40"
    if not Path(libmpi40).exists():
        pytest.fail("Open MPI's runtime (libmpi.so.40) is not installed: setup/apt-packages.txt pulls it in")
    exe = _build(tmp_path, "openmpi_linked.c", "gcc", libmpi40)
    proc = lmod.clean_shell(init_script, f"module load {FLAVOR} mpi-runtime/impi\nmpirun -n 2 {exe}")
    assert proc.returncode == 1
    assert "is a build of the openmpi ABI (libmpi.so.40)" in proc.stderr
    assert "which this runtime does not serve (it serves mpich, mpi5)" in proc.stderr


def test_an_open_mpi_flavors_program_is_refused_through_its_entry_point(init_script, live_release, published_flavors):
    """A flavor's program on PATH is its dispatcher, which links nothing: the
    runtime's mpirun checks the build behind it."""
    module = published_of(published_flavors, "hpl", "openmpi")
    flavor = stack.load().flavor(module)
    entry = dispatch.bin_dir(live_release, flavor) / "hpcc"
    proc = lmod.clean_shell(init_script, f"module load {FLAVOR} mpi-runtime/impi\nmpirun -n 2 {entry}")
    assert proc.returncode == 1, (module, proc.stdout, proc.stderr)
    assert "is a build of the openmpi ABI (libmpi.so.40)" in proc.stderr, (module, proc.stderr)


def test_open_mpi_flavor_cannot_load_the_runtime(init_script):
    # What an Open MPI flavor module sets (environments/components.yaml abi: openmpi).
    proc = lmod.clean_shell(init_script, "export ONESTACK_MPI_ABI=openmpi\nmodule load mpi-runtime/impi")
    assert proc.returncode != 0
    said = " ".join(proc.stderr.split())  # Lmod wraps its message
    assert "built for the openmpi ABI, which intel-oneapi-mpi does not serve (it serves mpich, mpi5)" in said, said


def test_missing_pmi_library_is_named_with_its_fix(init_script, tmp_path):
    stub = tmp_path / "pmi"
    stub.mkdir()
    (stub / "pmi.c").write_text("int PMI_Init(int *spawned) { *spawned = 0; return 0; }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libpmi.so.0", "-o", str(stub / "libpmi.so.0"), str(stub / "pmi.c")],
        check=True,
    )
    (stub / "libpmi.so").symlink_to("libpmi.so.0")
    exe = _build(tmp_path, "needs_pmi.c", "gcc", f"-L{stub}", "-lpmi")
    proc = lmod.clean_shell(init_script, f"module load {FLAVOR} mpi-runtime/impi\nmpirun -n 2 {exe}")
    assert proc.returncode == 127
    assert "needs libpmi.so.0, which is not found" in proc.stderr
    assert "scheduler's PMI library" in proc.stderr
    fixed = lmod.clean_shell(
        init_script,
        f"module load {FLAVOR} mpi-runtime/impi\nexport LD_LIBRARY_PATH={stub}:$LD_LIBRARY_PATH\nmpirun -n 2 {exe}",
    )
    assert fixed.returncode == 0, fixed.stderr


# The MPI library an executable of each ABI family links (abi.py for MPICH's names).
FAMILY_LIBRARIES = {
    "mpich": ("libmpi.so.12", "libmpich.so.12"),
    "openmpi": ("libmpi.so.40",),
    "mpi5": ("libmpi_abi.so.1",),
}


@pytest.mark.parametrize("module", [f.module_name for f in run_flavors()])
def test_a_flavor_links_the_mpi_it_names(module, init_script, live_release, published_flavors):
    """The flavor's program, in every level build its entry point may run,
    links its own MPI: LAMMPS's CMake once took the first mpicxx on PATH,
    MPICH's, for lmp/openblas-openmpi, whose mpirun (Open MPI's) then
    started N one-rank jobs."""
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    program = flavor.app.program
    proc = lmod.clean_shell(init_script, f'module load {module}\necho "$ONESTACK_MPI_ABI"\ncommand -v {program}')
    assert proc.returncode == 0, f"{module}: no {program} after loading it: {proc.stderr}"
    said_abi, entry = proc.stdout.split("\n")[:2]
    abi = flavor.mpi_abi
    assert said_abi == abi, f"{module}: its module says ONESTACK_MPI_ABI={said_abi!r}, the data {abi}"
    # The entry point is the flavor's own (Debian's lmp and pw.x are the report's baselines).
    assert Path(entry) == dispatch.bin_dir(live_release, flavor) / program, f"{module}: {program} is {entry}"
    builds = built_levels(live_release, flavor)
    assert builds, f"{module}: no build in its release's levels"
    for build in builds.values():
        built = Path(build) / program
        assert built.parent.is_relative_to(paths.prefix()), f"{module}: a build outside the stack: {build}"
        linked = _mpi_libraries(subprocess.run(["ldd", str(built)], text=True, capture_output=True).stdout)
        assert linked and set(linked) <= set(FAMILY_LIBRARIES[abi]), (
            f"{module} ({abi} ABI): {built} links {sorted(linked) or 'no MPI library'}"
        )
        # One MPI in the process: Debian's MPICH-family ScaLAPACK once loaded
        # MPICH's libmpich.so.12 beside Intel MPI's or MVAPICH2's libmpi.so.12.
        files = {Path(target).resolve() for target in linked.values()}
        assert len(files) == 1, f"{module}: {built} loads more than one MPI: {linked}"


def _mpi_libraries(ldd: str) -> dict:
    """{MPI library name: the file ldd resolved it to} of an ldd listing."""
    names = {lib for libs in FAMILY_LIBRARIES.values() for lib in libs}
    found = (line.split() for line in ldd.splitlines() if "=>" in line)
    return {fields[0]: fields[2] for fields in found if fields[0] in names and len(fields) > 2}


@pytest.mark.parametrize("runtime", ["own", *(r.name for r in abi_runtimes("mpi5"))])
@pytest.mark.parametrize("module", [f.module_name for f in run_flavors() if f.mpi_abi == "mpi5"])
def test_one_standard_abi_executable_runs_on_every_mpi_that_serves_it(
    module, runtime, init_script, live_release, tmp_path
):
    """The same file, which needs libmpi_abi.so.1 and no other MPI library,
    passes its problem on its own MPI (MPICH 5) and on every runtime of the
    standard ABI built here (Intel MPI, Open MPI 6): the flavor's build for
    this CPU, whichever MPI serves it; the loader says which MPI's library
    served each run."""
    require_published(module, publish.release_manifest(live_release)["flavors"])
    flavor = stack.load().flavor(module)
    served = next((r for r in abi_runtimes("mpi5") if r.name == runtime), None)
    not_here = served and runtime_published(served, live_release)
    if not_here:
        pytest.skip(f"{module}: not run here: {not_here}")
    name = served.module_name if served else f"its own MPI ({flavor.mpi})"
    outcome = problems.execute(
        problems.across_nodes_problem(flavor.app.module),
        problems.How(
            modules=(module, *([served.module_name] if served else [])),
            env=(("ONESTACK_CPU_VERBOSE", "1"), ("LD_DEBUG", "libs")),
        ),
        tmp_path,
        init_script,
    )
    # The ranks as one job: another MPI's launcher starts one-rank jobs, each
    # of which may print the right answer.
    assert not outcome.failure(), f"{module} on {name}: {outcome.failure()}"
    checks = outcome.checks()
    assert outcome.exit == 0 and all(c.passed for c in checks), f"{module} on {name}: {outcome.printed[-3000:]}"
    _, level, chosen = tree.VERBOSE_LINE.search(outcome.printed).groups()
    program = Path(chosen)
    # One file on every MPI: the build its dispatcher picks on this host, whichever MPI serves it.
    builds = built_levels(live_release, flavor)
    best = dispatch.choice_here(dispatch.bin_dir(live_release, flavor))[0]
    assert (level, program.parent) == (best, Path(builds[best])), (
        f"{module} on {name} ran {program}, not its {best} build"
    )
    libraries = served_by(outcome.printed)
    digest = hashlib.sha256(program.read_bytes()).hexdigest()
    print(f"{module} on {name}: {program} sha256 {digest[:16]}, libmpi_abi.so.1 from {libraries}")
    package = (served.spec if served else stack.load().components["mpis"][flavor.mpi]["spec"]).split("@")[0]
    assert libraries and all(f"/{package}" in lib for lib in libraries), f"{module} on {name}: {libraries}"
    linked = _mpi_libraries(subprocess.run(["ldd", str(program)], text=True, capture_output=True).stdout)
    assert set(linked) == {"libmpi_abi.so.1"}, f"{program} links {linked}"
