"""Real test problems through `module load`, as users run them: every
published flavor of an application runs each of its problems, and every
checked quantity must match the published reference within tolerance."""

import pytest

from onestack import problems, status

QE_PROBLEMS = problems.load("qe")


@pytest.mark.parametrize("case", sorted(QE_PROBLEMS))
def test_qe_problem_matches_reference(case, init_script, published_flavors, tmp_path):
    qe_flavors = [m for m in published_flavors if m.startswith("qe/")]
    assert qe_flavors, "no QE flavor is published"
    for module in qe_flavors:
        checks = problems.run(init_script, module, QE_PROBLEMS[case], tmp_path / module.replace("/", "_"))
        report = "\n".join(str(c) for c in checks)
        print(f"{module} {case}:\n{report}")
        status.record_result(module, case, all(c.passed for c in checks), [str(c) for c in checks])
        assert all(c.passed for c in checks), report


def test_checker_rejects_a_perturbed_reference():
    """The checker can fail: a reference energy moved by 1 mRy is a failure."""
    problem = QE_PROBLEMS["pw_scf-ncpp"]
    output = "!    total energy              =     -15.83976399 Ry\n     P=  -54.09\n"
    good = "!    total energy              =     -15.83976536 Ry\n     P=  -54.09\n"
    perturbed = "!    total energy              =     -15.84076536 Ry\n     P=  -54.09\n"
    assert all(c.passed for c in problems.compare(problem, output, good))
    assert not all(c.passed for c in problems.compare(problem, output, perturbed))
    assert not all(c.passed for c in problems.compare(problem, "no energy printed\n", good))
