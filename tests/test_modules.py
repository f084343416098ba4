"""The published Lmod tree as users meet it: it passes Lmod's own linter and
every flavor loads in a clean shell with no prior loads."""

import subprocess

import pytest
from conftest import published_of, require_published, run_flavors

from onestack import stack
from onestack.modules import lmod, publish
from onestack.stack.flavors import default_version


def test_tree_passes_check_module_tree_syntax(live_release):
    dirs = [live_release / "flavors", *sorted((live_release / "spack").glob("*/Core"))]
    for directory in dirs:
        proc = subprocess.run(
            [str(lmod.root() / "libexec" / "check_module_tree_syntax"), str(directory)], text=True, capture_output=True
        )
        assert proc.returncode == 0 and "No errors found" in proc.stdout, proc.stdout + proc.stderr


# The flavors of this run's build lists: each one's check passes or fails by its name.
RUN = [f.module_name for f in run_flavors()]


@pytest.mark.parametrize("module", RUN)
def test_a_flavor_loads_in_a_clean_shell(module, init_script, published_flavors):
    require_published(module, published_flavors)
    package = stack.load().flavor(module).app.package
    proc = lmod.clean_shell(init_script, f'module load {module}\nmodule -t list 2>&1\necho "$PATH"')
    assert proc.returncode == 0, f"{module}: {proc.stderr}"
    assert module in proc.stdout + proc.stderr, f"{module} is not listed loaded: {proc.stdout}{proc.stderr}"
    # The application's own install prefix is on PATH (e.g. .../quantum-espresso-6.7.0-<hash>/bin).
    assert f"/{package}-" in proc.stdout, f"{module}: no {package} on PATH: {proc.stdout}"


def test_where_prints_the_init_script(init_script):
    assert publish.init_script().resolve() == init_script.resolve()


@pytest.mark.parametrize("app", sorted({f.app.module for f in run_flavors()}))
def test_module_load_app_gives_its_default_flavor(init_script, published_flavors, app):
    """The site's default (or the stack's), not the name Lmod sorts last;
    where that one is not published here, the first published flavor; in
    the default version of those published (the site's, else the newest)."""
    matrix = stack.load()
    published = [f for f in matrix.flavors if f.app.module == app and f.module_name in published_flavors]
    names = sorted({f.name for f in published})
    name = published[0].app.default_flavor if published[0].app.default_flavor in names else names[0]
    version = default_version(matrix.site, app, {f.app.version for f in published if f.name == name})
    proc = lmod.clean_shell(init_script, f"module load {app}\nmodule -t list 2>&1")
    assert proc.returncode == 0, proc.stderr
    assert f"{app}/{name}/{version}" in (proc.stdout + proc.stderr).split(), proc.stdout + proc.stderr


@pytest.mark.parametrize("app", sorted({f.app.module for f in run_flavors()}))
def test_a_flavor_name_that_does_not_exist_is_an_error_not_the_default(init_script, published_flavors, app):
    """Lmod 8.6 resolved `module load <app>/<typo>` to the default flavor,
    silently; a job script with a typo must fail, naming what it asked for."""
    flavor = next(m for m in published_flavors if m.startswith(f"{app}/"))
    for asked in (f"{app}/no-such-flavor", flavor[:-1]):  # and a flavor's name a letter short
        proc = lmod.clean_shell(init_script, f"module load {asked}\nmodule -t list 2>&1")
        said = " ".join(proc.stderr.split())  # Lmod wraps its messages
        assert proc.returncode != 0 and f"module {asked} does not exist" in said, (
            asked,
            proc.stdout,
            proc.stderr,
        )
        assert f"{app}/" not in proc.stdout, (asked, proc.stdout)
        # `module help` of it: no other flavor's help (Lmod ends help with 0 whatever the module says)
        helped = " ".join(lmod.clean_shell(init_script, f"module help {asked}").stderr.split())
        assert f"module {asked} does not exist" in helped and "built with" not in helped, (asked, helped)


@pytest.mark.parametrize("module", RUN)
def test_a_flavor_loads_by_its_name_without_a_version(module, init_script, published_flavors):
    """A job script names `<app>/<flavor>`: it loads the flavor's default
    version of those published, also where that is not the newest in the
    stack's data (LAMMPS 2021's `lmp/openblas-mpich` where only it is built)."""
    require_published(module, published_flavors)
    matrix = stack.load()
    flavor = matrix.flavor(module)
    name = flavor.unversioned_name
    published = [f for f in matrix.flavors if f.module_name in published_flavors]
    versions = {f.app.version for f in published if f.unversioned_name == name}
    expected = f"{name}/{default_version(matrix.site, flavor.app.module, versions)}"
    proc = lmod.clean_shell(init_script, f"module load {name}\nmodule -t list 2>&1")
    loaded = (proc.stdout + proc.stderr).split()
    assert proc.returncode == 0 and expected in loaded, f"{name}: expected {expected}: {proc.stdout}{proc.stderr}"


