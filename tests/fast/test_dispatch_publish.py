"""What publish writes for the dispatcher (onestack/modules/dispatch.py):
a flavor's entry points over its installed builds, the table from the
template, and the entry point choosing a build for a recorded CPU."""

import shutil

import pytest
from archspec import cpu as archspec

from onestack import data, stack
from onestack.modules import dispatch
from onestack.spack.environment import DISPATCHER
from tests.fast import dispatch_tree as tree


def lay_out_installs(tmp_path, module: str, installed=(True, True, False)):
    """A dispatcher install and a flavor's builds, x86-64-v2 (its own spec)
    and each newer level installed or not, each with the application's
    program and a script (scripts run anywhere: not dispatched)."""
    flavor = stack.load().flavor(module)
    (tmp_path / "dispatcher" / "bin").mkdir(parents=True)
    tree.compile_dispatcher(tmp_path / "dispatcher" / "bin")
    probe = tree.compile_c(tree.PROGRAMS / "run_report.c", tmp_path / "probe", "-O1")
    roots = {DISPATCHER: {"prefix": str(tmp_path / "dispatcher"), "installed": True}}
    for (level, spec), built in zip([("x86-64-v2", flavor.spack_spec), *flavor.levels], installed):
        prefix = tmp_path / level
        (prefix / "bin").mkdir(parents=True)
        shutil.copy(probe, prefix / "bin" / flavor.app.program)
        (prefix / "bin" / "helper.sh").write_text("#!/bin/sh\necho script\n")
        (prefix / "bin" / "helper.sh").chmod(0o755)
        roots[spec] = {"prefix": str(prefix), "installed": built}
    return flavor, roots


@pytest.fixture
def installs(tmp_path):
    """HPL's x86-64-v2 and -v3 builds installed, its x86-64-v4 build not."""
    return lay_out_installs(tmp_path, "hpl/openblas-mpich")


def test_entry_points_over_the_installed_builds(installs, tmp_path):
    flavor, roots = installs
    written = dispatch.write(tmp_path / "release", flavor, roots)
    assert written["levels"] == ["x86-64-v2", "x86-64-v3"] and written["programs"] == 1
    folder = tmp_path / "release" / "dispatch" / "hpl" / "openblas-mpich" / flavor.app.version
    assert sorted(p.name for p in (folder / "bin").iterdir()) == ["hpcc", "onestack-cpu-check"]
    assert (folder / "bin" / "hpcc").stat().st_ino == (
        tmp_path / "dispatcher" / "bin" / "onestack-dispatch"
    ).stat().st_ino
    table = [line for line in (folder / "levels.conf").read_text().splitlines() if not line.startswith("#")]
    assert table == [f"x86-64-v2 {tmp_path}/x86-64-v2/bin", f"x86-64-v3 {tmp_path}/x86-64-v3/bin"]
    on_skylake = tree.run(
        [folder / "bin" / "hpcc"],
        env={"ONESTACK_CPUID_FILE": str(tree.case("intel/skylake-avx512")), "ONESTACK_CPU_VERBOSE": "1"},
    )
    assert on_skylake.returncode == 0, on_skylake.stderr
    assert f"running the x86-64-v3 build: {tmp_path}/x86-64-v3/bin/hpcc" in on_skylake.stderr
    on_conroe = tree.run([folder / "bin" / "hpcc"], env={"ONESTACK_CPUID_FILE": str(tree.case("intel/conroe"))})
    assert (
        on_conroe.returncode == tree.EXIT_BELOW_BASELINE and "below the stack's baseline x86-64-v2" in on_conroe.stderr
    )


def test_a_program_missing_from_a_build_is_not_dispatched(installs, tmp_path):
    flavor, roots = installs
    (tmp_path / "x86-64-v3" / "bin" / "hpcc").unlink()
    with pytest.raises(dispatch.DispatchError) as refused:
        dispatch.write(tmp_path / "release", flavor, roots)
    assert str(refused.value).startswith(
        f"{data.location(flavor.app.file)}: program: hpcc is not an executable of every build"
    )
    assert str(refused.value).endswith("name the one users run among them")


@pytest.mark.parametrize(
    "cpu, judged",
    [
        ("haswell", ""),
        ("sandybridge", "this CPU has avx of the level above x86-64-v2, which its x86-64-v2 build leaves unused"),
        ("icelake", "has no x86-64-v4 build in this release (built: x86-64-v2, x86-64-v3)"),
    ],
)
def test_own_level_checks_are_judged_only_on_the_cpus_own_best_build(installs, tmp_path, monkeypatch, cpu, judged):
    """A problem's own_level checks (GROMACS's note that another build would
    be faster) are judged where the release has the build of the CPU's level
    and the CPU has nothing above that level; else said why not."""
    flavor, roots = installs
    dispatch.write(tmp_path / "release", flavor, roots)
    monkeypatch.setattr(dispatch.host, "_cpu", lambda: archspec.TARGETS[cpu])
    why = dispatch.without_own_level(tmp_path / "release", flavor)
    assert (why == judged) if not judged else (judged in why), why


