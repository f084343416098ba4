"""Hybrid MPI+OpenMP flavors (`threads: openmp` in environments/<app>.yaml)
on one node, as users start them with mpirun: every problem of the
application as 2 ranks x 1 thread and as 1 rank x 2 threads, each checked
against its reference, and the program's own output says how many threads
each rank ran. The threads come from what the user set before `module load`
(OMP_NUM_THREADS); in a Slurm job from --cpus-per-task
(tests/cluster/test_flavors_across_nodes.py)."""

import os

import pytest
from conftest import assert_checks, flavor_how, require_published, run_flavors, runtime_published

from onestack import problems, stack
from onestack.modules import lmod
from onestack.problems import check

HYBRID = [f.module_name for f in run_flavors() if f.threads == "openmp"]
LAYOUTS = {"2x1": (2, 1), "1x2": (1, 2)}  # ranks x threads per rank


def _cases():
    return [(module, case) for module in HYBRID for case in problems.load(module.split("/")[0])]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("module, case", _cases(), ids=[f"{m}:{c}" for m, c in _cases()])
def test_hybrid_flavor_solves_its_problems_with_ranks_or_threads(
    module, case, layout, init_script, live_release, published_flavors, tmp_path
):
    require_published(module, published_flavors)
    ranks, threads = LAYOUTS[layout]
    problem = problems.of_flavor(stack.load().flavor(module), case).hybrid(ranks=ranks)
    how = flavor_how(module, live_release, preset=(("OMP_NUM_THREADS", str(threads)),))
    outcome = problems.execute(problem, how, tmp_path, init_script)
    assert not outcome.failure(), f"{module} {case} {layout}: {outcome.failure()}"
    checks = outcome.checks()
    assert_checks(f"{module} {case} {layout}", checks)
    ran = check.values(problem["threads_pattern"], outcome.output)
    assert ran and set(ran) == {threads}, f"{module} {case}: {ran or 'no reported'} threads a rank, not {threads}"
    if check.none_made(checks):  # its layout is right; its answer was not checked
        unchecked = "; ".join(map(str, checks))
        pytest.skip(f"{module} {case} {layout}: its threads checked, none of its reference: {unchecked}")
    print(f"{module} {case} {ranks} rank(s) x {threads} thread(s): " + "; ".join(map(str, checks)))


def _cpus(listed: str) -> int:
    """The CPUs of a Cpus_allowed_list ("0-1,4")."""
    ranges = [part.split("-") for part in listed.split(",")]
    return sum(int(r[-1]) - int(r[0]) + 1 for r in ranges)


def _runtimes_of(module: str) -> list:
    abi = stack.load().flavor(module).mpi_abi
    return [None, *(r for r in stack.load().runtimes if abi in r.serves)]


RUNS_ON = [(module, runtime) for module in HYBRID for runtime in _runtimes_of(module)]


@pytest.mark.parametrize("module, runtime", RUNS_ON, ids=[f"{m}:{r.module_name if r else 'own'}" for m, r in RUNS_ON])
def test_a_hybrid_rank_runs_its_threads_on_as_many_cores(module, runtime, init_script, live_release, published_flavors):
    """Counting a rank's threads does not show where they run: under the
    translator, Open MPI 4's mpirun bound a rank of 2 threads to one core.
    On its own MPI and on every runtime that serves it, a rank of a hybrid
    flavor started with 2 threads may run on 2 cores."""
    require_published(module, published_flavors)
    if (os.cpu_count() or 1) < 2:
        pytest.skip(f"{module}: this host has {os.cpu_count()} core; a rank of 2 threads needs 2")
    if runtime and runtime_published(runtime, live_release):
        pytest.skip(f"{module} on {runtime.module_name}: {runtime_published(runtime, live_release)}")
    modules = f"{module} {runtime.module_name}" if runtime else module
    said = lmod.clean_shell(
        init_script,
        f"export OMP_NUM_THREADS=2\nmodule load {modules}\n"
        '[ "$(id -u)" != 0 ] || export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n'
        "mpirun -n 1 grep Cpus_allowed_list: /proc/self/status",
    )
    listed = said.stdout.split("Cpus_allowed_list:")[-1].strip()
    assert said.returncode == 0 and listed, (modules, said.stdout, said.stderr)
    assert _cpus(listed) >= 2, f"{modules}: a rank of 2 threads may run on CPUs {listed} only"