@pytest.fixture(scope="module")
def spider(init_script) -> str:
    """What `module -t spider` lists."""
    return lmod.clean_shell(init_script, "module -t spider 2>&1").stdout


@pytest.mark.parametrize("module", RUN)
def test_a_flavor_loads_by_its_version_and_spider_lists_it(module, init_script, published_flavors, spider):
    """Modules are <app>/<flavor>/<version> (Lmod's N/V/V): the version is one
    more name away, <app>/<flavor> loads the default one, spider lists them."""
    require_published(module, published_flavors)
    versioned = stack.load().flavor(module).versioned_name
    proc = lmod.clean_shell(init_script, f"module load {versioned}\nmodule -t list 2>&1")
    assert proc.returncode == 0 and versioned in proc.stdout + proc.stderr, f"{versioned}: {proc.stdout}{proc.stderr}"
    assert versioned in spider.split(), f"module spider does not list {versioned}: {spider}"


@pytest.mark.parametrize("module", RUN)
def test_spider_lists_every_flavor_with_its_description(module, init_script, published_flavors):
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    proc = lmod.clean_shell(init_script, f"module spider {flavor.app.module} 2>&1")
    said = f"module spider {flavor.app.module}:\n{proc.stdout}"
    assert flavor.unversioned_name in proc.stdout, f"{module}: not listed by {said}"
    assert flavor.app.description.split()[0] in proc.stdout, f"{module}: no description in {said}"


def test_whatis_and_help_say_what_the_flavor_is_and_how_to_run_it(init_script):
    proc = lmod.clean_shell(init_script, "module whatis hpl/openblas-mpich 2>&1\nmodule help hpl/openblas-mpich 2>&1")
    out = proc.stdout
    for fact in (
        "Compiler: gcc@12.2.0",
        "MPI: mpich@4.0.2",
        "blas=openblas@",
        "mpirun -n <ranks> hpcc",
        "HYDRA_BINDING",
    ):
        assert fact in out, f"{fact!r} missing from whatis/help:\n{out}"


def test_two_mpis_are_never_loaded_together(init_script):
    refused = lmod.clean_shell(init_script, "export LMOD_AUTO_SWAP=no\nmodule load mpich\nmodule load intel-oneapi-mpi")
    said = " ".join(refused.stderr.split())  # Lmod wraps its messages
    family = "You can only have one mpi module loaded at a time. You already have mpich loaded."
    assert refused.returncode != 0 and family in said, refused.stderr
    swapped = lmod.clean_shell(
        init_script, "module load mpich 2>/dev/null\nmodule load intel-oneapi-mpi 2>/dev/null\nmodule -t list 2>&1"
    )
    assert swapped.returncode == 0, swapped.stderr
    loaded = swapped.stdout.split()
    mpis = [m for m in loaded if m.startswith(("mpich/", "intel-oneapi-mpi/"))]
    assert len(mpis) == 1 and mpis[0].startswith("intel-oneapi-mpi/"), f"loaded after the swap: {loaded}"


# One application with an Intel MPI build of the same flavor, one without
# (LAMMPS has none): both kinds are in the ci_build lists.
SWAPPED = ["hpl/openblas-mpich", *[f.module_name for f in run_flavors("lmp") if f.mpi == "mpich"][:1]]


@pytest.mark.parametrize("module", SWAPPED)
def test_another_mpi_over_a_flavor_is_refused_and_changes_nothing(module, init_script, published_flavors):
    """Lmod would swap the application's build to the other MPI's branch,
    but the flavor's mpirun and settings would stay MPICH's (ranks started
    as one-rank jobs): the other MPI's module refuses, saying what works,
    and the flavor's own program stays."""
    require_published(module, published_flavors)
    program = stack.load().flavor(module).app.program
    tried = lmod.clean_shell(
        init_script,
        f'module load {module}\nmodule swap mpich intel-oneapi-mpi 2>&1 || echo "==refused=="\n'
        f'module load intel-oneapi-mpi 2>&1 || echo "==refused=="\necho "found: $(command -v {program})"',
    )
    said = " ".join(tried.stdout.split())  # Lmod wraps its messages
    assert said.count("==refused==") == 2, (module, tried.stdout, tried.stderr)
    assert "a loaded flavor runs on mpich/" in said and "load the flavor built with the other MPI" in said, said
    alone = lmod.clean_shell(init_script, f"module load {module}\ncommand -v {program}")
    assert tried.stdout.split("found: ")[-1].strip() == alone.stdout.strip(), (module, tried.stdout, alone.stdout)