# GROMACS's own choice of SIMD, in environments/gromacs-2025.yaml
# (lower_level_on) and cpus.yaml (cpu_classes): AVX2 where an Intel CPU has
# one AVX-512 FMA unit. Its rule for Skylake-SP and Cascade Lake (model
# 0x55) goes by the brand string: bare-metal reports of Cascade Lake and
# newer Xeons, and the recorded Xeon Silver 4114 under the brands of other
# models of the same CPU.
@pytest.mark.parametrize(
    "cpu, brand, signature, expected",
    [
        ("intel/xeon-silver-4114", None, None, "x86-64-v3"),
        ("intel/xeon-silver-4214-cascade-lake", None, None, "x86-64-v3"),
        ("intel/xeon-gold-6212u-cascade-lake", None, None, "x86-64-v4"),  # two FMA units
        ("intel/xeon-w7-2475x-sapphire-rapids", None, None, "x86-64-v4"),  # not in the table
        ("intel/xeon-6-granite-rapids", None, None, "x86-64-v4"),
        ("amd/zen5-epyc-9655", None, None, "x86-64-v4"),  # an AMD CPU: never in it
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Bronze 3104 CPU @ 1.70GHz", None, "x86-64-v3"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Gold 5120 CPU @ 2.20GHz", None, "x86-64-v3"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Gold 5220R CPU @ 2.20GHz", None, "x86-64-v3"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) W-2104 CPU @ 3.20GHz", None, "x86-64-v3"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) D-2141I CPU @ 2.20GHz", None, "x86-64-v3"),
        # two FMA units: GROMACS's exception
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Gold 5122 CPU @ 3.60GHz", None, "x86-64-v4"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Gold 5222 CPU @ 3.80GHz", None, "x86-64-v4"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz", None, "x86-64-v4"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Platinum 8280 CPU @ 2.70GHz", None, "x86-64-v4"),
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) W-2123 CPU @ 3.60GHz", None, "x86-64-v4"),
        # Ice Lake client: any brand
        ("intel/xeon-silver-4114", "Intel(R) Core(TM) i7-1065G7 CPU @ 1.30GHz", 0x000706E5, "x86-64-v3"),
        # Sapphire Rapids under KVM, which names it generically: not in the table
        ("intel/xeon-silver-4114", "Intel(R) Xeon(R) Processor", 0x000806F8, "x86-64-v4"),
    ],
)
def test_gromacs_runs_the_build_its_authors_advise_on_cpus_with_one_avx512_fma_unit(
    tmp_path, cpu, brand, signature, expected
):
    flavor, roots = lay_out_installs(tmp_path, "gromacs/openblas-mpich", installed=(True, True, True))
    dispatch.write(tmp_path / "release", flavor, roots)
    report = tree.variant(cpu, tmp_path / "this.cpuid", brand, signature)
    bin_dir = dispatch.bin_dir(tmp_path / "release", flavor)
    proc = tree.run(
        [bin_dir / flavor.app.program], env={"ONESTACK_CPUID_FILE": str(report), "ONESTACK_CPU_VERBOSE": "1"}
    )
    assert proc.returncode == 0, proc.stderr
    assert f"running the {expected} build" in proc.stderr, proc.stderr
    lowered = "(one_avx512_fma_unit: at most x86-64-v3 on this CPU (" in proc.stderr
    assert lowered == (expected == "x86-64-v3"), proc.stderr


def test_a_table_without_at_most_lines_for_an_application_that_names_none(installs, tmp_path):
    flavor, roots = installs
    dispatch.write(tmp_path / "release", flavor, roots)
    table = (dispatch.bin_dir(tmp_path / "release", flavor).parent / "levels.conf").read_text()
    assert not flavor.app.lower_level_on and "at-most" not in table


def test_own_level_checks_are_not_judged_where_the_lowered_level_has_no_build(tmp_path, monkeypatch):
    """A Xeon with one AVX-512 FMA unit, lowered to at most x86-64-v3, at a
    site whose flavor has no v3 build: its dispatcher runs the v2 build, on
    which GROMACS rightly advises AVX2; its note is not judged, and says why."""
    flavor, roots = lay_out_installs(tmp_path, "gromacs/openblas-mpich", installed=(True, False, True))
    dispatch.write(tmp_path / "release", flavor, roots)
    monkeypatch.setattr(dispatch.host, "_cpu", lambda: archspec.TARGETS["skylake_avx512"])
    monkeypatch.setenv("ONESTACK_CPUID_FILE", str(tree.variant("intel/xeon-silver-4114", tmp_path / "this.cpuid")))
    why = dispatch.without_own_level(tmp_path / "release", flavor)
    assert why.startswith("its dispatcher runs its x86-64-v2 build here (") and "no x86-64-v3 build" in why, why
