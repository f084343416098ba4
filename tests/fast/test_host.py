"""The build host's CPU as the stack reads it (onestack/host.py), on CPUs
archspec knows by name: the level decides which level builds run here, and a
host below the site's baseline is refused before anything builds."""

import pytest
from archspec import cpu as archspec

from onestack import cli, host, paths, stack
from onestack.stack import cpus


@pytest.fixture
def as_cpu(monkeypatch):
    def become(name: str):
        monkeypatch.setattr(host, "_cpu", lambda: archspec.TARGETS[name])

    return become


@pytest.mark.parametrize(
    "name, level, runs_v4",
    [
        ("zen3", "v3", False),
        ("zen4", "v4", True),
        ("icelake", "v4", True),
        ("sapphirerapids", "v4", True),
        # AVX-512's whole v4 set, though archspec's tree stops at skylake (v3).
        ("cannonlake", "v4", True),
        # AVX-512F and CD, but neither BW, DQ nor VL: not v4.
        ("mic_knl", "v3", False),
        ("haswell", "v3", False),
        ("nehalem", "v2", False),
        ("core2", "v1", False),
    ],
)
def test_each_cpu_gets_its_level(as_cpu, name, level, runs_v4):
    as_cpu(name)
    assert (host.target(), host.level(), host.runs("x86-64-v4")) == (name, level, runs_v4)
    assert host.runs("x86-64-v2") == (level >= "v2")
    assert host.describe().endswith(f"; archspec {name}; x86-64-{level}")


@pytest.mark.parametrize(
    "name, compiler, twin",
    [
        ("zen3", "gcc@12.2.0", "zen3"),
        ("icelake", "gcc@12.2.0", "icelake"),
        ("sapphirerapids", "gcc@12.2.0", "sapphirerapids"),
        # archspec gives GCC 12.2.0 no zen4 and Zen 5 only GCC 14: the twin
        # keeps the CPU's level (AVX-512), not zen3's
        ("zen4", "gcc@12.2.0", "x86_64_v4"),
        ("zen5", "gcc@12.2.0", "x86_64_v4"),
        ("zen4", "gcc@13.2.0", "zen4"),
        ("zen5", "gcc@14.2.0", "zen5"),
    ],
)
def test_the_native_twin_is_the_most_specific_target_the_compiler_builds_for(as_cpu, name, compiler, twin):
    as_cpu(name)
    assert host.twin_target(compiler) == twin


def test_the_site_compiler_gets_a_twin_target_spack_accepts(as_cpu, request):
    """On a Zen 4 host the data's twins are solvable with the site's GCC."""
    as_cpu("zen4")
    stack._load.cache_clear()  # read again on this CPU, and after the test on the real one
    request.addfinalizer(stack._load.cache_clear)
    twins = [f for f in stack.load().flavors if f.native]
    assert twins and all("target=x86_64_v4" in f.spack_spec for f in twins), [f.spack_spec for f in twins]


@pytest.mark.parametrize("name", ["zen3", "nehalem", "icelake"])
def test_a_host_at_or_above_the_baseline_builds(as_cpu, name):
    as_cpu(name)
    host.check_baseline(cpus.generations()[0], cpus.where_chosen())


def test_a_host_below_the_baseline_is_refused_with_the_file_and_the_fix(as_cpu):
    as_cpu("core2")
    with pytest.raises(paths.SetupError) as refused:
        host.check_baseline(cpus.generations()[0], cpus.where_chosen())
    message = str(refused.value)
    assert "is below the site's baseline x86-64-v2 (sites/default/site.yaml: cpu_generations: nehalem)" in message, (
        message
    )
    assert "build on a host at or above it" in message, message


def test_this_machines_model_is_read_from_the_kernel():
    assert " family " in host.model() and "unknown model" not in host.model(), host.model()


def test_the_first_step_of_setup_and_make_test_stops_a_host_below_the_baseline(as_cpu, capsys):
    """`bin/onestack host` (Makefile's setup, tests/run.sh) prints the CPU,
    then refuses it: before apt, Apptainer's build or Spack."""
    as_cpu("core2")
    with pytest.raises(paths.SetupError, match="below the site's baseline"):
        cli.cmd_host(None)
    assert "archspec core2; x86-64-v1" in capsys.readouterr().out
    as_cpu("zen3")
    cli.cmd_host(None)


@pytest.mark.parametrize(
    "name, extra",
    [
        ("nehalem", []),
        ("sandybridge", ["avx"]),
        ("ivybridge", ["avx", "f16c"]),
        ("haswell", []),
        ("zen3", []),
        ("zen4", []),
        ("icelake", []),
    ],
)
def test_what_a_cpu_has_beyond_its_own_levels_build(as_cpu, name, extra):
    """A Sandy Bridge is x86-64-v2 with AVX: the v2 build leaves AVX unused,
    and GROMACS rightly says a build for AVX would be faster."""
    as_cpu(name)
    assert host.beyond_own_level() == extra