def test_a_flavor_on_another_mpi_than_a_loaded_one_is_refused(init_script, published_flavors):
    """Loaded over an Open MPI flavor of one application, a flavor of another
    application on MPICH would swap the first one's build and leave its
    mpirun: refused, the first left as it was. Unloaded, the second loads."""
    first = published_of(published_flavors, "hpl", "openmpi")
    second = next((m for m in published_flavors if not m.startswith("hpl/") and "-mpich" in m), None)
    assert second, f"needs a published MPICH flavor of an application other than HPL: {published_flavors}"
    tried = lmod.clean_shell(
        init_script,
        f'module load {first}\nmodule load {second} 2>&1 || echo "==refused=="\nmodule -t list 2>&1\n'
        f"module unload {first}\nmodule load {second}",
    )
    said = " ".join(tried.stdout.split())
    assert tried.returncode == 0 and "==refused==" in said, (first, second, tried.stdout, tried.stderr)
    assert "it runs on mpich/" in said and "a loaded flavor runs on openmpi/" in said, said
    listed = said.split("==refused==")[1]
    assert first.split("/")[0] in listed and second.split("/")[0] + "/" not in listed, (first, second, listed)


def test_published_release_is_read_only(live_release):
    writable = [p for p in live_release.rglob("*") if not p.is_symlink() and p.stat().st_mode & 0o222 and p.is_file()]
    assert not writable, writable[:5]


def test_loading_a_second_flavor_replaces_the_first(init_script, published_flavors):
    """Two flavors of one application on one MPI, whose application modules
    differ (by math library, or a hybrid flavor's variants): after loading
    the second, exactly what loading it alone gives is left, its program
    included, and nothing of the first."""
    flavors = [stack.load().flavor(m) for m in published_flavors]
    pair = next(
        ((a, b) for a in flavors for b in flavors if a.app == b.app and a.mpi == b.mpi and a.name != b.name), None
    )
    assert pair, f"needs two published flavors of one application on one MPI, has {published_flavors}"
    first, second = pair
    show = f"echo ==loaded==\nmodule -t list 2>&1\ncommand -v {second.app.program}"
    swapped = lmod.clean_shell(
        init_script, f"module load {first.module_name}\nmodule load {second.module_name} 2>&1\n{show}"
    )
    alone = lmod.clean_shell(init_script, f"module load {second.module_name}\n{show}")
    assert swapped.returncode == 0 and alone.returncode == 0, swapped.stderr + alone.stderr
    listed, expected = (sorted(p.stdout.split("==loaded==")[1].split()) for p in (swapped, alone))
    assert listed == expected, f"{first.module_name} then {second.module_name}: {listed}, alone: {expected}"
    assert not any(line.startswith(first.module_name + "/") for line in listed), listed


def test_unloading_a_flavor_gives_back_the_settings_it_replaced(init_script, published_flavors):
    """Two flavors of two applications that make the same settings (one MPI,
    math library and threading), then the first unloaded: the second's
    settings (binding, threads, Slurm's PMI) are what loading it alone set,
    not unset (Lmod's setenv unsets on unload; the modules pushenv). The
    user's own OPENBLAS/MKL/OMP threads come back after a purge."""
    flavors = [stack.load().flavor(m) for m in published_flavors]
    same = [(a, b) for a in flavors for b in flavors if a.app.module != b.app.module and a.env == b.env]
    assert same, f"needs published flavors of two applications with the same settings, has {published_flavors}"
    first, second = same[0]
    names = sorted({s.name for s in second.env})
    show = "echo ==set==\n" + "\n".join(f'echo "{n}=${{{n}-unset}}"' for n in names)
    mine = "export OMP_NUM_THREADS=3 OPENBLAS_NUM_THREADS=3 MKL_NUM_THREADS=3"
    alone = lmod.clean_shell(init_script, f"{mine}\nmodule load {second.module_name}\n{show}")
    after = lmod.clean_shell(
        init_script,
        f"{mine}\nmodule load {first.module_name} {second.module_name}\nmodule unload {first.module_name}\n{show}"
        '\nmodule purge\necho "$OMP_NUM_THREADS $OPENBLAS_NUM_THREADS $MKL_NUM_THREADS"',
    )
    assert alone.returncode == 0 and after.returncode == 0, alone.stderr + after.stderr
    expected, left = (p.stdout.split("==set==")[1].split("\n")[1:-1] for p in (alone, after))
    assert left[: len(expected)] == expected, f"{second.module_name} after {first.module_name} unloaded: {left}"
    assert left[-1] == "3 3 3", f"after module purge: {left[-1]}"


