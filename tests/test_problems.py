"""Real test problems through `module load`, as users run them: every
published flavor of an application runs each of its problems, and every
checked quantity must match the published reference within tolerance."""

import pytest

from onestack import problems, status

CASES = [(app, case) for app in problems.apps() for case in sorted(problems.load(app))]


@pytest.mark.parametrize("app,case", CASES, ids=[f"{a}/{c}" for a, c in CASES])
def test_problem_matches_reference(app, case, init_script, published_flavors, tmp_path):
    modules = [m for m in published_flavors if m.startswith(f"{app}/")]
    assert modules, f"no {app} flavor is published"
    problem = problems.load(app)[case]
    for module in modules:
        checks = problems.run(problem, problems.How(modules=(module,)), tmp_path / module.replace("/", "_"),
                              init_script)
        report = "\n".join(str(c) for c in checks)
        print(f"{module} {case}:\n{report}")
        status.record_result(module, case, all(c.passed for c in checks), [str(c) for c in checks])
        assert all(c.passed for c in checks), report
