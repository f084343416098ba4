"""Real test problems through `module load`, as users run them: every
published flavor of an application runs each of its problems, and every
checked quantity must match the published reference within tolerance.
One test per flavor and case: each fails by its name."""

import pytest
from conftest import assert_checks, flavor_how, require_checked, require_published, run_flavors

from onestack import problems, stack, status

CASES = [(f.module_name, case) for f in run_flavors() for case in sorted(problems.load(f.app.module))]


@pytest.mark.parametrize("module,case", CASES, ids=[f"{m}:{c}" for m, c in CASES])
def test_problem_matches_reference(module, case, init_script, live_release, published_flavors, tmp_path):
    require_published(module, published_flavors)
    problem = problems.of_flavor(stack.load().flavor(module), case)
    outcome = problems.execute(problem, flavor_how(module, live_release), tmp_path, init_script)
    failure, checks = status.record_result(module, case, outcome)  # the flavor table's tests column
    assert not failure, f"{module} {case}: {failure}"
    assert_checks(f"{module} {case}", checks)
    require_checked(f"{module} {case}", checks)