def test_a_flavor_that_would_override_anothers_settings_is_refused(init_script, published_flavors):
    """A hybrid flavor with 2 threads a rank, then a flavor of another
    application on the same MPI with one thread a rank: refused, naming the
    setting (a job runs with one value); the first keeps its own."""
    flavors = [stack.load().flavor(m) for m in published_flavors]
    pair = next(
        (
            (a, b)
            for a in flavors
            for b in flavors
            if (a.threads, b.threads) == ("openmp", "none") and a.app.module != b.app.module and a.mpi == b.mpi
        ),
        None,
    )
    assert pair, f"needs a hybrid flavor and an MPI-only one of another application on one MPI: {published_flavors}"
    hybrid, other = pair
    tried = lmod.clean_shell(
        init_script,
        f"export OMP_NUM_THREADS=2\nmodule load {hybrid.module_name}\n"
        f'module load {other.module_name} 2>&1 || echo "==refused=="\n'
        "echo OMP_NUM_THREADS=$OMP_NUM_THREADS\nmodule -t list 2>&1",
    )
    said = " ".join(tried.stdout.split())
    assert "==refused==" in said and "one job runs with one of them" in said, (hybrid, other, said)
    assert "OMP_NUM_THREADS=2" in said and other.app.module + "/" not in said.split("==refused==")[1], said


def test_a_flavor_after_a_runtime_is_refused_with_the_order_that_works(init_script, published_flavors):
    """`module load mpi-runtime/impi <flavor>` would leave the flavor's own
    settings over the runtime's: refused, naming the order; in that order it loads."""
    module = published_of(published_flavors, "hpl", "mpich")
    refuse = f'module load mpi-runtime/impi\nmodule load {module} 2>&1 || echo "==refused=="'
    said = " ".join(lmod.clean_shell(init_script, refuse).stdout.split())
    assert "==refused==" in said and f"module load {module} mpi-runtime/impi" in said, said
    works = lmod.clean_shell(init_script, f"module load {module} mpi-runtime/impi")
    assert works.returncode == 0, works.stderr


@pytest.mark.parametrize(
    "again", ["module unload {module}\nmodule load {module}", "module reload", "module load {module}"]
)
def test_a_flavor_unloaded_under_a_runtime_takes_it_along_and_says_so(again, init_script, published_flavors):
    """Left loaded, the runtime would keep the flavor's values (unloading
    pops the runtime's) and let the flavor load again over it: it goes with
    the flavor, saying so, also where Lmod unloads and loads the flavor
    (reload, load of the loaded flavor); the flavor then runs on its own MPI.
    MVAPICH2's: its mpirun is in a folder of its own."""
    module = published_of(published_flavors, "hpl", "mvapich2")
    said = lmod.clean_shell(
        init_script,
        f"module load {module} mpi-runtime/impi\n{again.format(module=module)}\n"
        'echo "@@"; module -t list 2>&1; echo "==$(command -v mpirun)=="',
    )
    printed = " ".join((said.stdout + said.stderr).split())
    assert said.returncode == 0 and "mpi-runtime/impi, which ran" in printed, (again, said.stdout, said.stderr)
    listed = said.stdout.split("@@")[1].split("==")[0]
    assert module in listed and "mpi-runtime" not in listed, (again, listed)
    assert "/mvapich2-" in said.stdout.split("==")[1], (again, module, said.stdout)


def test_module_refresh_keeps_a_flavor_under_its_runtime(init_script, published_flavors):
    """`module refresh` (which sites run in subshells) runs the loaded
    modules again in load mode: the flavor under its runtime is no load
    after a runtime, and the runtime's mpirun stays first."""
    module = published_of(published_flavors, "hpl", "mvapich2")
    said = lmod.clean_shell(
        init_script, f'module load {module} mpi-runtime/impi\nmodule refresh\necho "==$(command -v mpirun)=="'
    )
    assert said.returncode == 0 and "/mpi-runtime/impi/bin/mpirun==" in said.stdout, (module, said.stdout, said.stderr)
