"""This machine's CPU, which nothing in the stack may assume: archspec's name
for it (whence the native twin's Spack target, twin_target), its x86-64 level (which level
builds run here and which are only built), and its model, printed at the
start of `make test` and on every report so that a figure says which CPU it
comes from. Build hosts differ (AVX-512 EPYCs, Zen 3 EPYCs without it, Intel
Xeons), and a login node is often older than the compute nodes it builds for."""

import functools
import re
from pathlib import Path
from typing import List

from onestack import paths

CPUINFO = Path("/proc/cpuinfo")
MEMINFO = Path("/proc/meminfo")
# What /proc/cpuinfo names the model by, in the order they are printed.
MODEL_KEYS = ("model name", "vendor_id", "cpu family", "model")


@functools.lru_cache(maxsize=None)
def _cpu():
    """archspec's reading of the CPU, the version the pinned Spack vendors
    (setup/requirements.txt), so that its names are the ones Spack accepts."""
    from archspec import cpu

    return cpu.host()


def target() -> str:
    """This CPU as archspec, and so Spack, names it (e.g. icelake, zen3)."""
    return _cpu().name


def twin_target(compiler: str) -> str:
    """The native twin's Spack target with compiler ("gcc@12.2.0"): this
    CPU's archspec name where the compiler can optimize for it, else the
    most specific of its ancestors at the CPU's own level that it can. Spack
    refuses a target its compiler cannot build for, and archspec gives GCC
    12.2.0 no zen4 (its range ends at "12.2", below "12.2.0") and Zen 5 only
    GCC 14: on those the twin is x86_64_v4, AVX-512 kept."""
    from archspec.cpu import UnsupportedMicroarchitecture

    cpu, (name, _, version) = _cpu(), compiler.partition("@")
    for candidate in [cpu, *cpu.ancestors]:
        if _level_of(candidate) != _level_of(cpu):
            continue
        try:
            candidate.optimization_flags(name, version)
        except (UnsupportedMicroarchitecture, ValueError):
            continue
        return candidate.name
    return cpu.name  # Spack's own refusal then says why


def level() -> str:
    """The highest x86-64 level this CPU has, as cpus.yaml writes it (v3 for
    Zen 3 and Haswell, v4 with AVX-512; v1 below the psABI levels). archspec
    reads the flags the kernel reports, so state the OS did not enable
    (AVX-512 without its XCR0 bits) does not count, as for the dispatcher."""
    return _level_of(_cpu())


def _level_of(cpu) -> str:
    from archspec.cpu import TARGETS

    found = max(
        (t.name.removeprefix("x86_64_") for t in [cpu, *cpu.ancestors] if t.name.startswith("x86_64_v")), default="v1"
    )
    # archspec's tree, not the features, misses one: Cannon Lake has all of
    # v4's AVX-512, its one parent Skylake (v3). (Its named CPUs list features
    # their parents imply, such as xsave, only in part: not comparable below v4.)
    if found == "v3" and TARGETS["x86_64_v4"].features - TARGETS["x86_64_v3"].features <= cpu.features:
        return "v4"
    return found


def beyond_own_level(cpu=None) -> List[str]:
    """What a CPU (this host's, or an archspec target) has of the x86-64
    level above its own: code built for its own level leaves it unused (a
    Sandy Bridge's AVX over x86-64-v2), and a program's note that another
    build would be faster is right there."""
    from archspec.cpu import TARGETS

    cpu = cpu or _cpu()
    own = _level_of(cpu)
    above = f"x86_64_v{int(own[1:]) + 1}"
    if own == "v1" or above not in TARGETS:  # below the baseline, or the top level
        return []
    return sorted(cpu.features & (TARGETS[above].features - TARGETS[f"x86_64_{own}"].features))


def runs(x86_64_level: str) -> bool:
    """Whether a build for that level (v2, or x86-64-v2) runs on this CPU."""
    return x86_64_level.removeprefix("x86-64-") <= level()


@functools.lru_cache(maxsize=None)
def _model_fields() -> dict:
    """The first CPU's MODEL_KEYS lines of /proc/cpuinfo."""
    fields = {}
    for line in CPUINFO.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() in MODEL_KEYS:
            fields.setdefault(key.strip(), value.strip())
        if not line.strip() and fields:
            break
    return fields


def model() -> str:
    """The CPU's model as the kernel names it, e.g. `AMD EPYC 7B13
    (AuthenticAMD family 25 model 1)`."""
    fields = _model_fields()
    return (
        f"{fields.get('model name', 'unknown model')} ({vendor()} "
        f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"
    )


def vendor() -> str:
    """The CPU's vendor as CPUID names it: GenuineIntel, AuthenticAMD."""
    return _model_fields().get("vendor_id", "?")


def describe() -> str:
    """One line for logs and reports: model, archspec's name, level."""
    return f"{model()}; archspec {target()}; x86-64-{level()}"


def check_baseline(generation: dict, where: str) -> None:
    """A build host below the site's baseline (its oldest generation, chosen
    at `where`) is refused before anything builds: Spack's builds
    run what they compile (configure checks, code generators, tests), which
    would die there with an illegal instruction an hour into the build."""
    if not runs(generation["x86_64_level"]):
        raise paths.SetupError(
            f"this build host's CPU, {describe()}, is below the site's baseline x86-64-{generation['x86_64_level']} "
            f"({where}: {generation['name']}): build on a host at or above it"
        )


def memory_bytes() -> int:
    """This machine's memory (MemTotal), what the report sizes its problems from."""
    return int(re.search(r"MemTotal:\s+(\d+) kB", MEMINFO.read_text()).group(1)) * 1024
