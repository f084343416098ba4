"""The exec-time CPU dispatcher under qemu-user emulating each CPU generation
of the site (its site file's cpu_generations), and Conroe below the baseline, over
real per-level builds of a program that executes instructions of its level
and checks its results (dispatch/programs/level_kernel.c).

qemu-user does not follow execve: the build the dispatcher execs runs
natively, outside the emulation. So each test reads which build the
dispatcher chose under the emulated CPU (ONESTACK_CPU_VERBOSE), then runs
that very build under the same emulated CPU, where it must pass its check,
and the next level's build, which must die of SIGILL there."""

import re
import shutil
from types import SimpleNamespace

import pytest

from onestack.stack import cpus
from tests.fast import dispatch_tree as tree
from tests.fast.dispatch_tree import BELOW_BASELINE_CPU, EXIT_BELOW_BASELINE, emulated_level

pytestmark = pytest.mark.skipif(
    not shutil.which("qemu-x86_64"), reason="qemu-x86_64 is not installed (Debian's qemu-user, setup/apt-packages.txt)"
)

GENERATIONS = cpus.generations()
PROGRAM = "level-kernel"
BUILT_LEVELS = ("x86-64-v2", "x86-64-v3", "x86-64-v4")


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> SimpleNamespace:
    root = tmp_path_factory.mktemp("dispatch-emulated")
    builds = {}
    for level in BUILT_LEVELS:
        builds[level] = root / level / "bin"
        builds[level].mkdir(parents=True)
        tree.compile_c(tree.PROGRAMS / "level_kernel.c", builds[level] / PROGRAM, "-O2", f"-march={level}")
    dispatcher = tree.compile_dispatcher(root)
    bin_dir = tree.lay_out(root / "dispatch", dispatcher, builds, [PROGRAM])
    return SimpleNamespace(root=root, dispatcher=dispatcher, bin=bin_dir, entry=bin_dir / PROGRAM, builds=builds)


def qemu(cpu: str, *command, env=None):
    return tree.run(["qemu-x86_64", "-cpu", cpu, *command], env=env)


@pytest.mark.parametrize("generation", GENERATIONS, ids=[g["name"] for g in GENERATIONS])
def test_each_generation_runs_the_build_of_its_level(generation, stack, tmp_path):
    cpu, expected = generation["qemu"], emulated_level(generation)
    level = qemu(cpu, stack.dispatcher, "--level")
    assert level.stdout.strip() == expected == tree.glibc_hwcaps_level(["qemu-x86_64", "-cpu", cpu]), level.stderr
    if expected != f"x86-64-{generation['x86_64_level']}":
        assert "TCG doesn't support requested feature: CPUID.07H:EBX.avx512f" in level.stderr, level.stderr

    marker = tmp_path / "ran"
    dispatched = qemu(cpu, stack.entry, marker, env={"ONESTACK_CPU_VERBOSE": "1"})
    assert dispatched.returncode == 0, dispatched.stderr
    cpu_level, chosen, path = tree.VERBOSE_LINE.search(dispatched.stderr).groups()
    assert (cpu_level, chosen, path) == (expected, expected, str(stack.builds[expected] / PROGRAM))
    # What the dispatcher exec'd ran natively: its own report says which build.
    assert dispatched.stdout == f"{chosen} ok\n" and marker.read_text() == f"{chosen}\n"

    check = qemu(cpu, stack.bin / tree.CHECK_NAME)
    assert check.returncode == 0 and f"CPU {expected}; programs here run the {expected} build" in check.stdout

    chosen_under_emulation = qemu(cpu, path)
    assert chosen_under_emulation.returncode == 0 and chosen_under_emulation.stdout == f"{chosen} ok\n", (
        chosen_under_emulation.stderr
    )
    above = BUILT_LEVELS[BUILT_LEVELS.index(chosen) + 1 :]
    outcome = "no higher build"
    if above:
        next_build = qemu(cpu, stack.builds[above[0]] / PROGRAM)
        assert tree.died_of_sigill(next_build), f"{above[0]} build on {cpu}: exit {next_build.returncode}"
        outcome = f"the {above[0]} build dies of SIGILL there"
    print(f"{cpu:16} dispatched to {chosen}, which passes under the emulation; {outcome}")


def test_a_cpu_below_the_baseline_is_refused_and_nothing_runs(stack, tmp_path):
    marker = tmp_path / "ran"
    refused = qemu(BELOW_BASELINE_CPU, stack.entry, marker)
    assert refused.returncode == EXIT_BELOW_BASELINE
    assert refused.stderr == (
        f"onestack: {PROGRAM} cannot run on this CPU: it is x86-64 (v1), below the stack's "
        "baseline x86-64-v2 (it lacks CMPXCHG16B, POPCNT, SSE4.1, SSE4.2); use a node with a newer CPU\n"
    )
    assert refused.stdout == "" and not marker.exists()
    check = qemu(BELOW_BASELINE_CPU, stack.bin / tree.CHECK_NAME)
    assert check.returncode == EXIT_BELOW_BASELINE and "below the stack's baseline x86-64-v2" in check.stderr
    # What the refusal spares: the baseline build dies there.
    assert tree.died_of_sigill(qemu(BELOW_BASELINE_CPU, stack.builds["x86-64-v2"] / PROGRAM))


QEMU_CASES = [c for c in tree.cases() if re.search(r"^# qemu-cpu: ", c.read_text(), re.M)]


@pytest.mark.parametrize("case_file", QEMU_CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_qemu_test_vectors_are_what_qemu_reports(case_file, stack):
    """The fast tests' vectors recorded from qemu's models (`# qemu-cpu:`)
    are recorded again here: the same CPUID values and XCR0."""
    cpu = re.search(r"^# qemu-cpu: (\S+)", case_file.read_text(), re.M).group(1)
    recorded = qemu(cpu, stack.dispatcher, "--cpuid")
    assert recorded.returncode == 0, recorded.stderr
    assert tree.records(recorded.stdout) == tree.records(case_file.read_text())
