"""Hybrid MPI+OpenMP flavors (`threads: openmp` in environments/<app>.yaml)
on one node, as users start them with mpirun: every problem of the
application as 2 ranks x 1 thread and as 1 rank x 2 threads, each checked
against its reference, and the program's own output says how many threads
each rank ran. The threads come from what the user set before `module load`
(OMP_NUM_THREADS); in a Slurm job from --cpus-per-task
(tests/cluster/test_flavors_across_nodes.py)."""

import pytest
from conftest import assert_checks, flavor_how, require_published, run_flavors

from onestack import problems, stack
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
