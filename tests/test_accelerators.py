"""An application's accelerated styles for CPUs (environments/<app>.yaml
`accelerators`, e.g. LAMMPS's `-sf opt` and `-sf intel`): every published
flavor built with one runs each problem once more with it, through `module
load` as users do, checked against the same published reference as its
plain runs (tests/test_problems.py). One test per flavor, style and case."""

import pytest
from conftest import assert_checks, flavor_how, require_checked, require_published, run_flavors

from onestack import problems, stack

CASES = [
    (f.module_name, style, case)
    for f in run_flavors()
    for style in sorted(f.accelerators)
    for case in sorted(problems.load(f.app.module))
]


@pytest.mark.parametrize("module, style, case", CASES, ids=[f"{m}:{s}:{c}" for m, s, c in CASES])
def test_accelerated_styles_match_the_reference(
    module, style, case, init_script, live_release, published_flavors, tmp_path
):
    require_published(module, published_flavors)
    flavor = stack.load().flavor(module)
    problem = problems.of_flavor(flavor, case, style)
    checks = problems.run(problem, flavor_how(module, live_release), tmp_path, init_script)
    what = f"{module} {flavor.accelerators[style]} {case}"
    print(f"{what}: " + "; ".join(map(str, checks)))
    assert_checks(what, checks)
    require_checked(what, checks)


INTEL = [f.module_name for f in run_flavors("lmp") if "intel" in f.accelerators]
# The SPC/E water's edit that gives the neighbor lists room (tests/problems/lmp/spce.yaml).
ROOM = "neigh_modify one"


@pytest.mark.parametrize("module", INTEL)
def test_intel_neighbor_overflow_stops_with_lammps_error(
    module, init_script, live_release, published_flavors, tmp_path
):
    """The INTEL package once wrote past its neighbor cache and crashed
    where LAMMPS meant to stop; the site's recipe bounds it
    (packages/spack_repo/onestack/packages/lammps/intel-neighbor-cache-bound.patch).
    The SPC/E water without its room for neighbors must end in LAMMPS's own
    error (with a crash, MPICH's launcher exits with the signal's number).
    On one rank: LAMMPS prints a rank's error on that rank's screen, which
    only rank 0 has (a fresh run's rank 1 overflowed first: exit 1, no
    message), and the neighbors per atom do not depend on the ranks."""
    require_published(module, published_flavors)
    problem = problems.of_flavor(stack.load().flavor(module), "spce", "intel")
    edits = {file: [e for e in pairs if ROOM not in e[1]] for file, pairs in problem["edits"].items()}
    crowded = problems.Problem(problem.app, problem.case, {**problem.spec, "edits": edits, "ranks": 1})
    outcome = problems.execute(crowded, flavor_how(module, live_release), tmp_path, init_script)
    print(f"{module} -sf intel, spce without `{ROOM}`: exit {outcome.exit}")
    assert "boost neigh_modify one" in outcome.printed and outcome.exit != 0, (
        f"{module} -sf intel on spce without `{ROOM}`: exit {outcome.exit}, not LAMMPS's overflow error:\n"
        f"{outcome.printed[-2000:]}"
    )
